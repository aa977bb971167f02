"""``decimal(p,s)`` and ``date`` columns without Spark: the type names, exact decimal sums, a sum
its column cannot hold refused naming key, window and aggregate, the state and the accumulators'
JSON keeping ``Decimal`` and ``date`` exactly, the aggregates' output types, the fingerprint,
and verify's own DuckDB reading of landing files (a decimal's text by its exact form)."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import pyarrow as pa
import pytest

from jobs.config.load import pipeline_from_dict
from jobs.config.values import PipelineConfigError
from panes import AfterWatermark, Engine, FixedWindows, KeyState, Windowing, combiners
from panes.simulator import Simulator
from sinks.lake.column_types import DATE_FORM, arrow_type, beyond_range, column_type, decimal_form

MINUTE = 60_000_000


def config(tmp_path, schema, aggregates, **source):
    return {
        "name": "ledger",
        "lake": str(tmp_path / "lake"),
        "keys": ["user"],
        "event_time": "ts",
        "window": "FixedWindows(1h)",
        "aggregates": aggregates,
        "source": {"path": str(tmp_path / "landing"), "schema": schema, **source},
    }


SCHEMA = {"user": "string", "ts": "timestamp", "amount": "decimal(18,2)", "day": "date"}


# -- type names ---------------------------------------------------------------------------------


def test_decimal_and_date_type_names_in_spark_arrow_and_duckdb():
    money = column_type("decimal(18, 2)")
    assert (money.spark, money.arrow, money.duckdb, money.numeric) == (
        "decimal(18,2)",
        pa.decimal128(18, 2),
        "DECIMAL(18,2)",
        True,
    )
    assert column_type("decimal") == column_type("decimal(10,0)")  # Spark's default
    day = column_type("date")
    assert (day.spark, day.arrow, day.duckdb, day.numeric) == ("date", pa.date32(), "DATE", False)
    assert arrow_type("list<decimal(38,2)>") == pa.list_(pa.decimal128(38, 2))


@pytest.mark.parametrize(
    "name", ["decimal(0,0)", "decimal(39,2)", "decimal(5,6)", "decimal(18)", "decimal(a,b)", "dec"]
)
def test_a_schema_type_that_is_no_column_type_is_refused_naming_the_column(tmp_path, name):
    with pytest.raises(PipelineConfigError, match=r"source\.schema\.amount") as raised:
        pipeline_from_dict(config(tmp_path, {**SCHEMA, "amount": name}, {"n": "count()"}))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "fits"),
    [
        ("12.30", True),
        ("-012.3000", True),
        ("99.99", True),
        ("0.5", True),
        ("7", True),
        ("1.234", False),  # a third decimal place: refused, never rounded
        ("123.4", False),  # three digits before the point
        ("1e1", False),
        (".5", False),
        ("1.", False),
        ("", False),
        ("--1", False),
    ],
)
def test_the_exact_text_of_a_decimal_4_2(text, fits):
    assert bool(re.fullmatch(decimal_form(4, 2), text)) is fits


def test_the_text_of_a_date_is_yyyy_mm_dd():
    assert [bool(re.fullmatch(DATE_FORM, t)) for t in ("2024-01-02", "2024-1-2", "20240102")] == [
        True,
        False,
        False,
    ]


# -- exact sums ---------------------------------------------------------------------------------


def test_a_thousand_tenths_sum_to_exactly_one_hundred():
    """Doubles drift (0.1 x 1000 is 99.9999999999986); decimals do not, added at once, one by
    one or merged from parts."""
    tenths = [Decimal("0.10")] * 1000
    assert sum([0.1] * 1000) != 100.0
    fn = combiners.sum()
    assert fn.add_all(fn.create(), tenths) == Decimal("100.00")
    acc = fn.create()
    for v in tenths:
        acc = fn.add(acc, v)
    assert acc == Decimal("100.00")
    assert fn.merge([fn.add_all(0, tenths[:300]), fn.add_all(0, tenths[300:])]) == Decimal("100")
    assert fn.retract(acc, Decimal("0.10")) == Decimal("99.90")


def test_sums_beyond_28_digits_are_not_rounded():
    """Python's default decimal context keeps 28 digits: 10^30 + 0.01 would be 10^30."""
    fn = combiners.aggregates(total=combiners.sum("x"), avg=combiners.mean("x"))
    values = [{"x": Decimal("999999999999999999999999999999.99")}, {"x": Decimal("0.01")}]
    out = fn.extract(fn.add_all(fn.create(), values))
    assert out["total"] == Decimal("1000000000000000000000000000000.00")
    assert out["avg"] == 5e29


