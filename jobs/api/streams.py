"""Running a pipeline from PySpark code, folding its view, verifying it, saving it.

:func:`run` is :func:`jobs.driver.runs.run` with the caller's streaming DataFrame as the records
of a ``dataframe`` source (any other source is read by its own reader), followed by the fold a
``panestore run`` does. The lake's guarantees are the command's: see :mod:`jobs.driver.runs`.
Like the command, each function first takes the AWS shared files' credentials into the
environment when it names none (:mod:`jobs.startup.aws_profile`; a lake in a bucket).

The examples continue :mod:`jobs.api`'s: ``pipeline`` there has run once over the table
``bronze.events``, and five more events have arrived since (``tests/spark/test_doc_examples.py``
runs them so).

Unlike the command, which owns its process, each function leaves the caller's session and
process as it found them (:mod:`jobs.api.caller_state`): the session's configuration and log
levels, the environment, the Python workers' garbage-collector thresholds.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from jobs.api.caller_state import as_found
from jobs.config.pipeline import Pipeline
from jobs.config.save import save_pipeline
from jobs.config.sink_spec import view_spec
from jobs.config.values import Duration, PipelineConfigError, parse_duration_setting
from jobs.driver.runs import RunResult, spark_interval
from jobs.driver.runs import run as run_pipeline
from jobs.startup.aws_profile import adopt_shared_profile
from jobs.startup.session import existing_session

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sinks.fold import MaterializeResult
    from sinks.verification import Report


def _events(pipeline: Pipeline, events: DataFrame | None) -> DataFrame | None:
    """The events a run of ``pipeline`` reads: ``events``, else the DataFrame it was defined
    with; checked to fit: given exactly for a ``dataframe`` source, streaming, with every column
    of the source's schema."""
    if pipeline.several_inputs:
        return _inputs_events(pipeline, events)
    src = pipeline.source
    if events is None:
        events = src.frame
    if not src.is_dataframe:
        if events is not None:
            raise PipelineConfigError(
                "source",
                f"pipeline {pipeline.name} reads its {src.format} source itself; give events "
                "only to a pipeline whose source is a DataFrame (api.dataframe_source)",
            )
        return None
    if events is None:
        raise PipelineConfigError(
            "source",
            f"pipeline {pipeline.name} reads a DataFrame it was not defined with: give it, "
            "run(pipeline, events)",
        )
    if not events.isStreaming:
        raise PipelineConfigError(
            "source",
            "the events must be a streaming DataFrame (spark.readStream...); a batch DataFrame "
            "of the same events is what verify(pipeline, events=...) takes",
        )
    have = set(events.columns)
    for column, _ in src.schema:
        if column not in have:
            raise PipelineConfigError(
                f"source.schema.{column}",
                f"the DataFrame has no column {column!r} (it has {', '.join(events.columns)})",
            )
    return events


def _inputs_events(pipeline: Pipeline, events: DataFrame | None) -> DataFrame | None:
    """Of a pipeline of several inputs, which reads each input's own source: None, after
    checking that each DataFrame input holds its streaming DataFrame (``define(sources=...)``),
    with every column of its schema; the first such DataFrame (whose session the run takes)."""
    if events is not None:
        raise PipelineConfigError(
            "events",
            f"pipeline {pipeline.name} reads several inputs, each its own source: define each "
            "DataFrame input with its DataFrame (define(sources={name: frame, ...}))",
        )
    first = None
    for one in pipeline.inputs:
        frame = one.source.frame
        if not one.source.is_dataframe:
            continue
        if frame is None or not frame.isStreaming:
            raise PipelineConfigError(
                f"inputs.{one.name}",
                f"input {one.name!r} reads a DataFrame: define it with a streaming DataFrame "
                "(define(sources={name: spark.readStream...}))",
            )
        missing = [c for c, _ in one.source.schema if c not in frame.columns]
        if missing:
            raise PipelineConfigError(
                f"inputs.{one.name}.schema.{missing[0]}",
                f"input {one.name!r}'s DataFrame has no column {missing[0]!r}",
            )
        first = first or frame
    return first


