"""The ``panestore`` command line.

    panestore run CONF [--follow [--interval 10s]] [--drain] [--lake DIR] [--source DIR]
    panestore check CONF          # validate a pipeline configuration (no Spark)
    panestore note-watermark CONF --writer W --time T [--files F ...]   # a writer's mark

``run`` prints one progress line per micro-batch on stderr (batch, input rows, panes by timing, late
and rejected records, watermark) and a summary, then folds the pane log into the view (unless
``--no-materialize``). SIGINT (Ctrl-C) or SIGTERM stops it cleanly: the batch in flight finishes (a
second signal abandons it), the run folds, releases the lake's lock and exits 0
(:mod:`jobs.driver.stopping`). More subcommands (materialize, query, ...) come from
:mod:`jobs.cli.lake_commands`.

Every error is one line on stderr. Exit statuses (:class:`jobs.cli.exit_status.ExitStatus`):

====  ========================================================================================
0     done; also a run stopped by a signal, and a run whose fold found another materializer
      running (its batches are committed; the next ``panestore materialize`` folds them)
1     the job or the command failed (``verify``: differences found; ``status``: lagging)
2     misuse: bad arguments, an invalid or unreadable configuration (the message names the
      field), a lake copied or moved, an upstream pane log that is not the table this pipeline
      has read (the upstream was rebuilt: the message says how to rebuild this pipeline too),
      SQL that does not run, a table that does not exist yet; nothing was written
3     busy: another run holds the lake's run lock (``run``), or another materializer its
      materializer lock (``materialize``); nothing was written
130   interrupted by Ctrl-C outside a run's batches (a run's Spark session was starting, or
      another command ran); every write is transactional: done in full or not at all
====  ========================================================================================
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from jobs.cli.exit_status import ExitStatus
from jobs.cli.lake_commands import add_subcommands, error_status
from jobs.config.checks import check_paths
from jobs.config.load import load_pipeline
from jobs.config.pipeline import Pipeline
from jobs.config.values import PipelineConfigError
from jobs.driver.fingerprint import check_lake_configuration
from jobs.driver.lake_identity import check_lake_identity
from jobs.driver.stopping import stop_on_signals
from jobs.driver.watermark_marks import MarkError, note_watermark, parse_time
from jobs.startup.aws_profile import adopt_shared_profile
from jobs.startup.quiet import error_stream
from jobs.startup.quiet import terminal as quiet_terminal
from jobs.startup.session import SHUFFLE_PARTITIONS, JavaNotFound, SessionOptions, end_session
from panes import parse_duration
from sinks.lake import LakeError, one_line

EXIT_BUSY = ExitStatus.BUSY


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the usage is on ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitStatus.MISUSE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _interval(text: str) -> str:
    """``10s`` / ``1m`` / ``500ms`` -> a Spark interval string."""
    try:
        us = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    from jobs.driver.runs import spark_interval

    return spark_interval(us)


def _positive(text: str) -> int:
    """A whole number >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _kill_point(text: str) -> tuple[str, int]:
    """``point:batch`` (a point of :func:`jobs.driver.batch_sink.kill`, a batch id) -> the pair."""
    point, _, batch = text.partition(":")
    if not point or not batch.isdigit():
        raise argparse.ArgumentTypeError(f"expected POINT:BATCH, got {text!r}")
    return point, int(batch)


def _load(args) -> Pipeline:
    overrides: dict = {}
    if getattr(args, "lake", None):
        overrides["lake"] = args.lake
    if getattr(args, "source", None):
        if getattr(args, "input", None):  # an input's landing directory
            overrides["inputs"] = {args.input: {"path": args.source}}
        else:
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
    if any(one.source.is_dataframe for one in pipeline.input_list):
        print(
            f"panestore: pipeline {pipeline.name} reads a streaming DataFrame built in PySpark "
            "code (source.format = 'dataframe'): run it from that code (jobs.api.run); this "
            "command can check, materialize, verify and query its lake",
            file=sys.stderr,
        )
        return ExitStatus.MISUSE
    # the command's own lines go to the original stderr; Spark's noise is filtered from it once
    # the session starts (after the run's checks: their refusals are plain lines on stderr)
    terminal = sys.stderr if args.verbose else quiet_terminal()
    from jobs.driver.runs import FoldFailed, python_error, run  # imports pyspark: not `check`

    session = SessionOptions(
        f"panestore-{pipeline.name}",
        master=args.master,
        shuffle_partitions=args.shuffle_partitions,
        write_class_archive=True,
        quiet_query_failures=not args.verbose,  # a failed query is said below, in one line
        quiet_stderr=not args.verbose,
    )
    # SIGINT and SIGTERM stop the run cleanly (jobs.driver.stopping), through the fold; the run
    # takes the signals back once its session has started (its SparkContext installs a SIGINT
    # handler of its own)
    with stop_on_signals() as stop:
        try:  # the run's checks come first, before Spark starts (jobs.driver.preflight)
            run(
                pipeline,
                session=session,
                follow=args.follow,
                drain=args.drain,
                interval=args.interval,
                progress=terminal,
                describe=True,
                kill_at=args.kill_at,
                profile_dir=args.profile_dir,
                stop=stop,
                fold=not args.no_materialize,
            )
        except PipelineConfigError:
            raise  # the configuration or a lake it does not fit: main says so, exit 2
        except (JavaNotFound, FoldFailed) as e:
            print(f"panestore: {e}", file=terminal)
            return ExitStatus.FAILED
        except LakeError as e:  # refused (a busy lake, a changed source, ...) or failed
            status = error_status(e)
            failed = "run failed: " if status == ExitStatus.FAILED else ""
            print(f"panestore: {failed}{one_line(e)}", file=terminal)
            return status
        except Exception as e:  # the streaming query failed: report on one line, exit 1
            print(f"panestore: run failed: {python_error(str(e))}", file=terminal)
            return ExitStatus.FAILED
        return ExitStatus.OK


