"""A lake on Azure storage (``az://container/prefix`` and ``abfss://...``, on the Azurite emulator
started by the tests: ``tests/azurite_server.py``): the view, DuckDB's answers, verification,
compaction and vacuum equal a local lake's built the same way; the lake's lock holds under
contention (Azure's conditional writes); a missing container is named on one line; no secret of
the Azure environment ends up in an error, a log line or an object of the container."""

from __future__ import annotations

import logging
import traceback
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from sinks.fold.materializer import Materializer
from sinks.lake.errors import InvalidRequest, LakeError, MaterializerBusy, TableMissing
from sinks.lake.tables import open_view
from sinks.presentation import duck
from sinks.presentation.key_plot import plot
from sinks.presentation.report import open_windows, render_report
from sinks.upkeep.maintenance import optimize, vacuum
from sinks.verification.view_check import verify
from tests.azurite_server import container_objects, new_azure_lake, new_container
from tests.lock_holder import lock_held
from tests.sinks.lakes import (
    Run,
    assert_same_changes_and_past,
    materialized_lake,
    view_dict,
    view_rows,
)
from tests.sinks.test_bucket_lake import RUNS
from tests.sinks.test_object_store_lock import contend


def _lakes(endpoint: str, tmp: Any, lake: str | None = None) -> tuple[Run, Run]:
    """The same run (fixed windows) materialized on Azure storage and into a local lake."""
    seed, window_fn, mode = RUNS["sessions"]
    azure = materialized_lake(
        lake or new_azure_lake(endpoint), seed, window_fn=window_fn, mode=mode
    )
    local = materialized_lake(tmp, seed, window_fn=window_fn, mode=mode)
    return azure, local


@pytest.mark.parametrize("spelling", ["az", "abfss"])
def test_a_lake_on_azure_answers_as_a_local_lake(azurite_endpoint, tmp_path, spelling):
    container = new_container()
    lake = (
        f"az://{container}/prod/sessions"
        if spelling == "az"
        else f"abfss://{container}@devstoreaccount1.dfs.core.windows.net/prod/sessions"
    )
    azure, local = _lakes(azurite_endpoint, tmp_path, lake)
    assert view_rows(azure.spec) == view_rows(local.spec)
    assert view_dict(azure.spec) == azure.expected()
    report = verify(azure.spec, elements=azure.elements)
    assert report.ok, str(report)
    assert str(report) == str(verify(local.spec, elements=local.elements))
    key = next(iter(azure.expected()))[0][0]
    if spelling == "az":  # (DuckDB reads abfss:// through a DFS endpoint: see below)
        # the change feed, the view as of a version, a key's plot and the report's open windows
        assert_same_changes_and_past(azure.spec, local.spec)
        assert plot(azure.spec, key, str(tmp_path / "azure.png"))
        assert (tmp_path / "azure.png").stat().st_size > 0
        assert open_windows(azure.spec) == open_windows(local.spec)
        assert "pipeline report" in render_report(azure.spec, [], None, open_windows(azure.spec))
    compacted = {r.table: r.details for r in optimize(azure.spec) if not r.skipped}
    assert compacted["panes"]["numFilesRemoved"] > 1
    assert any(not r.skipped for r in vacuum(azure.spec, 0, force=True))
    assert view_rows(azure.spec) == view_rows(local.spec)
    if spelling == "az":  # Azurite has no DFS endpoint, which DuckDB reads abfss:// through
        sql = "SELECT * EXCLUDE (absorbed), (SELECT count(*) FROM panes) FROM current ORDER BY ALL"
        assert duck.query(azure.spec, sql, fmt="csv") == duck.query(local.spec, sql, fmt="csv")
        assert duck.history(azure.spec, key) == duck.history(local.spec, key)
    objects = container_objects(lake)
    assert not any("/_locks/" in k for k in objects)  # the fold's lock, released
    assert any(k.startswith("prod/sessions/current/_delta_log/") for k in objects)


def test_contenders_on_azure_never_hold_the_lock_together(azure_lake):
    contend(azure_lake)


def test_a_missing_container_is_named_on_one_line(azurite_endpoint, tmp_path):
    azure, _ = _lakes(azurite_endpoint, tmp_path)
    missing = replace(azure.spec, lake=f"az://no-such-container-{uuid.uuid4().hex[:8]}/lake")
    with pytest.raises(LakeError) as raised:
        open_view(missing)
    text = str(raised.value)
    assert "ContainerNotFound" in text and "\n" not in text and "\x1b" not in text
    with pytest.raises(LakeError, match=r"cannot take the lock .*ContainerNotFound"):
        Materializer(missing).run()


def test_no_azure_secret_in_errors_logs_duckdb_or_the_container(
    azurite_endpoint, tmp_path, monkeypatch, caplog, capfd
):
    import os

    key = os.environ["AZURE_STORAGE_ACCOUNT_KEY"]  # the emulator's: a working credential here
    planted = f"PLANTED-secret-{uuid.uuid4().hex}"
    connection = f"AccountName=x;AccountKey=PLANTED-conn-{uuid.uuid4().hex};EndpointSuffix=y"
    monkeypatch.setenv("AZURE_CLIENT_SECRET", planted)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
    caplog.set_level(logging.DEBUG)
    errors: list[str] = []

    def fails(error: type[Exception], call: Callable[[], Any]) -> None:
        """Run ``call``, which raises ``error``; keep its whole traceback (causes included)."""
        with pytest.raises(error) as raised:
            call()
        errors.append("".join(traceback.format_exception(raised.value)))

    azure, _ = _lakes(azurite_endpoint, tmp_path)
    spec = azure.spec
    duck.query(spec, "SELECT count(*) FROM current")
    fails(InvalidRequest, lambda: duck.query(spec, f"SELEC '{planted}' || '{key}'"))
    fails(InvalidRequest, lambda: duck.query(spec, f"SELECT '{connection}' FROM nothing"))
    missing = replace(spec, lake=f"az://no-such-{uuid.uuid4().hex[:8]}/lake")
    fails(LakeError, lambda: open_view(missing))
    fails(TableMissing, lambda: duck.history(replace(spec, lake=spec.lake + "-x"), "k"))
    with lock_held(spec.lake, "materializer"):
        fails(MaterializerBusy, lambda: Materializer(spec).run())
    with monkeypatch.context() as m:  # DuckDB refuses the secret (a statement holding it)
        m.setattr(
            duck,
            "duckdb_secret_fields",
            lambda location: {"CONNECTION_STRING": f"AccountKey={key}", "NO_SUCH": planted},
        )
        fails(LakeError, lambda: duck.connect(spec))
    output = capfd.readouterr()
    texts = {"errors": "\n".join(errors), "log": caplog.text, "out": output.out + output.err}
    for value in (key, planted, connection.split("AccountKey=")[1].split(";")[0]):
        for where, text in texts.items():
            assert value not in text, f"a credential in the {where}"
        for name, content in container_objects(spec.lake).items():
            assert value.encode() not in content, f"a credential in {name}"
