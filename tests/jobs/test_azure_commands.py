"""Commands on a lake on Azure storage whose container does not exist: one line naming the
store's answer, no traceback, no credential, and a run refused before Spark starts (the Azurite
emulator the tests start: ``tests/azurite_server.py``)."""

from __future__ import annotations

import os

import pytest

from tests.jobs.test_bucket_commands import CONF


def _conf(tmp_path) -> str:
    (tmp_path / "in").mkdir()
    conf = tmp_path / "p.toml"
    text = CONF.format(checkpoint=tmp_path / "ckpt", landing=tmp_path / "in")
    conf.write_text(text.replace("s3://no-such-bucket/prod/p", "az://no-such-container/prod/p"))
    return str(conf)


@pytest.mark.parametrize("command", ["check", "materialize", "verify", "status"])
def test_a_container_that_does_not_exist_is_named_on_one_line(
    azurite_endpoint, tmp_path, capsys, command
):
    from jobs.cli.commands import main

    assert main([command, _conf(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"panestore {command}: ") and err.count("\n") == 1, err
    assert "ContainerNotFound" in err and os.environ["AZURE_STORAGE_ACCOUNT_KEY"] not in err


def test_a_run_on_a_missing_container_is_refused_before_spark(azurite_endpoint, tmp_path):
    from jobs.config.load import load_pipeline
    from jobs.driver.runs import run
    from sinks.lake import LakeError

    with pytest.raises(LakeError, match="ContainerNotFound"):
        run(load_pipeline(_conf(tmp_path)), spark=object(), progress=None)  # Spark unused
