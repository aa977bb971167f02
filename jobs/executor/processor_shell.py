"""The stateful processor as shipped to Spark: light to unpickle, loaded where it runs.

Spark runs a ``transformWithStateInPandas`` processor's ``init`` once on the driver before a query's
first batch, in a Python process of its own started for that purpose, to learn the processor's state
variables. That process unpickles the processor: the operator
(:class:`jobs.executor.operator.BucketProcessor`) would import pandas, pyarrow, the engine and the
job's modules there (about a second of a run, measured), only to register one state variable.

:class:`ProcessorShell` carries the operator pickled as bytes, and the name and schema of its
one state variable. ``init`` registers that state variable itself (state variables can only be
made in ``init``) and the operator is unpickled on the first call that needs it, on an executor,
and handed the handle and the state. This module imports nothing heavy, so unpickling the shell
costs nothing beyond PySpark's own modules. Behaviour is the operator's own.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.streaming import StatefulProcessor


class ProcessorShell(StatefulProcessor):
    """A ``StatefulProcessor`` that defers unpickling ``processor`` until it handles rows.

    ``processor`` must have one ValueState, named ``state_name`` with ``state_schema``, and an
    ``attach(handle, state)`` that does what its ``init`` does with the given state.
    """

    def __init__(self, processor: Any, state_name: str, state_schema: Any) -> None:
        self._payload = cloudpickle.dumps(processor)
        self._state_name = state_name
        self._state_schema = state_schema
        self._processor = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_processor": None}

    def init(self, handle) -> None:
        self._handle = handle
        self._state = handle.getValueState(self._state_name, self._state_schema)
        self._processor = None

    def _loaded(self):
        if self._processor is None:
            processor = pickle.loads(self._payload)
            processor.attach(self._handle, self._state)
            self._processor = processor
        return self._processor

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        return self._loaded().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        return self._loaded().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def close(self) -> None:
        if self._processor is not None:
            self._processor.close()