def test_a_mean_of_decimals_is_the_exact_sum_over_the_count_as_a_double():
    fn = combiners.mean()
    assert fn.extract(fn.add_all(fn.create(), [Decimal("0.10")] * 3)) == 0.1


def test_floats_never_enter_decimal_arithmetic():
    with pytest.raises(TypeError):
        combiners.sum().add_all(0, [Decimal("0.1"), 0.2])


def test_min_max_and_to_list_of_dates():
    days = [dt.date(2024, 6, 2), dt.date(2024, 5, 30), None]
    assert combiners.min().add_all(None, days) == dt.date(2024, 5, 30)
    assert combiners.max().add_all(None, days) == dt.date(2024, 6, 2)
    assert combiners.to_list().add_all((), days) == tuple(days)


# -- a sum its column cannot hold ---------------------------------------------------------------


def test_beyond_range_of_a_decimal_column():
    col = pa.decimal128(38, 2)
    assert not beyond_range(Decimal("9" * 36 + ".99"), col)
    assert beyond_range(Decimal("1" + "0" * 36 + ".00"), col)
    assert beyond_range(Decimal("0.001"), col)


def test_a_pane_whose_decimal_sum_does_not_fit_decimal_38_2_is_refused_naming_it(tmp_path):
    """Two values of decimal(38,2)'s largest magnitude sum past 38 digits: the pane row builder
    refuses the batch naming key, window and aggregate, as it does a 64-bit integer sum."""
    from jobs.driver.plan import layout
    from sinks.lake.errors import PaneValueOutOfRange
    from sinks.lake.pane_log import panes_as_columns

    pipeline = pipeline_from_dict(
        config(
            tmp_path,
            {**SCHEMA, "amount": "decimal(38,2)"},
            {"total": "sum(amount)"},
        )
    )
    assert pipeline.aggregate_types["total"] == "decimal(38,2)"
    sim = Simulator(Windowing(FixedWindows(MINUTE), AfterWatermark()), combiners.sum())
    big = Decimal("9" * 36 + ".99")
    sim.add_elements([("u7", big, 5), ("u7", big, 6), ("u8", big, 7)])
    sim.advance_watermark(MINUTE)
    fitting = [p for p in sim.panes if p.key == "u8"]
    assert panes_as_columns(fitting, layout(pipeline)).values[0].to_pylist() == [big]
    with pytest.raises(PaneValueOutOfRange) as raised:
        panes_as_columns(sim.panes, layout(pipeline))
    message = str(raised.value)
    assert "\n" not in message
    # (big + big in Python's default context would be rounded to 28 digits: 2.000...E+36)
    assert "user='u7'" in message and "total = 1" + "9" * 36 + ".98" in message
    assert "decimal(38,2) column 'total'" in message
    assert "[1970-01-01T00:00:00+00:00, 1970-01-01T00:01:00+00:00)" in message


# -- state and JSON -----------------------------------------------------------------------------


def test_a_keys_state_keeps_decimals_and_dates_exactly():
    fn = combiners.aggregates(
        total=combiners.sum("amount"), avg=combiners.mean("amount"), last=combiners.max("day")
    )
    windowing = Windowing(FixedWindows(MINUTE), AfterWatermark())
    sim = Simulator(windowing, fn)
    value = {"amount": Decimal("1234567890123456.78"), "day": dt.date(2024, 6, 1)}
    sim.add_elements([("u", value, 5), ("u", {**value, "amount": Decimal("0.01")}, 6)])
    (state,) = sim.states.values()
    back = Engine(windowing, fn).load_state(state.to_bytes())
    assert isinstance(back, KeyState)
    (window_state,) = back.windows.values()
    assert window_state.acc == (
        Decimal("1234567890123456.79"),
        (Decimal("1234567890123456.79"), 2),
        dt.date(2024, 6, 1),
    )


def test_the_accumulators_text_keeps_decimals_and_dates_exactly():
    from panes.accumulator_text import from_text, to_text

    fn = combiners.aggregates(
        avg=combiners.mean("amount"), days=combiners.to_list("day"), n=combiners.count()
    )
    acc = ((Decimal("100.10"), 7), (dt.date(2024, 6, 1), None), 7)
    text = to_text(fn, acc)
    assert from_text(fn, text) == acc
    assert json.loads(text)[0][0] == {"$decimal": "100.10"}


# -- configuration ------------------------------------------------------------------------------


