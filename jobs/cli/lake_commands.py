"""Inspection and maintenance subcommands: materialize, verify, query, changes, history, plot,
report, optimize, status, vacuum. ``add_subcommands(subparsers)`` adds them to the ``panestore``
parser; each handler returns an :class:`~jobs.cli.exit_status.ExitStatus` (0 ok; 1 an error,
differences found by ``verify``, a last run that failed or a watermark lagging (``status``);
2 misuse: bad arguments, an invalid configuration, a table that does not exist yet; 3 another
materializer holds the lake's materializer lock), with a one-line message on stderr.
The fold at the end of a run is :func:`jobs.driver.runs.fold_view`."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from jobs.cli.exit_status import ExitStatus
from jobs.config.load import load_pipeline
from jobs.config.pipeline import Pipeline
from jobs.config.values import PipelineConfigError, parse_size_setting
from sinks.lake import one_line


def _load(conf: str) -> Pipeline:
    return load_pipeline(conf)


def _spec(conf: str):
    from jobs.config.sink_spec import view_spec

    return view_spec(_load(conf))


def _key(text: str, spec) -> Any:
    parts = text.split(",") if len(spec.keys) > 1 else [text]
    return tuple(parts) if len(parts) > 1 else parts[0]


def _version(text: str) -> int:
    """A Delta table version: a whole number >= 0."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a view version (0, 1, ...), got {text!r}")
    return int(text)


def _time_us(text: str) -> int:
    """A window start: microseconds since the epoch, or an ISO-8601 time (UTC if no zone)."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected microseconds since the epoch or an ISO-8601 time "
            f"(2024-06-01T09:00:00Z), got {text!r}"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1_000_000)


def _hours(text: str) -> int:
    """A retention in whole hours, >= 0."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected whole hours (0, 24, 168, ...), got {text!r}")
    return int(text)


def _out_file(text: str) -> str:
    """An output file whose directory exists."""
    directory = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(directory):
        raise argparse.ArgumentTypeError(f"{text}: the directory {directory} does not exist")
    return text


def _out_dir(text: str) -> str:
    """An output directory: created if missing (its parent must exist), not a file."""
    path = os.path.abspath(text)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text} is a file, not a directory")
    if not os.path.isdir(os.path.dirname(path)):
        raise argparse.ArgumentTypeError(
            f"{text}: the directory {os.path.dirname(path)} does not exist"
        )
    return text