def cmd_note_watermark(args) -> int:
    """Land a writer's mark (:func:`jobs.driver.watermark_marks.note_watermark`) in the landing
    directory of CONF; prints its path. Exit 2 if the mark is refused (the message says why)."""
    pipeline = _load(args)
    names = [i.name for i in pipeline.inputs]
    if pipeline.several_inputs and args.input not in names:
        print(
            f"panestore: pipeline {pipeline.name} reads several inputs: name the one whose "
            f"writer notes with --input ({', '.join(names)})",
            file=sys.stderr,
        )
        return ExitStatus.MISUSE
    if not pipeline.several_inputs and args.input is not None:
        print(
            f"panestore: --input names one of several inputs; pipeline {pipeline.name} reads one",
            file=sys.stderr,
        )
        return ExitStatus.MISUSE
    landing = next((i.source.path for i in pipeline.inputs if i.name == args.input), None)
    try:
        path = note_watermark(
            landing or pipeline.source.path,
            args.writer,
            parse_time(args.time, "--time"),
            args.files,
        )
    except MarkError as e:
        print(f"panestore: mark refused: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="panestore", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "run",
        help="run a pipeline: process what has landed, fire, commit, exit",
        description="Run a pipeline (see docs/running.md).",
    )
    p.add_argument("conf", metavar="CONF", help="pipeline configuration (TOML)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--follow",
        action="store_true",
        help="keep running: a micro-batch every --interval while files arrive",
    )
    mode.add_argument(
        "--drain",
        action="store_true",
        help="after the input, move the watermark to the end of time: close every "
        "window (backfills, final runs); later data is late",
    )
    p.add_argument(
        "--interval",
        type=_interval,
        default="10s",
        help="--follow: processing-time trigger interval (default 10s)",
    )
    p.add_argument("--lake", help="override the configuration's lake directory")
    p.add_argument("--source", help="override the configuration's source.path")
    p.add_argument(
        "--master",
        metavar="URL",
        help="Spark master (default: spark-submit's, "
        "else local[2]); e.g. spark://host:7077, see docs/cluster.md",
    )
    p.add_argument(
        "--shuffle-partitions",
        type=_positive,
        default=SHUFFLE_PARTITIONS,
        help=f"Spark shuffle partitions of a new lake (fixed by its checkpoint; default "
        f"{SHUFFLE_PARTITIONS})",
    )
    p.add_argument(
        "--no-materialize",
        action="store_true",
        help="do not fold the pane log into the current view after the run",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show all of Spark's output")
    # Developer and test aids, not on --help: --profile-dir DIR cProfiles the operator's tasks
    # into DIR; --kill-at POINT:BATCH SIGKILLs the run at that point
    # (jobs.driver.batch_sink.KILL_POINTS) of that batch.
    p.add_argument("--profile-dir", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument(
        "--kill-at",
        metavar="POINT:BATCH",
        type=_kill_point,
        action="append",
        default=[],
        help=argparse.SUPPRESS,
    )
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
    p.add_argument(
        "--files",
        nargs="*",
        default=[],
        metavar="FILE",
        help="the data files it landed since its previous mark (relative to the landing directory)",
    )
    p.add_argument("--source", help="override the configuration's source.path")
    p.add_argument("--input", help="of several inputs, the one whose writer notes its progress")
    p.set_defaults(handler=cmd_note_watermark)

    add_subcommands(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of ``argv`` (default: the process's arguments); its exit status."""
    args = build_parser().parse_args(argv)
    adopt_shared_profile()  # a lake in a bucket: one AWS configuration for every library
    try:
        return int(args.handler(args) or 0)
    except PipelineConfigError as e:
        conf = getattr(args, "conf", "")
        print(f"panestore: invalid configuration {conf}: {e}", file=error_stream())
        return ExitStatus.MISUSE
    except LakeError as e:  # the checks before Spark: a store that cannot be read, ...
        print(f"panestore {args.command}: {one_line(e)}", file=error_stream())
        return error_status(e)
    except (
        KeyboardInterrupt
    ):  # not within a run (jobs.driver.stopping): every write is transactional
        print(f"panestore {args.command}: interrupted", file=error_stream())
        return ExitStatus.INTERRUPTED


def command() -> None:
    """The ``panestore`` command: :func:`main`, then end Spark's driver JVM if the command
    started one, then exit without tearing the interpreter down.

    Native thread pools (Arrow's, DuckDB's) can still be winding down when Python finalizes,
    and finalizing under them aborts the process (``terminate called without an active
    exception``, SIGABRT) after the command has done and reported its work: it leaves through
    ``os._exit``, which runs no exit handlers. Every table write has committed or failed by the
    time :func:`main` returns; the one exit work left is the driver JVM's, done here
    (:func:`jobs.startup.session.end_session`): its session stopped, the JVM's exit awaited
    (it writes the class-data archive then, if it was started to) and the archive adopted, so
    that the command ends when its JVM has, and the next run maps the archive.
    """
    status = main()
    try:
        end_session()
    except KeyboardInterrupt:  # Ctrl-C while the JVM exits: it was killed, no archive adopted
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    command()
