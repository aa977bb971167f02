"""A run's checks before Spark starts: one sequence, run once (:func:`check_run`).

A run of a lake refuses, before Spark reads anything, what would lose or corrupt data or run
under settings the lake was not written with (:func:`check_run`). In order, each naming what is
wrong and how to recover (``docs/running.md``, "Recovering a lake"):

1. the paths of the configuration (:func:`jobs.config.checks.check_paths`);
2. a lake that was copied or moved, or whose landing directory changed; recorded at the lake's
   first run (:func:`jobs.driver.lake_identity.check_lake_identity`);
3. a source table that is not the one the pipeline has read: a rebuilt upstream pane log
   (:func:`jobs.sources.pane_log.identity.check_upstream`) or a recreated Delta table
   (:func:`jobs.sources.delta_table.driver.check_source_table`);
4. a configuration the lake is not bound to
   (:func:`jobs.driver.fingerprint.bind_lake_configuration`);
5. a checkpoint and tables that do not belong together, in either direction
   (:func:`check_against_tables`);
6. the state layout (:func:`check_state_layout`): another ``state_buckets``, or a format this
   version does not read; a new lake's is recorded.

Steps 2-6 run under the lake's run lock (:func:`jobs.driver.runs.run` holds it): a run's
records are made by the run that holds the lake.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from jobs.checkpoint import check_not_behind, check_readable, check_tables_not_behind
from jobs.config.checks import check_paths
from jobs.config.inputs import Input
from jobs.config.pipeline import Pipeline
from jobs.config.values import PipelineConfigError
from jobs.driver.fingerprint import bind_lake_configuration
from jobs.driver.lake_identity import check_lake_identity
from jobs.executor.operator_input import balanced_bucket_ids
from jobs.startup.session import SHUFFLE_PARTITIONS
from sinks.lake import UpstreamChanged


@dataclass(frozen=True)
class Preflight:
    """What a run's checks found: the lake's state layout, and by input the id of the source
    table it reads (a pane log or Delta table; None for files and DataFrames, or a table the
    pipeline has not read yet), which its reader holds the table to."""

    state: StateLayout
    source_tables: Mapping[str, str | None]

    def source_table(self, one: Input) -> str | None:
        """The id of the table input ``one`` reads (None: none, or none read yet)."""
        return self.source_tables.get(one.name)


def check_before_lock(pipeline: Pipeline) -> None:
    """Step 1, before the lock is taken (the lock lives in the lake the paths name)."""
    check_paths(pipeline)


def check_run(pipeline: Pipeline, partitions: int | None) -> Preflight:
    """Steps 2-6 of the module doc, in order, each once; ``partitions``: the shuffle
    partitions a new lake's state is spread over (:func:`check_state_layout`). Raises
    :class:`PipelineConfigError` or a :class:`sinks.lake.errors.LakeError` naming the problem."""
    check_lake_identity(pipeline, record=True)
    source_tables = check_source_identity(pipeline)
    bind_lake_configuration(pipeline)
    check_against_tables(pipeline)
    return Preflight(check_state_layout(pipeline, partitions), source_tables)


def check_source_identity(pipeline: Pipeline) -> dict[str, str | None]:
    """Step 3: by input read by version (a pane log or a Delta table), the id of the table it
    has read (None: none yet); raises :class:`sinks.lake.errors.UpstreamChanged` for another
    table. Each of several inputs is checked against its own offsets (they name it)."""
    from jobs.sources.delta_table.driver import check_source_table
    from jobs.sources.pane_log.identity import check_upstream

    found: dict[str, str | None] = {}
    several = pipeline.several_inputs
    for one in pipeline.input_list:
        if not (one.source.is_pane_log or one.source.is_delta):
            continue
        check = check_upstream if one.source.is_pane_log else check_source_table
        if not several:
            found[one.name] = check(pipeline)
            continue
        try:
            found[one.name] = check(pipeline.read_as(one), one.name)
        except UpstreamChanged as e:  # which of the inputs
            raise type(e)(f"input {one.name}: {e}") from None
    return found


# -- the state layout -------------------------------------------------------------------------


STATE_LAYOUT_FILE = "_state_layout.json"
STATE_LAYOUT_FORMAT = 7
"""The version of the lake's state layout (``format`` in its layout file): 7 keeps the state in
the operator's own shard files (:mod:`jobs.executor.state_store`), a bucket in the one encoding
of its pipeline's path (:meth:`jobs.executor.operator.OperatorConfig.engines`): a table of its
windows with 128-bit sums for the columnar path (:mod:`panes.columnar`), its keys' engine
states for the others (:mod:`jobs.executor.bucket_state`). Lakes of formats 1-6 are refused
with how to rebuild them (:func:`check_state_layout`): nothing was migrated at 0.1.0."""
READABLE_STATE_LAYOUTS = (STATE_LAYOUT_FORMAT,)
DEDUP_ID_FORMAT = 2
"""The version of the record ids a deduplicating lake remembers (``dedup_id`` in its layout
file): 2 writes a double or float id column as its exact hexadecimal text
(:func:`jobs.executor.record_rules.double_text`); 1 (a layout without the field) wrote the
decimal text of the path that read the record, which Spark and Arrow write differently."""


class StateLayout(NamedTuple):
    """How a lake's state is laid out: the buckets' grouping values and the operator's shards
    (its tasks)."""

    bucket_ids: tuple[int, ...]
    shards: int


class RecordedLayout(NamedTuple):
    """A lake's state layout as its first run recorded it (:func:`recorded_state_layout`)."""

    state_buckets: int
    bucket_ids: tuple[int, ...]
    shards: int
    dedup_id: int
    """The :data:`DEDUP_ID_FORMAT` of the ids the lake remembers (1: recorded without it)."""