def run(
    pipeline: Pipeline,
    events: DataFrame | None = None,
    *,
    spark: SparkSession | None = None,
    follow: bool = False,
    drain: bool = False,
    interval: Duration = "10s",
    fold: bool = True,
    progress: TextIO | Literal["stderr"] | None = "stderr",
    stop_after_batches: int | None = None,
) -> RunResult:
    """Run ``pipeline``, then fold the view (``fold``). A pipeline over a streaming DataFrame
    reads the one it was defined with (``define(source=events)``), or ``events`` (a pipeline
    loaded from a configuration file, a new stream of the same events); any other source is
    read by the pipeline itself (files, a pane log, a Delta table).

    Scheduled by default: every input up to the run's start, in Spark's micro-batches (a batch
    a killed run left uncommitted first), then the batch that fires what became due; then the
    run returns. ``follow``: keep running, one batch per ``interval`` (a duration: µs, or text
    like ``"10s"``) while data arrives, until stopped (SIGINT/SIGTERM, or
    ``stop_after_batches``). ``drain``: then close every window. The session is ``events``' (or
    ``spark``; else the running one, with panestore's settings while the run runs:
    :func:`jobs.startup.session.get_session`; else a new local one). Raises
    :class:`jobs.config.PipelineConfigError` for an ``interval`` that is no duration and for
    events that do not fit the pipeline, :class:`sinks.lake.errors.LakeBusy` while another run holds
    the lake, and the run's failure.

    The caller's session and process are left as found, however the run ends (returned,
    raised, interrupted): the session's configuration (the ``availableNow`` wrapper, shuffle
    partitions, ...), log4j's levels, the environment (AWS credentials), the garbage-collector
    thresholds of the Python workers its later jobs reuse (:mod:`jobs.api.caller_state`).

    Progress lines go to ``progress`` (``"stderr"``: ``sys.stderr`` at the call, a notebook's
    or a test's too; None: nowhere); the result lists every batch (``result.batches``), and
    ``result.folded`` is the fold's outcome (None when not folded: another materializer held
    the lake, ``fold=False``). The fold is the run's last step: one that fails raises
    :class:`jobs.driver.runs.FoldFailed` and the run's row in ``runs`` says ``failed``.

    >>> result = run(pipeline)  # what is new in the stream it was defined with
    >>> print(result.summary())  # doctest: +ELLIPSIS
    1 batches, 5 rows, 1 panes, 0 late, 0 rejected in ...s (...)
    """
    every = spark_interval(parse_duration_setting("interval", interval))
    if progress == "stderr":  # not bound when the module was imported: it may have changed
        progress = sys.stderr
    events = _events(pipeline, events)
    session = events.sparkSession if events is not None else spark
    with as_found(session if session is not None else existing_session()):
        adopt_shared_profile()
        result = run_pipeline(
            pipeline,
            spark=session,
            follow=follow,
            drain=drain,
            interval=every,
            records=None if pipeline.several_inputs else events,
            progress=progress,
            stop_after_batches=stop_after_batches,
            fold=fold,
        )
    return result


def materialize(pipeline: Pipeline) -> MaterializeResult:
    """Fold the pane-log versions not yet folded into the ``current`` view (one MERGE, exactly
    once; ``panestore materialize``).

    >>> materialize(pipeline).line()  # run folded already
    'materialize: the current view is up to date'
    """
    from sinks.fold import Materializer

    with as_found(None):
        adopt_shared_profile()
        return Materializer(view_spec(pipeline)).run()


def verify(pipeline: Pipeline, events: DataFrame | Mapping[str, DataFrame] | None = None) -> Report:
    """Check the ``current`` view: against the pane log refolded, and against a batch
    computation over ``events`` (a batch DataFrame of the same events as the stream), or over
    the records the source holds (files, a Delta table, the upstream's view); a ``dataframe``
    source without ``events`` gets the refold only. A pipeline of several inputs reads each
    input's own; ``events`` then gives inputs' events by name (``{"clicks": batch DataFrame}``),
    which a DataFrame input needs (else the refold only). The batch check compares the windows final
    at the lake's watermark (all of them after a drain); windows still open are counted, not
    compared (``report.summary()``). ``report.ok`` is False on any difference; ``print(report)``
    lists them (``panestore verify``).

    >>> report = verify(pipeline, spark.read.table("bronze.events"))
    >>> report.ok
    True
    """
    from jobs.inspection.source_elements import load_source_elements, source_elements_are
    from sinks.verification import verify as verify_view

    elements = None
    notes = []
    one_table: DataFrame | None = None
    by_input: dict[str, DataFrame] | None = None
    if isinstance(events, Mapping):
        by_input = dict(events)
    else:
        one_table = events
    frames = [*by_input.values()] if by_input is not None else [one_table]
    session = next((f.sparkSession for f in frames if f is not None), None)
    unread = [
        one.name
        for one in pipeline.inputs
        if one.source.is_dataframe and (by_input is None or one.name not in by_input)
    ]
    with as_found(session):
        adopt_shared_profile()
        if one_table is not None:  # (several inputs: refused, one table for them all)
            elements = load_source_elements(pipeline, one_table.toArrow())
        elif pipeline.several_inputs and unread:
            notes.append(
                f"raw events not checked: give verify the events of DataFrame input {unread[0]} "
                "as a batch DataFrame (events={name: DataFrame})"
            )
        elif by_input is not None:  # (one input: refused, its events are one table)
            rows = {name: frame.toArrow() for name, frame in by_input.items()}
            elements = load_source_elements(pipeline, rows)
        elif not pipeline.source.is_dataframe or pipeline.several_inputs:
            elements = load_source_elements(pipeline)
        else:
            notes.append("raw events not checked: give verify the events as a batch DataFrame")
        report = verify_view(
            view_spec(pipeline), elements=elements, elements_are=source_elements_are(pipeline)
        )
    report.notes.extend(notes)
    return report


def save(pipeline: Pipeline, path: str | Path) -> Path:
    """Write ``pipeline`` as a configuration file, so the ``panestore`` command inspects,
    materializes and verifies its lake (a ``dataframe`` source is run from code only).

    >>> save(pipeline, "conf/spend.toml")
    PosixPath('conf/spend.toml')
    """
    return save_pipeline(pipeline, path)
