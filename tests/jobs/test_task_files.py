"""What an operator task sends on and what it writes (jobs.executor.task_files), and the writer task
that completes a batch's files (jobs.executor.batch_output.BatchWriter), without Spark: every row of
the batch ends in exactly one file, each file's footer gives the row the driver commits."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")

from jobs.executor.batch_output import BatchWriter  # noqa: E402
from jobs.executor.operator import output_arrow_schema  # noqa: E402
from jobs.executor.output_tables import DATA_FILE, KIND_LATE, KIND_PANE, RECORD_KIND, OutputTables  # noqa: E402
from jobs.executor.task_files import BatchOfTask, TaskOutput, TaskWriting  # noqa: E402
from sinks.lake.pane_log import DEFAULT_LAYOUT, PaneLog, core_schema  # noqa: E402
from sinks.lake.records import LateLog, RejectedLog, late_core_schema  # noqa: E402

T0 = 1_704_067_200 * 1_000_000


@pytest.fixture
def tables(tmp_path):
    logs = {
        KIND_PANE: PaneLog(tmp_path / "panes", "p").appender,
        KIND_LATE: LateLog(tmp_path / "late", "p").appender,
        "rejected": RejectedLog(tmp_path / "rejected", "p").appender,
    }
    uris = {k: a.table().table_uri for k, a in logs.items()}
    return OutputTables.of("p", DEFAULT_LAYOUT, uris, {k: a.schema for k, a in logs.items()})


def panes(keys: list[str], timing: str = "EARLY") -> tuple[dict[str, list], int]:
    """Core pane records, one per key (window [T0, T0 + 60 s))."""
    n = len(keys)
    cols = {c: [None] * n for c in core_schema(DEFAULT_LAYOUT).names}
    cols.update(
        key=keys,
        window_start_us=[T0] * n,
        window_end_us=[T0 + 60_000_000] * n,
        value=[1.0] * n,
        timestamp_us=[T0 + 59_999_999] * n,
        pane_index=[0] * n,
        nonspeculative_index=[-1] * n,
        timing=[timing] * n,
        is_first=[True] * n,
        is_last=[False] * n,
        is_retraction=[False] * n,
        supersedes=[[] for _ in keys],
        watermark_us=[T0] * n,
        processing_time_us=[T0] * n,
    )
    return cols, n


def late(keys: list[str]) -> tuple[dict[str, list], int]:
    n = len(keys)
    cols = {c: [None] * n for c in late_core_schema(DEFAULT_LAYOUT).names}
    cols.update(key=keys, value_json=["1.0"] * n, timestamp_us=[T0] * n, reason=["expired"] * n)
    return cols, n


def visit(output: TaskOutput, kind: str, records: tuple[dict[str, list], int]) -> pa.Table:
    return pa.Table.from_batches(list(output.emit(kind, *records)), schema=output.schema)


def read(tables: OutputTables, kind: str, name: str) -> pa.Table:
    return pq.read_table(f"{tables.targets[kind].table_uri.removeprefix('file://')}/{name}")


def collect(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables)


def test_a_task_sends_few_rows_on_and_writes_many_itself(tables):
    writing = TaskWriting(tables, rows_as_rows=3, rows_per_file=4)
    output = TaskOutput(output_arrow_schema(DEFAULT_LAYOUT), writing, BatchOfTask(7))
    sent = [
        visit(output, KIND_PANE, panes(["a", "b"])),  # 2: sent on
        visit(output, KIND_PANE, panes(["c", "d"])),  # 4 > 3: a file is named
        visit(output, KIND_PANE, panes(["e", "f", "g"])),  # the file holds 5 >= 4: written
        visit(output, KIND_PANE, panes(["h"])),  # a second file
        visit(output, KIND_LATE, late(["x"])),
    ]
    output.close()
    rows = collect(sent).to_pandas()
    named = rows[rows[DATA_FILE].notna()]
    assert list(named[RECORD_KIND]) == [KIND_PANE, KIND_PANE]
    assert sorted(output.written) == sorted(named[DATA_FILE])
    assert list(rows[rows[DATA_FILE].isna()][RECORD_KIND]) == [KIND_PANE] * 2 + [KIND_LATE]

    files = list(BatchWriter(tables, 7)(iter(collect(sent).to_batches())))
    got = [f for f in pa.Table.from_batches(files).to_pylist() if f[RECORD_KIND] != "clock"]
    by_kind = {}
    for f in got:
        by_kind.setdefault(f[RECORD_KIND], []).append(f)
    assert sorted(f["rows"] for f in by_kind[KIND_PANE]) == [1, 2, 5]  # sent on; two files
    assert [f["rows"] for f in by_kind[KIND_LATE]] == [1]
    # each file row is what the driver commits: the file's real size and its statistics
    for f in got:
        written = read(tables, f[RECORD_KIND], f["path"])
        assert written.num_rows == f["rows"] == json.loads(f["stats"])["numRecords"]
        assert set(written.column("batch_id").to_pylist()) == {7}
    figures = [json.loads(f["figures"]) for f in by_kind[KIND_PANE]]
    assert sum(fig["by_timing"]["EARLY"] for fig in figures) == 8
    keys = pa.concat_tables(read(tables, KIND_PANE, f["path"]) for f in by_kind[KIND_PANE])
    assert sorted(keys.column("key").to_pylist()) == list("abcdefgh")  # each row in one file


def test_a_replayed_batch_neither_sends_nor_writes_a_committed_kind(tables):
    writing = TaskWriting(tables, rows_as_rows=1, rows_per_file=10)
    batch = BatchOfTask(3, frozenset({KIND_PANE}))
    output = TaskOutput(output_arrow_schema(DEFAULT_LAYOUT), writing, batch)
    assert visit(output, KIND_PANE, panes(["a", "b", "c"])).num_rows == 0
    assert visit(output, KIND_LATE, late(["x", "y"])).num_rows == 1  # a file named
    output.close()
    assert len(output.written) == 1


def test_without_writing_every_row_is_sent_on():
    output = TaskOutput(output_arrow_schema(DEFAULT_LAYOUT), None)
    rows = visit(output, KIND_PANE, panes([str(i) for i in range(50)]))
    assert rows.num_rows == 50 and rows.column(DATA_FILE).null_count == 50
    output.close()
    assert output.written == []


def test_the_writer_task_sums_the_tasks_input_records_into_the_clock_row(tables):
    """Each operator task's clock row carries its input records; the writer's one clock row
    carries their sum (the batch's records), also for a batch whose tables all hold it."""
    schema = output_arrow_schema(DEFAULT_LAYOUT)

    def clock_row(clock: int, records: int) -> pa.RecordBatch:
        row = {c: [None] for c in schema.names}
        row.update({RECORD_KIND: ["clock"], "pst_clock": [clock], "pst_records": [records]})
        return pa.RecordBatch.from_pydict(row, schema=schema)

    kinds = frozenset({KIND_PANE, KIND_LATE, "rejected"})
    for committed in (frozenset(), kinds):
        out = BatchWriter(tables, 7, committed)(iter([clock_row(T0, 3), clock_row(T0 + 1, 4)]))
        (row,) = pa.Table.from_batches(list(out)).to_pylist()
        assert json.loads(row["figures"]) == {
            "clock_us": T0 + 1,
            "records": 7,
            "lanes": [],  # (several inputs': each input's largest clock and records)
            "lane_records": [],
        }
