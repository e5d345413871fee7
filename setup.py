"""The one compiled part of the package, built where a C compiler is at hand: the codec's
walks over application properties, the quick check and the one-key lookup
(proton_broker/codec/_simple_map.pyx, see docs/performance.md). Everything else is in
pyproject.toml. setuptools compiles the .pyx with Cython (a build requirement there).
Without a compiler the extension is skipped (``optional``) and the codec uses the same walks
written in Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proton_broker.codec._simple_map",
            ["proton_broker/codec/_simple_map.pyx"],
            optional=True,
        )
    ]
)
