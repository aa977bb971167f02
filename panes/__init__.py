"""panes: the Dataflow model in Python.

Windows say *where* in event time results are computed, triggers *when* in processing time
they are emitted, combiners *what* is computed, and the accumulation mode *how* refinements
relate. Two engines turn elements, watermark and processing time into panes by the same rules
(:mod:`panes.rules`): the per-key :class:`~panes.engine.Engine` (every configuration, pure
Python) and the columnar engine (:mod:`panes.columnar`: many keys' windows as one table, with
numpy and Arrow, imported only when used); the :class:`Simulator` drives either over many keys.
Nothing here imports Spark, Delta or DuckDB.
"""

from panes import combiners
from panes.engine import Combined, Engine, Output
from panes.engines import EngineKind
from panes.inputs import INPUT_COLUMN, InputClock, Inputs
from panes.pane import Dropped, DropReason, Pane, PaneInfo, Timing
from panes.simulator import Simulator
from panes.state import KeyState
from panes.syntax import (
    AggregateSyntaxError,
    ModelSyntaxError,
    TriggerSyntaxError,
    parse_aggregate,
    parse_trigger,
    parse_window,
)
from panes.time import BEGINNING_OF_TIME, END_OF_TIME, format_duration, parse_duration
from panes.triggers import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterFirst,
    AfterProcessingTime,
    AfterWatermark,
    Always,
    DefaultTrigger,
    Never,
    OrFinally,
    Repeatedly,
    Trigger,
)
from panes.weights import Retracted, WeightedInputError
from panes.window import GLOBAL_WINDOW, Window
from panes.windowfns import FixedWindows, GlobalWindows, Sessions, SlidingWindows, WindowFn
from panes.windowing import (
    AccumulationMode,
    ClosingBehavior,
    OnTimeBehavior,
    TimestampCombiner,
    Windowing,
)

__all__ = [
    "BEGINNING_OF_TIME",
    "END_OF_TIME",
    "GLOBAL_WINDOW",
    "INPUT_COLUMN",
    "AccumulationMode",
    "AfterAll",
    "AfterAny",
    "AfterCount",
    "AfterEach",
    "AfterFirst",
    "AfterProcessingTime",
    "AfterWatermark",
    "AggregateSyntaxError",
    "Always",
    "ClosingBehavior",
    "DefaultTrigger",
    "DropReason",
    "Dropped",
    "Combined",
    "Engine",
    "FixedWindows",
    "GlobalWindows",
    "KeyState",
    "ModelSyntaxError",
    "Never",
    "OnTimeBehavior",
    "OrFinally",
    "Output",
    "EngineKind",
    "Pane",
    "PaneInfo",
    "Repeatedly",
    "Retracted",
    "Sessions",
    "InputClock",
    "Inputs",
    "Simulator",
    "SlidingWindows",
    "Timing",
    "TimestampCombiner",
    "Trigger",
    "TriggerSyntaxError",
    "WeightedInputError",
    "Window",
    "WindowFn",
    "Windowing",
    "combiners",
    "format_duration",
    "parse_aggregate",
    "parse_duration",
    "parse_trigger",
    "parse_window",
]
