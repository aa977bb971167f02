"""The ``panestore`` command line.

    panestore run CONF [--follow [--interval 10s]] [--drain] [--lake DIR] [--source DIR]
    panestore check CONF          # validate a pipeline configuration (no Spark)
    panestore note-watermark CONF --writer W --time T [--files F ...]   # a writer's mark

``run`` prints one progress line per micro-batch on stderr (batch, input rows, panes by timing,
late and rejected records, watermark) and a summary; exit status 0 on success, 1 if the job
failed, 2 for an invalid configuration (the message names the field) or an upstream pane log
that is not the table the pipeline has read (the upstream was rebuilt; the message says how to
rebuild this pipeline too), 3 if another run of the same lake is running (it holds the lake's
run lock; nothing was written). More subcommands (materialize, query, ...) come from
:mod:`jobs.inspect`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from jobs.fingerprint import check_lake_configuration
from jobs.inspect import add_subcommands, materialize_after_run
from jobs.lake_identity import check_lake_identity
from jobs.pipeline import Pipeline, PipelineConfigError, check_paths, load_pipeline
from jobs.quiet import quiet_spark_stderr
from jobs.spark import JavaNotFound, get_session
from jobs.watermark_marks import MarkError, note_watermark, parse_time
from panes import parse_duration
from sinks.errors import LakeBusy, UpstreamChanged

EXIT_BUSY = 3


def _interval(text: str) -> str:
    """``10s`` / ``1m`` / ``500ms`` -> a Spark interval string."""
    try:
        us = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return f"{max(us // 1000, 0)} milliseconds"


def _kill_point(text: str) -> tuple[str, int]:
    """``point:batch`` (a point of :func:`jobs.job.kill`, a batch id) -> the pair."""
    point, _, batch = text.partition(":")
    if not point or not batch.isdigit():
        raise argparse.ArgumentTypeError(f"expected POINT:BATCH, got {text!r}")
    return point, int(batch)


def _load(args) -> Pipeline:
    overrides: dict = {}
    if getattr(args, "lake", None):
        overrides["lake"] = args.lake
    if getattr(args, "source", None):
        overrides["source"] = {"path": args.source}
    return load_pipeline(args.conf, overrides=overrides)


def cmd_check(args) -> int:
    pipeline = _load(args)
    check_paths(pipeline)
    check_lake_identity(pipeline)
    check_lake_configuration(pipeline)  # an existing lake: bound to its configuration
    print(pipeline.describe())
    print("ok")
    return 0


def cmd_run(args) -> int:
    pipeline = _load(args)
    check_paths(pipeline)  # before Spark: a bad path exits 2 naming the setting
    check_lake_identity(pipeline)  # ... and so does a copied or moved lake
    if pipeline.source.is_pane_log:
        from jobs.upstream_identity import check_upstream

        try:
            check_upstream(pipeline)  # before Spark: a rebuilt upstream exits 2
        except UpstreamChanged as e:
            print(f"panestore: {e}", file=sys.stderr)
            return 2
    check_lake_configuration(pipeline)  # before Spark: a lake's changed setting exits 2
    terminal = sys.stderr if args.verbose else quiet_spark_stderr()
    print(pipeline.describe(), file=terminal, flush=True)
    from jobs.run import run  # imports pyspark: not for `check`

    try:
        spark = get_session(f"panestore-{pipeline.name}", master=args.master,
                            shuffle_partitions=args.shuffle_partitions)  # fmt: skip
    except JavaNotFound as e:
        print(f"panestore: {e}", file=terminal)
        return 1
    try:
        run(pipeline, spark=spark, follow=args.follow, drain=args.drain,
            interval=args.interval, progress=terminal, kill_at=args.kill_at,
            profile_dir=args.profile_dir)  # fmt: skip
    except LakeBusy as e:
        print(f"panestore: {e}", file=terminal)
        return EXIT_BUSY
    except UpstreamChanged as e:  # rebuilt since the check above, or while running
        print(f"panestore: {e}", file=terminal)
        return 2
    except Exception as e:  # the streaming query failed: report, exit 1
        print(f"panestore: run failed: {e}", file=terminal)
        return 1
    if not args.no_materialize:
        return materialize_after_run(pipeline, out=lambda s: print(s, file=terminal))
    return 0


def cmd_note_watermark(args) -> int:
    """Land a writer's mark (:func:`jobs.watermark_marks.note_watermark`) in the landing
    directory of CONF; prints its path. Exit 2 if the mark is refused (the message says why)."""
    pipeline = _load(args)
    try:
        path = note_watermark(pipeline.source.path, args.writer, parse_time(args.time, "--time"),
                              args.files)  # fmt: skip
    except MarkError as e:
        print(f"panestore: mark refused: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="panestore", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a pipeline: process what has landed, fire, commit, exit",
                       description="Run a pipeline (see docs/running.md).")  # fmt: skip
    p.add_argument("conf", metavar="CONF", help="pipeline configuration (TOML)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--follow",
        action="store_true",
        help="keep running: a micro-batch every --interval while files arrive",
    )
    mode.add_argument("--drain", action="store_true",
                      help="after the input, move the watermark to the end of time: close every "
                      "window (backfills, final runs); later data is late")  # fmt: skip
    p.add_argument(
        "--interval",
        type=_interval,
        default="10s",
        help="--follow: processing-time trigger interval (default 10s)",
    )
    p.add_argument("--lake", help="override the configuration's lake directory")
    p.add_argument("--source", help="override the configuration's source.path")
    p.add_argument("--master", metavar="URL", help="Spark master (default: spark-submit's, "
                   "else local[2]); e.g. spark://host:7077, see docs/cluster.md")  # fmt: skip
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        default=2,
        help="Spark shuffle partitions of a new lake (fixed by its checkpoint)",
    )
    p.add_argument(
        "--no-materialize",
        action="store_true",
        help="do not fold the pane log into the current view after the run",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show all of Spark's output")
    p.add_argument(
        "--profile-dir", metavar="DIR", help="developer aid: cProfile the operator's tasks into DIR"
    )
    p.add_argument("--kill-at", metavar="POINT:BATCH", type=_kill_point, action="append",
                   default=[], help="testing: SIGKILL the run at that point of that batch "
                   "(before_commit, between_tables, after_commit)")  # fmt: skip
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("check", help="validate a pipeline configuration")
    p.add_argument("conf", metavar="CONF")
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser(
        "note-watermark",
        help="a writer notes its progress: everything it lands from now on has event time >= T",
        description="Write a watermark mark for watermark.policy = 'writer_noted' "
        "(docs/running.md).",
    )
    p.add_argument("conf", metavar="CONF")
    p.add_argument("--writer", required=True, help="the writer's name")
    p.add_argument("--time", required=True, help="T, ISO-8601 with a zone (2024-06-01T09:05:00Z)")
    p.add_argument("--files", nargs="*", default=[], metavar="FILE",
                   help="the data files it landed since its previous mark (relative to the "
                   "landing directory)")  # fmt: skip
    p.add_argument("--source", help="override the configuration's source.path")
    p.set_defaults(handler=cmd_note_watermark)

    add_subcommands(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except PipelineConfigError as e:
        conf = getattr(args, "conf", "")
        print(f"panestore: invalid configuration {conf}: {e}", file=sys.stderr)
        return 2


def command() -> None:
    """The ``panestore`` command: :func:`main`, then exit without tearing the interpreter down.

    Native thread pools (Arrow's, DuckDB's) can still be winding down when Python finalizes,
    and finalizing under them aborts the process (``terminate called without an active
    exception``, SIGABRT) after the command has done and reported its work. Every table write
    has committed or failed by the time :func:`main` returns, so there is nothing left to
    clean up; Spark's JVM exits when its gateway's standard input closes.
    """
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    command()
