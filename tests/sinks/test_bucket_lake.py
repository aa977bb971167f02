"""A lake in a bucket (``s3://bucket/prefix``, on moto's S3 server started by the tests): every
``sinks`` operation gives what it gives on a local lake built the same way; the lock refuses a
store without conditional writes; no credential of the environment ends up in an error, a log
line or an object of the bucket."""

from __future__ import annotations

import logging
import random
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import obstore
import pytest
from pyarrow.fs import FileSelector

from panes import AccumulationMode, FixedWindows, Sessions
from sinks.fold.materializer import Materializer
from sinks.fold.view_rebuild import rebuild_view
from sinks.lake.data_files import folder_names, table_filesystem, write_data_file, write_data_files
from sinks.lake.errors import (
    ForeignTable,
    InvalidRequest,
    LakeError,
    MaterializerBusy,
    NoConditionalWrites,
    TableMissing,
)
from sinks.lake.lock import LakeLock
from sinks.lake.object_store import UNSAFE_RENAME, delta_storage_options, store_at
from sinks.lake.pane_log import finish_batch, pane_log_schema
from sinks.lake.spec import ViewSpec
from sinks.lake.tables import open_pane_log, open_view, plain_table
from sinks.presentation import duck
from sinks.presentation.key_plot import plot
from sinks.upkeep.maintenance import optimize, vacuum
from sinks.verification.view_check import verify
from tests.lock_holder import lock_held
from tests.s3_server import new_bucket_lake
from tests.sinks.lakes import (
    Run,
    S,
    assert_same_changes_and_past,
    chunked,
    materialized_lake,
    random_run,
    view_dict,
    view_rows,
    write_batches,
)

# (seed, window function, mode): the Python reducer (sessions) and the vectorized one (fixed)
RUNS = {
    "sessions": (6, Sessions(10 * S), AccumulationMode.ACCUMULATING_AND_RETRACTING),
    "fixed": (8, FixedWindows(10 * S), AccumulationMode.DISCARDING),
}


def _lakes(endpoint: str, tmp: Any, which: str) -> tuple[Run, Run]:
    """The same run materialized into a new bucket lake and into a local lake."""
    seed, window_fn, mode = RUNS[which]
    bucket = materialized_lake(new_bucket_lake(endpoint), seed, window_fn=window_fn, mode=mode)
    local = materialized_lake(tmp, seed, window_fn=window_fn, mode=mode)
    return bucket, local


@pytest.fixture(scope="module", params=sorted(RUNS))
def lakes(request, s3_endpoint: str, tmp_path_factory) -> tuple[Run, Run]:
    """(bucket lake, local lake) of one run, materialized; read-only for the tests using it."""
    return _lakes(s3_endpoint, tmp_path_factory.mktemp("local"), request.param)