def _count(text: str) -> int:
    """A whole number >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _size(text: str) -> int:
    """A size: 512MiB, 2GiB, 100MB or a number of bytes."""
    try:
        return parse_size_setting("--memory", text)
    except PipelineConfigError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def cmd_materialize(a) -> int:
    from sinks.fold import Materializer

    spec = _spec(a.conf)
    if a.memory is not None:
        spec = replace(spec, fold_memory=a.memory)
    spread = None
    if a.master is not None:  # a fold too large for one piece goes over its executors
        from jobs.driver.fold_spread import SparkSpread
        from jobs.startup.session import SessionOptions

        spark = SessionOptions(f"panestore-materialize-{spec.name}", master=a.master).start()
        spread = SparkSpread(spark)
    if a.rebuild:
        from sinks.fold import rebuild_view

        print(rebuild_view(spec))
        return 0
    from sinks.lake import shared_snapshots

    with shared_snapshots():  # each table's log read once by the fold (as a run's fold does)
        print(Materializer(spec, spread=spread).run().line())
    return 0


def cmd_verify(a) -> int:
    from jobs.config.sink_spec import view_spec
    from jobs.inspection.source_elements import load_source_elements, source_elements_are
    from sinks.lake import UpstreamChanged
    from sinks.verification import Check, verify

    pipeline = _load(a.conf)
    spec = view_spec(pipeline)
    elements = None
    refused: UpstreamChanged | None = None
    if not a.pane_log_only:
        try:
            elements = load_source_elements(pipeline)
        except UpstreamChanged as e:  # the upstream's view is not of what the view was read from
            refused = e
        except Exception as e:
            print(f"(raw events not checked: {e})")
    elements_are = source_elements_are(pipeline)
    report = verify(spec, elements=elements, elements_are=elements_are)
    if refused is not None:
        report.checks.append(Check(f"view = batch over {elements_are}", [str(refused)]))
    print(report)
    return 0 if report.ok else 1


def cmd_query(a) -> int:
    from sinks.presentation import query

    text = query(_spec(a.conf), a.sql, fmt=a.format, out=a.out, as_of=a.as_of)
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_changes(a) -> int:
    from sinks.presentation import changes

    text, read = changes(_spec(a.conf), a.since, a.until, fmt=a.format, out=a.out)
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    print(read.line(), file=sys.stderr)
    return 0


def cmd_history(a) -> int:
    """A key's pane sequence; with ``--elements``, each window's input records too, by input
    for a pipeline of several (read as ``verify`` reads them)."""
    from sinks.presentation import history, window_elements

    spec = _spec(a.conf)
    key = _key(a.key, spec)
    print(history(spec, key, a.window))
    if a.elements:
        from jobs.inspection.source_elements import load_source_elements

        elements = load_source_elements(_load(a.conf))
        print()
        print(window_elements(spec, key, elements, a.window))
    return 0


def cmd_plot(a) -> int:
    """One command, two pictures: a key's panes (``--key``) or the lake's skew (``--skew``:
    the watermark against processing time across runs, :mod:`sinks.presentation.run_plots`)."""
    from jobs.config.sink_spec import view_spec
    from jobs.inspection.source_elements import load_source_elements
    from sinks.lake import InvalidRequest

    if a.skew == (a.key is not None):
        raise InvalidRequest("give either --key KEY (a key's panes) or --skew (the runs' skew)")
    if a.skew and (a.window is not None or a.elements):
        raise InvalidRequest("--window and --elements are options of --key, not of --skew")
    pipeline = _load(a.conf)
    spec = view_spec(pipeline)
    if a.skew:
        from sinks.presentation import plot_skew

        print(plot_skew(spec, a.out or f"{spec.name}-skew.png", last=a.last))
        return 0
    if a.last is not None:
        raise InvalidRequest("--last is an option of --skew, not of --key")
    from sinks.presentation import plot

    out = a.out or f"{spec.name}-{a.key}.png"
    elements = None
    if a.elements:
        try:
            elements = load_source_elements(pipeline)
        except Exception as e:
            print(f"(elements not plotted: {e})")
    print(plot(spec, _key(a.key, spec), out, window_start=a.window, elements=elements))
    return 0


def cmd_report(a) -> int:
    """Write ``DIR/index.html``, the pipeline's health on one page
    (:mod:`sinks.presentation.report`), with the lake's status
    (:func:`jobs.inspection.status.lake_status`) and the largest open windows of its operator state
    (else the report reads them from the pane log)."""
    from jobs.config.sink_spec import view_spec
    from jobs.inspection.status import lake_status
    from sinks.presentation import write_report

    pipeline = _load(a.conf)
    status = lake_status(pipeline)
    state = status.operator_state  # None: no committed batch yet, or not readable
    largest = None if state is None else state.largest_open_windows
    print(write_report(view_spec(pipeline), a.out, status, largest=largest, last=a.last))
    return 0


def cmd_optimize(a) -> int:
    from sinks.upkeep import optimize

    for r in optimize(_spec(a.conf)):
        print(r.line())
    return 0


def _duration(text: str) -> int:
    """``15m`` / ``2h`` / ``90s`` -> microseconds."""
    from panes import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_status(a) -> int:
    """Print the lake's status (:func:`jobs.inspection.status.lake_status`); exit 1 when the last
    run failed or was killed, or the watermark lags beyond ``--max-lag``."""
    import json

    from jobs.inspection.status import lake_status

    status = lake_status(_load(a.conf), max_lag_us=a.max_lag)
    if a.json:
        print(json.dumps(status.to_json(), indent=2))
    else:
        print("\n".join(status.lines()))
    return ExitStatus.OK if status.healthy else ExitStatus.FAILED


def cmd_vacuum(a) -> int:
    from sinks.upkeep import vacuum

    for r in vacuum(_spec(a.conf), a.retention_hours, dry_run=a.dry_run, force=a.force):
        print(r.line())
    return 0


def _guard(fn):
    """``fn`` reporting the lake's and the configuration's errors on one line of stderr, with
    their exit status (:func:`error_status`)."""

    def run(a) -> int:
        from sinks.lake import LakeError

        try:
            return fn(a)
        except (LakeError, PipelineConfigError, OSError) as e:  # OSError: writing --out
            print(f"panestore {a.command}: {one_line(e)}", file=sys.stderr)
            return error_status(e)

    return run


def error_status(error: Exception) -> ExitStatus:
    """The exit status of a command that ``error`` ended (:class:`ExitStatus`)."""
    from jobs.checkpoint.logs import CheckpointError
    from sinks.lake import (
        InvalidRequest,
        LakeBusy,
        NoConditionalWrites,
        SourceTableError,
        TableMissing,
        UpstreamChanged,
    )

    if isinstance(error, LakeBusy):
        return ExitStatus.BUSY
    refused = (
        *(PipelineConfigError, InvalidRequest, TableMissing, CheckpointError),
        # a table source that cannot be read on; a store that cannot lock without single_writer
        *(UpstreamChanged, SourceTableError, NoConditionalWrites),
    )
    if isinstance(error, refused):
        return ExitStatus.MISUSE
    return ExitStatus.FAILED


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    def sub(name: str, fn, help: str):
        p = subparsers.add_parser(name, help=help, description=help)
        p.add_argument("conf", metavar="CONF", help="pipeline configuration (TOML)")
        p.set_defaults(handler=_guard(fn), command=name)
        return p

    p = sub("materialize", cmd_materialize, "fold new pane-log versions into the current view")
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="rebuild the view from the whole pane log (after a view-only change)",
    )
    p.add_argument(
        "--memory",
        type=_size,
        metavar="SIZE",
        help="the most memory the fold takes (512MiB, 2GiB, ...; default: the configuration's "
        "fold_memory); a larger backlog is folded in pieces",
    )
    p.add_argument(
        "--master",
        metavar="URL",
        help="a Spark master (local[4], spark://host:7077, ...): a fold in pieces folds them "
        "as Spark tasks on its executors (default: in this process, no Spark)",
    )
    p = sub(
        "verify",
        cmd_verify,
        "recompute the view from the pane log and from the raw events as a batch (the "
        "windows final at the lake's watermark; the others are counted as still open); exit "
        "status 1 on any difference",
    )
    p.add_argument("--pane-log-only", action="store_true", help="skip the raw-event batch check")
    p = sub(
        "query",
        cmd_query,
        "SQL over the tables panes, current, late, rejected, runs (DuckDB); read-only: a statement "
        "that writes or changes settings is refused (exit status 2)",
    )
    p.add_argument(
        "sql",
        metavar="SQL",
        help="one SELECT (or WITH, FROM, VALUES, PIVOT, DESCRIBE, SHOW, SUMMARIZE, a PRAGMA "
        "that reads) or an EXPLAIN of one",
    )
    p.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    p.add_argument(
        "--out", type=_out_file, help="write the result to this file (needed for parquet)"
    )
    p.add_argument(
        "--as-of",
        action="append",
        metavar="AS_OF",
        help="time travel: TABLE:N (a table at its Delta version N; view:N is current:N), a "
        "time (every table as it was then), folded:N (the view folded from the pane log up to "
        "its version N); repeat or separate with commas; every table the query reads must be "
        "pinned",
    )
    p = sub(
        "changes",
        cmd_changes,
        "the current view's change feed: the rows each materialize inserted, updated (pre and "
        "post image) and deleted, from view version --since on",
    )
    p.add_argument(
        "--since",
        type=_version,
        required=True,
        metavar="VERSION",
        help="first view version to read (the last one read + 1)",
    )
    p.add_argument(
        "--until",
        type=_version,
        metavar="VERSION",
        help="last view version to read (default: the latest)",
    )
    p.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    p.add_argument(
        "--out", type=_out_file, help="write the result to this file (needed for parquet)"
    )
    p = sub("history", cmd_history, "the pane sequence of a key's windows")
    p.add_argument("--key", required=True, help="key value (comma-separated for several keys)")
    p.add_argument("--window", type=_time_us, help="window start (µs or ISO time)")
    p.add_argument(
        "--elements",
        action="store_true",
        help="also each window's input records (by input, for several inputs)",
    )
    p = sub(
        "plot",
        cmd_plot,
        "PNG of how a key's windows evolved (--key: event vs processing time), or of the "
        "watermark against processing time across runs (--skew)",
    )
    p.add_argument("--key", help="key value (comma-separated for several keys)")
    p.add_argument(
        "--skew",
        action="store_true",
        help="the watermark after each run against processing time, the ideal line, the skew, "
        "late and rejected records per run (from the runs table)",
    )
    p.add_argument("--window", type=_time_us, help="window start (µs or ISO time; --key)")
    p.add_argument(
        "--last", type=_count, metavar="N", help="only the newest N runs (--skew; default: all)"
    )
    p.add_argument(
        "--out", type=_out_file, help="PNG file (default NAME-KEY.png, with --skew NAME-skew.png)"
    )
    p.add_argument(
        "--elements",
        action="store_true",
        help="also plot the landing zone's elements (at their window's first pane; --key)",
    )
    p = sub(
        "report",
        cmd_report,
        "write DIR/index.html: one page of the pipeline's health (status, the skew, panes per "
        "run, late and rejected records, the largest open windows, the last runs)",
    )
    p.add_argument(
        "--out", type=_out_dir, required=True, metavar="DIR", help="directory to write it in"
    )
    p.add_argument(
        "--last", type=_count, default=30, metavar="N", help="runs listed in its table (30)"
    )
    sub("optimize", cmd_optimize, "compact small files of the pane log and the view")
    p = sub(
        "status",
        cmd_status,
        "the lake's status without Spark: watermark and its lag, backlog, last batch, tables, "
        "the view's fold, locks, the last run (docs/operations.md); exit status 1 when the last "
        "run failed or the watermark lags",
    )
    p.add_argument("--json", action="store_true", help="the status as JSON (schema 1)")
    p.add_argument(
        "--max-lag",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="exit status 1 when the watermark is further behind the wall clock (e.g. 15m)",
    )
    p = sub("vacuum", cmd_vacuum, "delete unreferenced files older than the retention period")
    p.add_argument(
        "--retention-hours",
        type=_hours,
        default=None,
        help="default: the table's retention (7 days); shorter needs --force",
    )
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--force", action="store_true", help="allow breaking time travel")
