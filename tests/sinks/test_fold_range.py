"""Integer folds never wrap: a discarding window whose panes each fit the pane log's 64-bit column
but whose total does not stops the materializer (both reducers), the refold and ``query
--as-of folded:N`` with one line naming the key, the window and the aggregate; ``verify`` compares
exact values and names the window. Totals that leave 64 bits only in between fold exactly."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from panes import AccumulationMode, FixedWindows, combiners
from panes.pane import Pane, PaneInfo, Timing
from panes.window import Window
from sinks.fold.materializer import Materializer
from sinks.lake.errors import FoldValueOutOfRange
from sinks.lake.lake_format import KIND_METADATA
from sinks.lake.pane_log import PaneLog, PaneLogLayout
from sinks.lake.spec import ViewSpec
from sinks.lake.tables import open_view, table_identity
from tests.sinks.lakes import view_dict

S = 1_000_000
A = 5_055_984_091_361_503_096  # fits 64 bits; A + A = 10,111,968,182,723,006,192 does not
WINDOW = "[1970-01-01T00:00:10+00:00, 1970-01-01T00:00:20+00:00)"
PATHS = [None, False]  # the materializer's choice (the vectorized reducer here), the Python one
PATH_IDS = ["vectorized", "python"]


def discarding_sum(lake: str) -> tuple[ViewSpec, PaneLog]:
    """A discarding pipeline summing a 64-bit integer column per key and 10 s window."""
    fn = combiners.sum()
    spec = ViewSpec(
        "big", lake, ("user",), (("total", fn),), FixedWindows(10 * S), AccumulationMode.DISCARDING
    )
    layout = PaneLogLayout(
        key_fields=(("user", pa.string()),),
        value_fields=(("total", pa.int64()),),
    )
    log = PaneLog(
        spec.table_path("panes"), spec.name, layout, **table_identity(spec, "panes", "pane log")
    )
    return spec, log


def pane(index: int, value: int, user: str = "u1") -> Pane:
    """The ``index``-th discarding pane of ``user``'s window [10 s, 20 s), emitted at a watermark
    past its end (verify compares it: a final window)."""
    info = PaneInfo(index, index, Timing.LATE, index == 0, False)
    window, watermark = Window(10 * S, 20 * S), 30 * S
    return Pane(user, window, value, 20 * S - 1, info, False, (), value, watermark, index)


def folded_version(spec: ViewSpec) -> int | None:
    return open_view(spec).transaction_version(spec.app_id)


def assert_names_the_window(message: str, total: int) -> None:
    assert "\n" not in message
    assert f"user='u1', window {WINDOW}" in message
    assert f"total = {total}" in message
    assert "64-bit integer column 'total'" in message


@pytest.mark.heavy
@pytest.mark.parametrize("sign", [1, -1], ids=["up", "down"])
@pytest.mark.parametrize("vectorized", PATHS, ids=PATH_IDS)
def test_a_total_past_64_bits_across_versions_stops_the_fold_naming_the_window(
    tmp_path, vectorized, sign
):
    spec, log = discarding_sum(str(tmp_path))
    log.append(0, [pane(0, sign * A), pane(0, 7, user="u2")])
    mat = Materializer(spec, vectorized=vectorized)
    first = mat.run()
    assert first.path == ("vectorized" if vectorized is None else "python")
    view_version = open_view(spec).version()
    log.append(1, [pane(1, sign * A), pane(1, 5, user="u2")])
    for _ in range(2):  # and again: every materialize stops at this window
        with pytest.raises(FoldValueOutOfRange) as raised:
            mat.run()
        assert_names_the_window(str(raised.value), sign * 2 * A)
        assert "nothing was written" in str(raised.value)
        assert open_view(spec).version() == view_version  # nothing committed, u2 neither
        assert folded_version(spec) == first.folded_to
        assert view_dict(spec) == {
            (("u1",), (10 * S, 20 * S)): {"total": sign * A},
            (("u2",), (10 * S, 20 * S)): {"total": 7},
        }


@pytest.mark.parametrize("vectorized", PATHS, ids=PATH_IDS)
def test_a_total_past_64_bits_within_one_version_stops_the_fold_naming_the_window(
    tmp_path, vectorized
):
    spec, log = discarding_sum(str(tmp_path))
    log.append(0, [pane(0, A), pane(1, A), pane(2, A)])
    with pytest.raises(FoldValueOutOfRange) as raised:
        Materializer(spec, vectorized=vectorized).run()
    assert_names_the_window(str(raised.value), 3 * A)
    assert folded_version(spec) is None and view_dict(spec) == {}


@pytest.mark.parametrize("vectorized", PATHS, ids=PATH_IDS)
def test_sums_that_leave_64_bits_only_in_between_fold_exactly(tmp_path, vectorized):
    """Panes of one version whose sum is beyond 64 bits, into a view row that brings the total
    back (and, in one version, a running sum that leaves 64 bits and comes back)."""
    spec, log = discarding_sum(str(tmp_path))
    u2 = [pane(0, A, user="u2"), pane(1, A, user="u2"), pane(2, -A, user="u2")]
    log.append(0, [pane(0, -A), *u2])
    mat = Materializer(spec, vectorized=vectorized)
    mat.run()
    log.append(1, [pane(1, A), pane(2, A)])
    mat.run()
    assert view_dict(spec) == {
        (("u1",), (10 * S, 20 * S)): {"total": A},
        (("u2",), (10 * S, 20 * S)): {"total": A},
    }


@pytest.mark.heavy
def test_the_pane_log_refolded_stops_naming_the_window(tmp_path):
    from sinks.fold.recompute import view_from_pane_log
    from sinks.presentation.duck import connect

    spec, log = discarding_sum(str(tmp_path))
    log.append(0, [pane(0, A)])
    Materializer(spec).run()
    log.append(1, [pane(1, A)])
    assert view_from_pane_log(spec, upto=1).column("total").to_pylist() == [A]
    with pytest.raises(FoldValueOutOfRange) as raised:
        view_from_pane_log(spec)
    assert_names_the_window(str(raised.value), 2 * A)
    with pytest.raises(FoldValueOutOfRange):
        connect(spec, as_of="folded:2")


def wrap_the_view(spec: ViewSpec, folded: int) -> None:
    """Make the view what a materializer that wrapped at 64 bits left: the window's total
    wrapped, pane-log versions up to ``folded`` recorded as folded."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    from sinks.lake.tables import plain_table

    view = open_view(spec)
    rows = plain_table(view.to_pyarrow_table())
    wrapped = pa.array([2 * A - 2**64], pa.int64())
    rows = rows.set_column(rows.column_names.index("total"), "total", wrapped)
    props = CommitProperties(
        app_transactions=[Transaction(spec.app_id, folded)],
        custom_metadata={KIND_METADATA: "current"},
    )
    write_deltalake(view, rows, mode="overwrite", commit_properties=props)


