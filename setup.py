"""The compiled parts of the package, built where a C compiler is at hand: the codec's
walks over application properties, the quick check and the one-key lookup
(proton_broker/codec/_simple_map.pyx), and the collector's helper that takes an object out
of its view (proton_broker/_collector.pyx); see docs/performance.md. Everything else is in
pyproject.toml. setuptools compiles each .pyx with Cython (a build requirement there).
Without a compiler the extensions are skipped (``optional``): the codec uses the same walks
written in Python, and the collector keeps every object in its view."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proton_broker.codec._simple_map",
            ["proton_broker/codec/_simple_map.pyx"],
            optional=True,
        ),
        Extension("proton_broker._collector", ["proton_broker/_collector.pyx"], optional=True),
        Extension(
            "proton_broker.amqp._engine",
            ["proton_broker/amqp/_engine.pyx"],
            optional=True,
        ),
    ]
)