def test_output_types_of_aggregates_over_decimals_and_dates(tmp_path):
    aggregates = {
        "total": "sum(amount)",
        "avg": "mean(amount)",
        "lo": "min(amount)",
        "first": "min(day)",
        "n": "count(day)",
        "days": "to_list(day)",
    }
    pipeline = pipeline_from_dict(config(tmp_path, SCHEMA, aggregates))
    assert pipeline.aggregate_types == {
        "total": "decimal(38,2)",
        "avg": "double",
        "lo": "decimal(18,2)",
        "first": "date",
        "n": "long",
        "days": "list<date>",
    }


def test_a_sum_of_dates_is_refused(tmp_path):
    with pytest.raises(PipelineConfigError, match=r"aggregates\.s: sum\(\) needs a numeric"):
        pipeline_from_dict(config(tmp_path, SCHEMA, {"s": "sum(day)"}))


def test_the_fingerprint_covers_a_decimals_precision_and_scale(tmp_path):
    from jobs.driver.fingerprint import Fingerprint

    def of(amount):
        conf = config(tmp_path, {**SCHEMA, "amount": amount}, {"t": "sum(amount)"})
        return Fingerprint.of(pipeline_from_dict(conf))

    assert of("decimal(18,2)") != of("decimal(18,3)")
    assert of("decimal") == of("decimal(10,0)")


# -- verify's own reading -----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_verify_reads_decimal_and_date_text_by_its_exact_form(tmp_path, fmt):
    """DuckDB's casts round 1.234 to 1.23 and read 2024-1-2; verify's reading leaves such
    records out, as the job rejects them, and keeps the others' values exact."""
    from jobs.inspection.source_elements import load_source_elements

    landing = tmp_path / "landing"
    landing.mkdir()
    records = [
        ("u", "2024-06-01T00:01:00Z", "0.10", "2024-06-01"),
        ("u", "2024-06-01T00:02:00Z", "9999999999999999.99", "2024-05-30"),
        ("u", "2024-06-01T00:03:00Z", "1.234", "2024-06-01"),  # refused: a third place
        ("u", "2024-06-01T00:04:00Z", "abc", "2024-06-01"),  # refused
        ("u", "2024-06-01T00:05:00Z", "1.00", "2024-6-1"),  # refused: not YYYY-MM-DD
    ]
    if fmt == "jsonl":
        lines = [
            json.dumps({"user": u, "ts": ts, "amount": a, "day": d}) for u, ts, a, d in records
        ]
        lines.append(json.dumps({"user": "u", "ts": "2024-06-01T00:06:00Z", "amount": 0.5}))
    else:
        lines = [",".join(r) for r in records]
        lines.append("u,2024-06-01T00:06:00Z,0.5,")
    (landing / f"a.{fmt}").write_text("\n".join(lines) + "\n")
    conf = config(tmp_path, SCHEMA, {"t": "sum(amount)", "d": "max(day)"}, format=fmt)
    if fmt == "csv":
        conf["source"]["csv_header"] = False
    got = load_source_elements(pipeline_from_dict(conf))
    rows = sorted((r["amount"], r["day"]) for r in got.to_pylist())
    assert rows == [
        (Decimal("0.10"), dt.date(2024, 6, 1)),
        (Decimal("0.50"), None),
        (Decimal("9999999999999999.99"), dt.date(2024, 5, 30)),
    ]


def test_the_row_encoding_reads_decimals_and_dates_exactly():
    """What Spark's to_json writes for a row (a decimal's digits, a date as days since 1970:
    jobs.executor.operator_input.row_expression) reads back as the same values."""
    from jobs.executor.operator_input import InputSchema, read_rows

    schema = InputSchema(
        keys=("user",),
        values=("amount", "day"),
        types=(
            ("user", pa.string()),
            ("amount", pa.decimal128(38, 2)),
            ("day", pa.date32()),
        ),
    )
    rows = [
        b'{"user":"u","ts_us":1,"amount":123456789012345678901234567890123456.78,"day":19875}',
        b'{"user":"u","ts_us":2,"amount":0.10}',
    ]
    table = read_rows(rows, schema)
    assert table is not None
    assert table.column("amount").to_pylist() == [
        Decimal("123456789012345678901234567890123456.78"),
        Decimal("0.10"),
    ]
    assert table.column("day").to_pylist() == [dt.date(2024, 6, 1), None]