def recorded_state_layout(pipeline: Pipeline) -> RecordedLayout | None:
    """The state layout the lake's first run recorded (None: none yet), read only; a layout of
    a format this version does not read is refused (:class:`PipelineConfigError` naming the
    file and how to rebuild the lake)."""
    files = pipeline.run_files
    path = files.uri(STATE_LAYOUT_FILE)
    text = files.read_if_any(STATE_LAYOUT_FILE)
    if text is None:
        return None
    recorded = json.loads(text)
    if recorded.get("format") not in READABLE_STATE_LAYOUTS:
        raise PipelineConfigError(
            "lake",
            f"{path} records state layout format {recorded.get('format')}, which this "
            f"version does not read (it reads {STATE_LAYOUT_FORMAT} only): rebuild the lake: "
            f"{pipeline.set_aside} and run again.",
        )
    return RecordedLayout(
        recorded["state_buckets"],
        tuple(recorded["bucket_ids"]),
        recorded["shards"],
        recorded.get("dedup_id", 1),
    )


def _check_dedup_ids(pipeline: Pipeline, recorded: RecordedLayout) -> None:
    """Refuse a lake whose remembered record ids are of an older :data:`DEDUP_ID_FORMAT` when
    the pipeline's ids hold a double or float column: a record seen before the upgrade would
    get another id after it and be counted twice. Ids of other columns are unchanged."""
    if recorded.dedup_id == DEDUP_ID_FORMAT:
        return
    for one in pipeline.input_list:
        types = one.types
        floating = [c for c in one.dedup if types.get(c) in ("double", "float")]
        if floating:
            raise PipelineConfigError(
                one.dedup_setting(),
                f"the lake {pipeline.lake_location} remembers the ids of its records in an "
                f"older form for the {types[floating[0]]} column {floating[0]!r}: a duplicate "
                f"of a record it has seen would be counted again; rebuild it: "
                f"{pipeline.set_aside} and run again.",
            )


def check_state_layout(pipeline: Pipeline, partitions: int | None = None) -> StateLayout:
    """The lake's state layout (:class:`StateLayout`; grouping values:
    :func:`jobs.executor.operator_input.balanced_bucket_ids`).

    The operator's state is laid out by ``state_buckets``, these values and the shards: the first
    run of a lake records them with the layout's format version
    (``<checkpoint>/_state_layout.json``), the values spread over ``partitions`` shards (default
    :data:`~jobs.startup.session.SHUFFLE_PARTITIONS`). Every later run reads them back, and refuses
    a lake of another format version, a checkpoint without a recorded layout, or another
    ``state_buckets``: running would lose every key's state. A lake of another format is refused
    in one line naming its layout file, its format and how to rebuild the lake (set it aside:
    :attr:`jobs.config.pipeline.Pipeline.set_aside`, and run again).
    """
    recorded = recorded_state_layout(pipeline)
    if recorded is not None:
        _check_dedup_ids(pipeline, recorded)
        if recorded.state_buckets != pipeline.state_buckets:
            raise PipelineConfigError(
                "state_buckets",
                f"the lake {pipeline.lake_location} was written with state_buckets = "
                f"{recorded.state_buckets}; running with {pipeline.state_buckets} would lose "
                f"the state of every key. Keep {recorded.state_buckets}, or start a new lake.",
            )
        return StateLayout(recorded.bucket_ids, recorded.shards)
    files = pipeline.run_files
    if files.exists("_checkpoint"):
        raise PipelineConfigError(
            "lake",
            f"the lake {pipeline.lake_location} has a checkpoint but no {STATE_LAYOUT_FILE}: it "
            f"was written by an older version; rebuild it: {pipeline.set_aside} and run again.",
        )
    shards = partitions or SHUFFLE_PARTITIONS
    ids = balanced_bucket_ids(pipeline.state_buckets, shards)
    layout = {
        "format": STATE_LAYOUT_FORMAT,
        "state_buckets": pipeline.state_buckets,
        "bucket_ids": ids,
        "shards": shards,
        "dedup_id": DEDUP_ID_FORMAT,
    }
    files.replace(STATE_LAYOUT_FILE, json.dumps(layout))
    return StateLayout(ids, shards)


def check_against_tables(pipeline: Pipeline) -> None:
    """Refuse a checkpoint and tables that do not belong together, in either direction, before
    Spark reads the checkpoint: :func:`check_readable`, then :func:`check_not_behind` and
    :func:`check_tables_not_behind` against the batch each of the run's tables (pane log,
    late, rejected) holds. Reads the tables' logs only (nothing is created). Raises
    :class:`CheckpointError`."""
    checkpoint = pipeline.run_files.sub("_checkpoint")
    check_readable(checkpoint)
    committed = tables_committed(pipeline)
    held = [c for c in committed.values() if c is not None]
    check_not_behind(checkpoint, max(held, default=None))
    check_tables_not_behind(checkpoint, committed, pipeline.set_aside)


RUN_TABLES = ("panes", "late", "rejected")
"""The tables every batch of a run commits to (an empty batch too), in its own transaction."""


def tables_committed(pipeline: Pipeline) -> dict[str, int | None]:
    """Each run table's path -> the highest batch of ``pipeline`` it holds (None: none, or
    no table there)."""
    from jobs.config.sink_spec import view_spec
    from sinks.lake import existing_table, transaction_version

    spec = view_spec(pipeline)
    committed: dict[str, int | None] = {}
    for name in RUN_TABLES:
        table = existing_table(spec, name)
        version = None if table is None else transaction_version(table, pipeline.name)
        committed[spec.table_path(name)] = version
    return committed
