"""The layer rules hold: dependencies point inward (docs/architecture.md, "Layers").

* Only ``amqp/`` and the client packages (``cli/``, ``spark/``) import Proton.
* The domain (everything but the adapters ``amqp/``, ``http/``, the clients ``cli/``,
  ``spark/`` and the composition root) never imports an adapter or a client package.
* The store knows messages and errors, nothing else of the broker.
* A compiled module (Cython, ``*.pyx``) uses CPython's and C's own declarations and nothing
  else: what it needs from the package (the codec's tables, its Python walks) is handed to it.

Every import counts, at the top of a module or inside a function: a lazy import is a
dependency that merely hides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "proton_broker"
PROTON = ("proton", "cproton_ffi", "cproton")
ADAPTERS = ("proton_broker.amqp", "proton_broker.http")
CLIENTS = ("proton_broker.cli", "proton_broker.spark")
ROOTS = ("proton_broker.__main__", "proton_broker.app")
MAY_IMPORT_PROTON = ("proton_broker.amqp", *CLIENTS)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


MODULES = {module_name(path): imports_of(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_rules_see_the_whole_package() -> None:
    assert "proton_broker.queues.queue" in MODULES and "proton_broker.amqp.links" in MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_amqp_and_the_clients_import_proton(module: str) -> None:
    if within(module, MAY_IMPORT_PROTON):
        return
    assert not {name for name in MODULES[module] if within(name, PROTON)}


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if not within(m, (*ADAPTERS, *CLIENTS, *ROOTS)))
)
def test_the_domain_imports_no_adapter_and_no_client(module: str) -> None:
    assert not {name for name in MODULES[module] if within(name, (*ADAPTERS, *CLIENTS))}


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if within(m, ("proton_broker.store",)))
)
def test_the_store_knows_only_messages_errors_and_itself(module: str) -> None:
    ours = {name for name in MODULES[module] if within(name, ("proton_broker",))}
    allowed = ("proton_broker.store", "proton_broker.message", "proton_broker.errors")
    assert {name for name in ours if not within(name, allowed)} == set()


def test_the_http_gateway_imports_no_proton_and_not_the_amqp_adapter() -> None:
    for module, names in MODULES.items():
        if within(module, ("proton_broker.http",)):
            assert not {n for n in names if within(n, (*PROTON, "proton_broker.amqp"))}, module


COMPILED = sorted(PACKAGE.rglob("*.pyx"))


def cython_imports_of(path: Path) -> set[str]:
    """The modules a Cython file imports or cimports (its import lines are Python's, with
    ``cimport`` beside ``import``)."""
    found = set()
    for line in path.read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "from":
            found.add(words[1])
        elif len(words) >= 2 and words[0] in ("import", "cimport"):
            found.update(name.strip(",") for name in words[1:] if name != "as")
    return found


def test_the_compiled_rules_see_the_compiled_modules() -> None:
    assert {PACKAGE / "codec" / "_simple_map.pyx", PACKAGE / "_collector.pyx"} <= set(COMPILED)


@pytest.mark.parametrize("path", COMPILED, ids=lambda path: path.name)
def test_a_compiled_module_imports_only_cpython_and_c(path: Path) -> None:
    allowed = ("cpython", "libc")
    assert {name for name in cython_imports_of(path) if not within(name, allowed)} == set()
