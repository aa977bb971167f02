"""A lake on Azure storage (``az://container/prefix``), end to end through the command line,
against the Azurite emulator the tests start (``tests/azurite_server.py``).

As for a lake in a bucket (``tests/spark/test_bucket_lake.py``): each command runs in a child
process that inherits the standard Azure environment naming the emulator, as a scheduled job
would; Spark's checkpoint stays in a local directory apart from the lake. A run killed in the
middle of a batch, a second run refused meanwhile (the lake's lock, by Azure's conditional
writes) and a rerun that drains leave the tables a local lake has after the same runs (exactly
once); ``verify``, ``query`` and ``status`` read them; the account key appears in no output and no
object of the container.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.azurite_server import container_objects
from tests.spark.test_bucket_lake import (
    assert_said_nowhere,
    command,
    ok,
    runs_on_a_store_lake,
)

pytestmark = pytest.mark.spark


def test_scheduled_runs_killed_and_refused_then_commands_on_an_azure_lake(
    spark, tmp_path, azure_lake
):
    runs = runs_on_a_store_lake(spark, tmp_path, azure_lake, container_objects)
    status = command("status", str(runs.conf), "--json")
    runs.outputs.append(ok(status))
    said = json.loads(status.stdout)
    assert said["lake"] == azure_lake and said["last_batch_id"] is not None, said
    key = os.environ["AZURE_STORAGE_ACCOUNT_KEY"]
    assert_said_nowhere(key, runs, container_objects(azure_lake), tmp_path / "checkpoint")