@pytest.mark.heavy
def test_verify_compares_exact_totals_and_names_a_window_beyond_the_view_column(tmp_path):
    from sinks.verification.view_check import verify

    spec, log = discarding_sum(str(tmp_path))
    log.append(0, [pane(0, A)])
    Materializer(spec).run()
    log.append(1, [pane(1, A)])
    elements = [("u1", A, 11 * S), ("u1", A, 12 * S)]

    # the materializer stopped: the view is what the pane log folds to up to its version, and
    # the batch over the events says the window's total, exactly, and that it is beyond the view
    with pytest.raises(FoldValueOutOfRange):
        Materializer(spec).run()
    report = verify(spec, elements=elements)
    refolded, batch = report.checks
    assert refolded.ok
    assert not batch.ok and len(batch.differences) == 1
    assert f"expected {{'total': {2 * A}}}" in batch.differences[0]
    assert "beyond the view's 64-bit integer column 'total'" in batch.differences[0]

    # a view whose total wrapped (an older materializer's): a difference, with the exact total
    wrap_the_view(spec, folded=2)
    report = verify(spec, elements=elements)
    assert not report.ok
    for check in report.checks:
        (difference,) = check.differences
        assert f"view {{'total': {2 * A - 2**64}}}, expected {{'total': {2 * A}}}" in difference
        assert "key 'u1' window [10000000, 20000000)" in difference
        assert "beyond the view's 64-bit integer column 'total'" in difference
    assert str(report).endswith(
        "verify: FAILED: 1 window compared, 0 still open (watermark 1970-01-01T00:00:30.000Z)"
    )
