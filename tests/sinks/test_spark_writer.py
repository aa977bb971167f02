"""The delta-spark writer branch, driven by a stand-in session (delta-spark's jars cannot be
fetched here): what it asks Spark to write, that a replayed batch is not written again, and that
the materializer folds what it wrote."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import (
    AccumulationMode,
    AfterCount,
    FixedWindows,
    Repeatedly,
    Simulator,
    Windowing,
    combiners,
)
from sinks.delta_append import DELTA_EXTENSION, SparkDeltaWriter
from sinks.materializer import Materializer
from sinks.pane_log import PaneLog, PaneLogLayout
from sinks.spec import ViewSpec
from sinks.tables import open_view, table_identity

S = 1_000_000


class StandInSpark:
    """What SparkDeltaWriter uses of a session with delta-spark; ``save`` does what delta-spark
    documents for ``txnAppId``/``txnVersion`` (skip a version at or below the recorded one) and
    ``userMetadata`` (kept in the commit), here through delta-rs."""

    def __init__(self, extensions: str = DELTA_EXTENSION) -> None:
        self.extensions = extensions
        self.saves: list[dict] = []
        self.conf = self

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.extensions if key == "spark.sql.extensions" else default

    def createDataFrame(self, table):
        return _Frame(self, table)


class _Frame:
    def __init__(self, spark: StandInSpark, table) -> None:
        self.spark, self.table = spark, table
        self.options: dict[str, str] = {}

    @property
    def write(self):
        return self

    def format(self, name: str):
        self.options["format"] = name
        return self

    def mode(self, mode: str):
        self.options["mode"] = mode
        return self

    def option(self, key: str, value):
        self.options[key] = str(value)
        return self

    def save(self, path: str) -> None:
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        self.spark.saves.append({**self.options, "path": path, "rows": self.table.num_rows})
        app, version = self.options["txnAppId"], int(self.options["txnVersion"])
        recorded = DeltaTable(path).transaction_version(app)
        if recorded is not None and version <= recorded:
            return  # Delta's idempotent write
        props = CommitProperties(
            app_transactions=[Transaction(app, version)],
            custom_metadata={"userMetadata": self.options["userMetadata"]},
        )
        write_deltalake(path, self.table, mode="append", commit_properties=props)


def test_the_session_decides_the_writer():
    assert SparkDeltaWriter.available(StandInSpark())
    assert not SparkDeltaWriter.available(StandInSpark(extensions=""))


def test_delta_spark_commits_once_per_batch_and_fold_like_delta_rs_commits(tmp_path):
    spark = StandInSpark()
    spec = ViewSpec(
        "p", str(tmp_path), ("key",), (("value", combiners.sum()),), FixedWindows(60 * S),
        AccumulationMode.ACCUMULATING, combine_fn=combiners.sum(),
    )  # fmt: skip
    windowing = Windowing(FixedWindows(60 * S), trigger=Repeatedly(AfterCount(1)),
                          accumulation_mode=AccumulationMode.ACCUMULATING)  # fmt: skip
    sim = Simulator(windowing, combiners.sum())
    identity = table_identity(spec, "panes", "pane log")
    log = PaneLog(
        spec.table_path("panes"), "p", PaneLogLayout(), writer=SparkDeltaWriter(spark), **identity
    )
    first = sim.add_elements([("a", 1.0, S), ("b", 2.0, 2 * S)])
    assert log.append(0, first)
    save = spark.saves[0]
    assert save["format"] == "delta" and save["mode"] == "append"
    assert (save["txnAppId"], save["txnVersion"]) == ("p", "0")
    assert json.loads(save["userMetadata"])["panestore.batchId"] == "0"
    assert save["path"].rstrip("/").endswith("panes") and save["rows"] == 2

    assert not log.append(0, first)  # a replayed batch: not written again
    assert len(spark.saves) == 1
    assert log.append(1, sim.add_elements([("a", 5.0, 3 * S)]))

    Materializer(spec).run()  # reads the batch ids from userMetadata
    view = {r["key"]: r["value"] for r in open_view(spec).to_pyarrow_table().to_pylist()}
    assert view == {"a": 6.0, "b": 2.0}
