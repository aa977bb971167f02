"""The materializer lock: one materializer at a time; a dead holder's lock is taken over."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from sinks.errors import MaterializerBusy
from sinks.materializer import Materializer
from tests.sinks.lakes import (
    chunked,
    random_run,
    view_dict,
    write_batches,
)


def test_a_concurrent_materializer_is_refused(tmp_path):
    import json
    import os
    import socket

    run = random_run(3, str(tmp_path))
    write_batches(run, chunked(run, random.Random(3)))
    lock = os.path.join(run.spec.lake, "_locks", "materializer.lock")
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    with open(lock, "w") as f:  # a live holder: this very process
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "since": 0}, f)
    with pytest.raises(MaterializerBusy, match="another materializer"):
        Materializer(run.spec).run()
    with open(lock, "w") as f:  # a dead holder: taken over
        json.dump({"pid": 2**22 + 12345, "host": socket.gethostname(), "since": 0}, f)
    Materializer(run.spec).run()
    assert view_dict(run.spec) == run.expected()
