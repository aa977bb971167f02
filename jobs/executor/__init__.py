"""The code Spark runs in its Python workers: the stateful operator, its input and its output.

Imported per task, so it imports cheaply and nothing of the configuration loader, the driver,
the command line, the materializer or plotting (``tests/test_architecture.py`` holds this
budget). :class:`OperatorBatch` runs one of the model's engines per key bucket
(:class:`BucketProcessor`: the columnar engine, or the per-key engine; :mod:`.paths`) over rows
packed by :func:`pack_by_bucket`, moving data between Spark and the model: no rule of the model
is stated here. It keeps the buckets' state in shard files
(:mod:`.state_store`); tasks write their output as Parquet files (:mod:`.task_files`,
:mod:`.batch_output`). The sources' readers, which run here too, are in :mod:`jobs.sources`.

>>> from jobs.executor import pack_by_bucket
>>> pack_by_bucket.__module__
'jobs.executor.operator_input'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.executor.batch_output import write_batch_files
    from jobs.executor.operator import BucketProcessor, OperatorBatch, OperatorConfig, run_batch
    from jobs.executor.operator_input import InputSchema, pack_by_bucket, unpack
    from jobs.executor.output_tables import OutputTables
    from jobs.executor.task_files import TaskOutput, TaskWriting

__all__ = [
    "BucketProcessor",
    "InputSchema",
    "OperatorBatch",
    "OperatorConfig",
    "OutputTables",
    "TaskOutput",
    "TaskWriting",
    "pack_by_bucket",
    "run_batch",
    "unpack",
    "write_batch_files",
]
__getattr__ = lazy_exports(__name__, __file__)
