"""Fixtures for the Spark tests: one SparkSession for the whole run, and the real broker in
a subprocess (Spark's Python workers are processes too; they reach it over a socket).

The session is local[2] with the UI off, two shuffle partitions, everything bound to
127.0.0.1 and the workers on this interpreter, as the issue asks. The tests skip when the
``spark`` extra is not installed (``./scripts/test`` installs it, and Java).
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip(
    "pyspark", reason="the spark extra is not installed (bash scripts/setup-venv.sh test,spark)"
)

from proton_broker.testing import BrokerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail(
            "Java is not installed: the Spark tests need a JDK 17 "
            "(./scripts/test installs openjdk-17-jre-headless when run as root)"
        )
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from proton_broker.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("proton-broker-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker_process() -> Iterator[BrokerProcess]:
    with BrokerProcess() as process:
        yield process


@pytest.fixture
def broker_url(broker_process: BrokerProcess) -> Iterator[str]:
    """The broker's URL; fails the test that left it dead."""
    yield broker_process.url
    if not broker_process.alive():
        pytest.fail("the broker died during the test:\n" + "".join(broker_process.output))


@pytest.fixture
def queue_name() -> str:
    """A queue of this test's own on the shared broker."""
    return f"spark.{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def strict_broker_url() -> Iterator[str]:
    """A second broker that creates no queue on demand: an unknown queue is refused."""
    with BrokerProcess(env={"PROTON_BROKER_BROKER_AUTO_CREATE": "false"}) as process:
        yield process.url
