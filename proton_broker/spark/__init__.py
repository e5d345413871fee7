"""The PySpark connector (the ``spark`` extra): a source and sink for broker queues, and
batch jobs over store snapshots. The broker never imports this package.

Register the data source once per SparkSession, then use ``format("amqp")``::

    from proton_broker.spark import register
    register(spark)
    spark.readStream.format("amqp").option("queues", "orders").load()
"""

from __future__ import annotations

from typing import Any

FORMAT = "amqp"


def register(spark: Any) -> None:
    """Register the ``amqp`` data source with ``spark`` (a SparkSession)."""
    from proton_broker.spark.datasource import AmqpDataSource

    spark.dataSource.register(AmqpDataSource)
