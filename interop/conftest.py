"""Fixtures: a real broker in a subprocess per test, and a check that it survived the test."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator

import pytest

from interop.clients import CPP_CLIENT, NODE_DIR
from interop.examples import EXAMPLE_PROGRAMS
from proton_broker.testing import BrokerProcess


@pytest.fixture(scope="session", autouse=True)
def _clients_built() -> None:
    """The clients come from interop/setup.sh; say so instead of failing obscurely."""
    missing = []
    if not CPP_CLIENT.exists():
        missing.append(str(CPP_CLIENT))
    for package in ("rhea", "rhea-promise", "amqp10"):
        if not (NODE_DIR / "node_modules" / package).is_dir():
            missing.append(f"{package} in interop/node/node_modules")
    missing += [str(path) for path in EXAMPLE_PROGRAMS if not path.exists()]
    if shutil.which("node") is None:
        missing.append("node")
    if missing:
        pytest.fail("run `bash interop/setup.sh` first; missing: " + ", ".join(missing))


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    process = BrokerProcess().start()
    yield process
    alive = process.alive()
    process.stop()
    output = "".join(process.output)
    if not alive:
        pytest.fail("the broker process died during the test:\n" + output)
    if "Traceback" in output:
        pytest.fail("the broker logged an exception during the test:\n" + output)


@pytest.fixture
def queue(request: pytest.FixtureRequest) -> str:
    """A queue name of the shape the Qpid interop suite uses: ``qit.<test name>``."""
    return "qit." + re.sub(r"[^A-Za-z0-9]+", ".", request.node.name).strip(".")
