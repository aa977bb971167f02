"""panestore from PySpark code: define a pipeline, run it over a streaming DataFrame, fold,
verify, save.

The same pipeline as a configuration file and the ``panestore`` command, with the model's own
objects (``panes`` window functions, triggers, modes, combiners) and the DataFrame the caller
built (Kafka with their connector, Delta with their delta-spark, Auto Loader, a Python data
source, ...). With ``spark`` a SparkSession and ``bronze.events`` a table of (user, ts, amount)
rows (the examples of this package run so in ``tests/spark/test_doc_examples.py``):

>>> from panes import Sessions, AfterWatermark, AfterProcessingTime, AfterAny, AfterCount
>>> from panes import combiners
>>> from jobs import api
>>> events = spark.readStream.table("bronze.events")   # or Kafka, Auto Loader, a data source...
>>> pipeline = api.define(
...     "spend", source=events, lake="lakes/spend",
...     keys="user", event_time="ts", window=Sessions("30m"),
...     trigger=AfterWatermark(early=AfterAny(AfterCount(5), AfterProcessingTime("1m")),
...                            late=AfterCount(1)),
...     accumulation_mode="accumulating_and_retracting", allowed_lateness="2h",
...     watermark=api.Watermark(delay="5m"),
...     aggregates={"total": combiners.sum("amount"), "n": "count()"},
... )
>>> result = api.run(pipeline)    # scheduled: everything up to now, then returns
>>> api.verify(pipeline, spark.read.table("bronze.events")).ok   # the view = a batch
True
>>> api.save(pipeline, "conf/spend.toml")   # panestore query|history|verify conf/spend.toml
PosixPath('conf/spend.toml')

Everything a ``panestore run`` promises holds: an exactly-once pane log; late and rejected
records kept (a record the DataFrame cannot type is a rejected row with its reason); the lake's
run lock, configuration and checkpoint checks. Unlike the command, a call leaves the caller's
session and process as it found them: configuration, log levels, environment, the Python
workers' garbage-collector thresholds (:mod:`jobs.api.caller_state`). See ``docs/sources.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.api.pipelines import dataframe_source, define, delta_source, schema_of
    from jobs.api.streams import materialize, run, save, verify
    from jobs.config.pipeline import Pipeline
    from jobs.config.source import Source
    from jobs.config.values import PipelineConfigError
    from jobs.config.watermark import Watermark
    from jobs.driver.runs import RunResult

__all__ = [
    "Pipeline",
    "PipelineConfigError",
    "RunResult",
    "Source",
    "Watermark",
    "dataframe_source",
    "define",
    "delta_source",
    "materialize",
    "run",
    "save",
    "schema_of",
    "verify",
]
__getattr__ = lazy_exports(__name__, __file__)
