"""PySpark data source ``kaflux``: Kafka for Spark through the kaflux client.

A drop-in replacement for Spark's JVM Kafka connector (which pyspark's wheel does not ship):
same options, same schema, same checkpoint offsets, so a job changes ``format("kafka")`` to
``format("kaflux")`` and nothing else::

    df = (spark.readStream.format("kaflux")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())

Registration is automatic. On the first data-source lookup of a session, Spark's
``lookup_data_sources`` worker imports every top-level module whose name starts with
``pyspark_`` and registers the ``DefaultSource`` it exports (a ``DataSource`` subclass) under
``DefaultSource.name()``, here ``"kaflux"``. Installing this package (so that ``pyspark_kaflux``
is importable by Spark's Python workers) is all it takes, for classic and Spark Connect sessions
alike: the lookup runs where the JVM is, in the Connect server.

That lookup runs once per JVM. A long-lived Connect server that did it before kaflux was
installed there lacks ``"kaflux"``; one call registers it for a session, and works the same on
classic and Connect sessions::

    from pyspark_kaflux import KafluxDataSource
    spark.dataSource.register(KafluxDataSource)

The class travels pickled by reference, so the server's Python must import this package either way.

Spark does not guard that import: a ``pyspark_*`` module that fails to import breaks every
Python data source of the session. So if a dependency (pyarrow) is missing, this module still
imports, without ``DefaultSource``, and logs why.
"""

import logging

try:
    from pyspark_kaflux.data_source import KafluxDataSource
except ImportError as error:  # pragma: no cover - only without the `spark` extra
    logging.getLogger("pyspark_kaflux").warning("the kaflux data source is unavailable: %s", error)
    __all__: list[str] = []
else:
    #: What Spark's auto-registration looks for in a ``pyspark_*`` module.
    DefaultSource = KafluxDataSource
    __all__ = ["DefaultSource", "KafluxDataSource"]
