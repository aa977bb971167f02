"""Commands on a lake whose bucket cannot be read: one line naming the store's answer, no
traceback, no credential (a real S3 server process: ``tests/s3_server.py``)."""

from __future__ import annotations

import os

import pytest

CONF = """\
name = "p"
lake = "s3://no-such-bucket/prod/p"
checkpoint = "{checkpoint}"
keys = ["k"]
event_time = "ts"
window = "FixedWindows(1h)"
[aggregates]
n = "count()"
[source]
path = "{landing}"
schema = {{ k = "string", ts = "timestamp" }}
"""


@pytest.mark.parametrize("command", ["check", "materialize", "verify"])
def test_a_bucket_that_does_not_exist_is_named_on_one_line(s3_endpoint, tmp_path, capsys, command):
    from jobs.cli.commands import main

    (tmp_path / "in").mkdir()
    conf = tmp_path / "p.toml"
    conf.write_text(CONF.format(checkpoint=tmp_path / "ckpt", landing=tmp_path / "in"))
    assert main([command, str(conf)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"panestore {command}: ") and err.count("\n") == 1
    assert "NoSuchBucket" in err and os.environ["AWS_SECRET_ACCESS_KEY"] not in err