@pytest.mark.parametrize("vectorized", [None, False], ids=["materializer's choice", "python"])
def test_a_discarding_fold_past_decimal_38_2_stops_naming_the_window(tmp_path, vectorized):
    """Two discarding panes that each fit decimal(38,2) fold to a sum that does not: the
    materializer stops with one line naming key, window and aggregate, nothing written (the
    vectorized reducer leaves decimal sums to the exact Python fold: DuckDB's overflow error
    named none of them)."""
    from panes import AccumulationMode
    from panes.pane import Pane, PaneInfo, Timing
    from panes.window import Window
    from sinks.fold.materializer import Materializer
    from sinks.lake.errors import FoldValueOutOfRange
    from sinks.lake.pane_log import PaneLog, PaneLogLayout
    from sinks.lake.spec import ViewSpec
    from sinks.lake.tables import table_identity

    s = 1_000_000
    spec = ViewSpec(
        "money",
        str(tmp_path),
        ("user",),
        (("total", combiners.sum()),),
        FixedWindows(10 * s),
        AccumulationMode.DISCARDING,
    )
    layout = PaneLogLayout(
        key_fields=(("user", pa.string()),),
        value_fields=(("total", pa.decimal128(38, 2)),),
    )
    log = PaneLog(
        spec.table_path("panes"), spec.name, layout, **table_identity(spec, "panes", "pane log")
    )
    big = Decimal("9" * 36 + ".99")

    def pane(index: int) -> Pane:
        info = PaneInfo(index, index, Timing.LATE, index == 0, False)
        window = Window(10 * s, 20 * s)
        return Pane("u1", window, big, 20 * s - 1, info, False, (), big, 30 * s, index)

    log.append(0, [pane(0), pane(1)])
    with pytest.raises(FoldValueOutOfRange) as raised:
        Materializer(spec, vectorized=vectorized).run()
    message = str(raised.value)
    assert "\n" not in message
    assert "user='u1', window [1970-01-01T00:00:10+00:00, 1970-01-01T00:00:20+00:00)" in message
    assert "total = 1" + "9" * 36 + ".98" in message and "decimal(38,2) column" in message


def test_verify_reads_a_given_tables_decimal_text_by_its_exact_form(tmp_path):
    """A batch DataFrame's events (as Arrow) holding the decimal as text: DuckDB's cast would
    round "1.234"; verify leaves the record out, as the job rejects it."""
    from jobs.inspection.source_elements import load_source_elements

    conf = config(tmp_path, SCHEMA, {"t": "sum(amount)"}, format="dataframe")
    del conf["source"]["path"]
    events = pa.table(
        {
            "user": ["u", "u"],
            "ts": pa.array([1, 2], pa.timestamp("us", "UTC")),
            "amount": ["0.10", "1.234"],
            "day": pa.array([None, None], pa.date32()),
        }
    )
    got = load_source_elements(pipeline_from_dict(conf), events)
    assert got.column("amount").to_pylist() == [Decimal("0.10")]


def test_the_columnar_engine_leaves_decimals_and_dates_to_the_element_path_saying_why():
    from panes.columnar.accumulators import parts_of

    types = {"amount": pa.decimal128(18, 2), "day": pa.date32()}.get
    for fn in (combiners.sum("amount"), combiners.max("day"), combiners.to_list("amount")):
        reason = parts_of(fn, types, whole=False)
        assert isinstance(reason, str) and "combined element by element" in reason, reason
    assert not isinstance(parts_of(combiners.count("amount"), types, whole=False), str)


def test_a_pane_log_source_offers_an_upstreams_decimal_and_date_aggregates(tmp_path):
    """A downstream pipeline over the pane log of one summing decimal(18,2) and taking the max
    date reads them as decimal(38,2) and date columns, and sums the sums exactly again."""
    from jobs.config.load import load_pipeline
    from jobs.reading.columns import decode_columns, encode_columns

    up = tmp_path / "up.toml"
    up.write_text(
        f'name = "daily"\nlake = "{tmp_path / "up"}"\nkeys = ["user"]\nevent_time = "ts"\n'
        'window = "FixedWindows(1d)"\n'
        f'[source]\npath = "{tmp_path / "in"}"\n'
        'schema = { user = "string", ts = "timestamp", amount = "decimal(18,2)", day = "date" }\n'
        '[aggregates]\ntotal = "sum(amount)"\nlast = "max(day)"\ndays = "to_list(day)"\n'
    )
    down = tmp_path / "down.toml"
    down.write_text(
        f'name = "weekly"\nlake = "{tmp_path / "down"}"\nkeys = ["user"]\n'
        'window = "FixedWindows(7d)"\n'
        f'[source]\nformat = "pane_log"\npath = "{up}"\n'
        '[aggregates]\ntotal = "sum(total)"\nlast = "max(last)"\n'
    )
    p = load_pipeline(down)
    assert p.source.types == {"user": "string", "total": "decimal(38,2)", "last": "date"}
    assert p.aggregate_types == {"total": "decimal(38,2)", "last": "date"}
    columns = list(p.source.types.items())
    assert decode_columns(encode_columns(columns)) == columns  # the data source's option