def _objects(lake: str) -> dict[str, bytes]:
    """Every object of the bucket of ``lake``: {key: content}."""
    import boto3

    bucket = lake.removeprefix("s3://").split("/")[0]
    client = boto3.client("s3")
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            out[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


def _table_files(spec: ViewSpec, table: str) -> set[str]:
    """The data files (paths relative to the table) in the folder of ``table``."""
    fs, root = table_filesystem(spec.table_path(table))
    found = fs.get_file_info(FileSelector(root, recursive=True))
    return {
        info.path[len(root) + 1 :]
        for info in found
        if info.is_file and "_delta_log" not in info.path and info.path.endswith(".parquet")
    }


# -- the same answers as a local lake -----------------------------------------------------------


def test_the_view_of_a_bucket_lake_equals_a_local_lakes(lakes):
    bucket, local = lakes
    assert bucket.spec.lake.startswith("s3://")
    assert view_rows(bucket.spec) == view_rows(local.spec)
    assert view_dict(bucket.spec) == bucket.expected()
    assert open_view(bucket.spec).version() == open_view(local.spec).version()
    report = verify(bucket.spec, elements=bucket.elements)
    assert report.ok, str(report)
    assert str(report) == str(verify(local.spec, elements=local.elements))


@pytest.mark.parametrize("lakes", ["sessions"], indirect=True)  # retractions, merged windows
def test_duckdb_on_a_bucket_lake_answers_as_on_a_local_lake(lakes, tmp_path):
    bucket, local = lakes
    sql = """SELECT * EXCLUDE (absorbed), (SELECT count(*) FROM panes) AS panes,
                    (SELECT count(*) FROM late) AS late
             FROM current ORDER BY ALL"""
    assert duck.query(bucket.spec, sql, fmt="csv") == duck.query(local.spec, sql, fmt="csv")
    key = next(iter(bucket.expected()))[0][0]
    assert duck.history(bucket.spec, key) == duck.history(local.spec, key)
    assert_same_changes_and_past(bucket.spec, local.spec)
    assert plot(bucket.spec, key, str(tmp_path / "bucket.png"))
    assert (tmp_path / "bucket.png").stat().st_size > 0


def test_httpfs_is_loaded_for_a_bucket_lake_only(lakes):
    bucket, local = lakes
    loaded = "SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'httpfs'"
    for spec, expected in ((bucket.spec, True), (local.spec, False)):
        con = duck.connect(spec)
        try:
            assert con.sql(loaded).fetchone() == (expected,)
        finally:
            con.close()


def test_the_s3_secret_is_read_from_the_aws_environment():
    env = {
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_DEFAULT_REGION": "eu-west-3",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000/",
    }
    assert duck.s3_secret_fields(env) == {
        "KEY_ID": "id",
        "SECRET": "secret",
        "REGION": "eu-west-3",
        "ENDPOINT": "127.0.0.1:9000",
        "USE_SSL": False,
        "URL_STYLE": "path",
    }
    assert duck.s3_secret_fields({"AWS_REGION": "us-east-2"}) == {"REGION": "us-east-2"}


def test_a_folder_in_a_bucket_that_is_no_table_is_refused_as_on_disk(bucket_lake, tmp_path):
    for lake in (bucket_lake, str(tmp_path)):
        spec = random_run(1, lake).spec
        with pytest.raises(TableMissing):
            open_view(spec)
        fs, root = table_filesystem(spec.table_path("current"))
        fs.create_dir(f"{root}/_delta_log")
        with fs.open_output_stream(f"{root}/part-0.parquet") as f:
            f.write(b"a creation killed before its first commit")
        with pytest.raises(TableMissing):
            open_view(spec)
        with fs.open_output_stream(f"{root}/notes.txt") as f:
            f.write(b"not a table")
        fs.delete_dir(f"{root}/_delta_log")
        with pytest.raises(ForeignTable, match="exists but is not a Delta table"):
            open_view(spec)


# -- maintenance and the lock -------------------------------------------------------------------


def test_optimize_and_vacuum_in_a_bucket_keep_the_rows_and_delete_unreferenced_files(
    s3_endpoint, tmp_path
):
    bucket, local = _lakes(s3_endpoint, tmp_path, "fixed")
    spec = bucket.spec
    panes = plain_table(open_pane_log(spec).to_pyarrow_table()).sort_by("pane_id")
    view = view_rows(spec)
    # a file an attempt wrote and never committed (sinks.lake.data_files)
    schema = pane_log_schema(bucket.layout)
    stray = write_data_file(spec.table_path("panes"), "stray-000.parquet", panes, schema).path
    before = _table_files(spec, "panes")
    assert stray in before
    compacted = {r.table: r.details for r in optimize(spec) if not r.skipped}
    assert compacted["panes"]["numFilesRemoved"] > 1
    with pytest.raises(LakeError, match="break time travel"):
        vacuum(spec, retention_hours=0)
    deleted = {r.table: r.details["files"] for r in vacuum(spec, 0, force=True) if not r.skipped}
    assert stray in deleted["panes"]
    assert plain_table(open_pane_log(spec).to_pyarrow_table()).sort_by("pane_id") == panes
    assert view_rows(spec) == view == view_rows(local.spec)
    for table, dt in (("panes", open_pane_log(spec)), ("current", open_view(spec))):
        root = spec.table_path(table) + "/"
        referenced = {uri.removeprefix(root) for uri in dt.file_uris()}
        unreferenced = _table_files(spec, table) - referenced
        # the view keeps its change feed's files (sinks.upkeep.maintenance)
        assert all(f.startswith("_change_data/") for f in unreferenced), unreferenced
    assert stray not in _table_files(spec, "panes")


def test_data_files_written_into_a_bucket_table_commit_once(bucket_lake):
    from tests.sinks.test_data_files import appender, core_panes

    table = f"{bucket_lake}/panes"
    log = appender(table)
    rows = finish_batch(core_panes(["a", "b", "c"]), "p", 0)
    files = write_data_files(table, rows, pane_log_schema(), "b0-attempt0", rows_per_file=2)
    assert [f.rows for f in files] == [2, 1]
    assert log.commit_files(0, files) and not log.commit_files(0, files)
    assert plain_table(log.read()).sort_by("pane_id") == rows.sort_by("pane_id")


def test_rebuild_view_replaces_the_view_in_a_bucket_as_on_disk(s3_endpoint, tmp_path):
    for run in _lakes(s3_endpoint, tmp_path, "sessions"):
        before, table = view_dict(run.spec), open_view(run.spec).metadata().id
        assert "rebuilt" in rebuild_view(run.spec)
        assert view_dict(run.spec) == before
        assert open_view(run.spec).metadata().id != table  # a new table
        found = sorted(n for n in folder_names(run.spec.lake) if n.startswith("current"))
        assert found == ["current"]


def test_a_second_materializer_on_a_bucket_lake_is_refused_and_writes_nothing(bucket_lake):
    run = random_run(3, bucket_lake, window_fn=FixedWindows(10 * S))
    batches = chunked(run, random.Random(3))
    write_batches(run, batches[:-1])
    Materializer(run.spec).run()
    write_batches(run, batches[-1:], start=len(batches) - 1)
    objects = _objects(bucket_lake)
    with lock_held(bucket_lake, "materializer") as pid:
        with pytest.raises(MaterializerBusy, match=f"pid {pid}"):
            Materializer(run.spec).run()
        assert _objects(bucket_lake).keys() - {"prod/sessions/_locks/materializer.lock"} == (
            objects.keys()
        )
    # the killed holder's lease would expire in a minute: its lock deleted instead
    obstore.delete(store_at(bucket_lake), "_locks/materializer.lock")
    assert Materializer(run.spec).run().did_work
    assert view_dict(run.spec) == run.expected()


# -- stores without conditional writes ----------------------------------------------------------


@pytest.fixture
def puts(monkeypatch) -> Iterator[list[tuple[Any, str]]]:
    """Every ``obstore.put`` of the lock: (its mode, how it ended: "ok" or the error's name)."""
    real, seen = obstore.put, []

    def put(store: Any, key: str, data: Any, **kw: Any) -> Any:
        try:
            out = real(store, key, data, **kw)
        except Exception as e:
            seen.append((kw.get("mode"), type(e).__name__))
            raise
        seen.append((kw.get("mode"), "ok"))
        return out

    monkeypatch.setattr(obstore, "put", put)
    yield seen


def test_the_s3_server_refuses_a_second_create_so_the_lock_holds(bucket_lake, puts):
    with LakeLock(bucket_lake, "run", "another run") as lock:
        assert lock.held
    assert puts[:2] == [("create", "ok"), ("create", "AlreadyExistsError")]  # the probe


def _ignoring(real: Callable[..., Any]) -> Callable[..., Any]:
    def put(store: Any, key: str, data: Any, **kw: Any) -> Any:
        return real(store, key, data)  # the condition ignored: every put overwrites

    return put


def _no_etag(real: Callable[..., Any]) -> Callable[..., Any]:
    def put(store: Any, key: str, data: Any, **kw: Any) -> Any:
        return {**real(store, key, data, **kw), "e_tag": None}

    return put


def _rejecting(real: Callable[..., Any]) -> Callable[..., Any]:
    from obstore.exceptions import NotSupportedError

    def put(store: Any, key: str, data: Any, **kw: Any) -> Any:
        if kw.get("mode", "overwrite") != "overwrite":
            raise NotSupportedError("conditional put not supported")
        return real(store, key, data)

    return put


@pytest.mark.parametrize(
    "store", [_ignoring, _no_etag, _rejecting], ids=["ignores", "no-etag", "rejects"]
)
def test_a_store_without_conditional_writes_cannot_lock_and_names_single_writer(
    bucket_lake, monkeypatch, store
):
    monkeypatch.setattr(obstore, "put", store(obstore.put))
    with pytest.raises(NoConditionalWrites) as e, LakeLock(bucket_lake, "run", "another run"):
        pytest.fail("locked")
    assert "single_writer = true" in str(e.value) and "one writer at a time" in str(e.value)
    assert not obstore.list(store_at(bucket_lake)).collect()  # no lock object left behind


def test_single_writer_locks_nothing_and_commits_without_conditional_writes(
    bucket_lake, monkeypatch
):
    monkeypatch.setattr(obstore, "put", _ignoring(obstore.put))
    assert delta_storage_options(bucket_lake) is None
    assert delta_storage_options("/tmp/lake", single_writer=True) is None
    assert delta_storage_options(bucket_lake, single_writer=True) == {UNSAFE_RENAME: "true"}
    run = random_run(5, bucket_lake, window_fn=FixedWindows(10 * S))
    run = replace(run, spec=replace(run.spec, single_writer=True))
    assert run.spec.storage_options == {UNSAFE_RENAME: "true"}
    with pytest.raises(NoConditionalWrites):
        Materializer(replace(run.spec, single_writer=False, storage_options=None)).run()
    one = LakeLock(bucket_lake, "run", "r", single_writer=True)
    with one, LakeLock(bucket_lake, "run", "r", single_writer=True) as two:
        assert one.held and two.held and one.unlocked
    write_batches(run, chunked(run, random.Random(5)))
    assert Materializer(run.spec).run().did_work
    assert view_dict(run.spec) == run.expected()
    assert "_locks" not in folder_names(bucket_lake)


# -- no credential anywhere ---------------------------------------------------------------------


def test_no_credential_in_errors_logs_duckdb_or_the_bucket(
    s3_endpoint, tmp_path, monkeypatch, caplog, capfd
):
    planted = f"PLANTED-secret-{uuid.uuid4().hex}"
    token = f"PLANTED-token-{uuid.uuid4().hex}"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", planted)
    monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    caplog.set_level(logging.DEBUG)
    # the tests' own S3 client (boto3: not used by sinks) logs the headers it signs at DEBUG
    caplog.set_level(logging.INFO, logger="botocore")
    errors: list[str] = []

    def fails(error: type[Exception], call: Callable[[], Any]) -> None:
        """Run ``call``, which raises ``error``; keep its whole traceback (causes included)."""
        with pytest.raises(error) as raised:
            call()
        errors.append("".join(traceback.format_exception(raised.value)))

    bucket, _ = _lakes(s3_endpoint, tmp_path, "fixed")
    spec = bucket.spec
    nowhere = replace(spec, lake=spec.lake + "-nowhere")
    missing_bucket = replace(spec, lake=f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/lake")
    duck.query(spec, "SELECT count(*) FROM current")
    key = next(iter(bucket.expected()))[0][0]
    duck.history(spec, key)
    duck.changes(spec, 0)
    assert verify(spec).ok
    optimize(spec)
    vacuum(spec, 0, force=True)
    fails(InvalidRequest, lambda: duck.query(spec, "SELEC nonsense FROM current"))
    fails(InvalidRequest, lambda: duck.query(spec, f"SELEC '{planted}'"))  # echoed: redacted
    fails(InvalidRequest, lambda: duck.query(spec, "SELECT * FROM no_such_table"))
    fails(LakeError, lambda: duck.query(spec, f"SELECT * FROM delta_scan('{nowhere.lake}/x')"))
    fails(InvalidRequest, lambda: duck.query(nowhere, "SELECT * FROM current"))
    fails(TableMissing, lambda: duck.history(nowhere, key))
    fails(InvalidRequest, lambda: duck.changes(spec, 10_000))
    fails(LakeError, lambda: open_view(missing_bucket))  # one line: the store says why
    fails(LakeError, lambda: vacuum(spec, 0))
    with lock_held(spec.lake, "materializer"):
        fails(MaterializerBusy, lambda: Materializer(spec).run())
    obstore.delete(store_at(spec.lake), "_locks/materializer.lock")
    with monkeypatch.context() as m:
        m.setattr(obstore, "put", _ignoring(obstore.put))
        fails(NoConditionalWrites, lambda: Materializer(spec).run())
    with monkeypatch.context() as m:  # DuckDB refuses the secret (a statement holding it)
        m.setattr(duck, "s3_secret_fields", lambda: {"SECRET": planted, "NO_SUCH_FIELD": "x"})
        fails(LakeError, lambda: duck.connect(spec))
    con = duck.connect(spec)
    try:
        errors.append(str(con.sql("SELECT * FROM duckdb_secrets()").fetchall()))
    finally:
        con.close()
    output = capfd.readouterr()
    texts = {
        "errors": "\n".join(errors),
        "log": caplog.text,
        "stdout": output.out,
        "stderr": output.err,
    }
    for value in (planted, token):
        for where, text in texts.items():
            assert value not in text, f"a credential in the {where}"
        for name, content in _objects(spec.lake).items():
            assert value.encode() not in content and value not in name, f"a credential in {name}"


def test_a_refused_sql_on_a_bucket_lake_is_an_invalid_request(lakes):
    bucket, _ = lakes
    with pytest.raises(InvalidRequest, match="the SQL failed"):
        duck.query(bucket.spec, "SELECT nothing FROM current")
