"""A condition's three renderings agree with the model's own meaning (its Python evaluation):
Arrow compute (what the JSON-lines decoder tags with) and DuckDB SQL (what ``verify`` filters
raw events with), over random records with nulls, quotes and backslashes in the text."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panes.columnar.conditions import arrow_flag
from tests.panes.test_conditions import conditions, records

SCHEMA = pa.schema([("s", pa.string()), ("n", pa.int64()), ("x", pa.float64()), ("b", pa.bool_())])


@pytest.mark.heavy
@settings(max_examples=60, deadline=None)
@given(conditions, st.lists(records, min_size=1, max_size=8))
def test_python_arrow_and_duckdb_agree(condition, rows):
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    python = [condition.evaluate(r) for r in rows]
    assert arrow_flag(condition, table).to_pylist() == python
    con = duckdb.connect()
    try:
        con.register("t", table)
        got = con.sql(f"SELECT {condition.sql('duckdb')} AS f FROM t").fetchall()
    finally:
        con.close()
    assert [f for (f,) in got] == python


def test_duckdb_quotes_identifiers_and_text_its_own_way():
    from panes.conditions import parse_condition

    c = parse_condition("s = 'it''s a \\ back' or n in (1, 2)")
    assert c.sql("duckdb") == "((\"s\" = 'it''s a \\ back') OR (\"n\" IN (1, 2)))"
    assert c.sql("spark") == "((`s` = 'it\\'s a \\\\ back') OR (`n` IN (1, 2)))"
