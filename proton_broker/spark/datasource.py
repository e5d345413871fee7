"""The ``amqp`` data source: Spark's entry point, handing out readers and writers.

Spark builds this class from the options on the driver (in the planner too), so it only
parses them: no connection is made until a reader or writer runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from proton_broker.spark import FORMAT
from proton_broker.spark.options import sink_options, source_options
from proton_broker.spark.rows import SCHEMA
from proton_broker.spark.sink import AmqpBatchWriter, AmqpStreamWriter
from proton_broker.spark.source import AmqpBatchReader, AmqpStreamReader


class AmqpDataSource(DataSource):
    """Queues of a proton-broker (or any broker with the same sequence-number contract)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return AmqpBatchReader(source_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return AmqpStreamReader(source_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _append_only(overwrite)
        return AmqpBatchWriter(sink_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _append_only(overwrite)
        return AmqpStreamWriter(sink_options(self.options))


def _append_only(overwrite: bool) -> None:
    """A queue takes messages; it cannot be replaced by a DataFrame."""
    if overwrite:
        raise ValueError(
            'the amqp sink only appends to a queue: use mode("append") '
            '(outputMode "append" for a stream)'
        )
