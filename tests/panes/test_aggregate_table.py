"""The table "Every aggregate at a glance" of ``docs/aggregates.md`` is the registry's rendering
(:mod:`panes.aggregate_table`), not prose kept in step by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from panes import aggregate_table
from panes.aggregate_table import BEGIN, END, Row, render, rendered_in, rows, with_table
from panes.combine_fn import CombineFn, Filtered, Glance
from panes.combiners import AGGREGATES, Max, Min

DOC = Path(__file__).resolve().parents[2] / "docs" / "aggregates.md"


def test_the_documents_table_is_the_registrys_rendering():
    text = DOC.read_text()
    assert rendered_in(text) == render(), (
        "docs/aggregates.md's table is not the registry's: run "
        "python -m panes.aggregate_table docs/aggregates.md"
    )


def test_every_registered_class_has_a_row_and_its_retraction_is_the_classs_own():
    spoken = [cls for row in rows() for cls in row.classes]
    assert spoken == [*AGGREGATES.values(), Filtered, CombineFn]
    cells = {row.classes[0].name or row.classes[0].__name__: row.cells() for row in rows()}
    assert cells["sum"][4] == "yes" and cells["merge"][4] == "yes"
    assert cells["min"][4] == "refused (no inverse)" and cells["top_k"][4] == "refused"
    # min and max share their words, and so one row
    assert next(r for r in rows() if Min in r.classes).classes == (Min, Max)


def test_a_row_derives_its_retraction_from_its_classes():
    class Retracting(CombineFn):
        name = "r"

        def retract(self, acc, value):
            return acc

    class Fixed(CombineFn):
        name = "f"

    words = Glance("`r()`", "any", "`long`", "yes", "lifted", refusal=" (why)")
    assert Row((Retracting,), words).retracts == "yes"
    assert Row((Fixed,), words).retracts == "refused (why)"
    with pytest.raises(ValueError, match="only some of them retract"):
        Row((Retracting, Fixed), words).retracts  # noqa: B018  # the property raises


def test_writing_the_table_replaces_only_what_is_between_the_markers(tmp_path):
    doc = tmp_path / "aggregates.md"
    doc.write_text(f"# A\n\nbefore\n{BEGIN}\n| stale |\n{END}\nafter\n")
    assert aggregate_table.main([str(doc)]) == 0
    assert doc.read_text() == f"# A\n\nbefore\n{BEGIN}\n{render()}\n{END}\nafter\n"
    assert with_table(doc.read_text()) == doc.read_text()


def test_a_document_without_the_markers_is_refused_in_one_line(tmp_path, capsys):
    doc = tmp_path / "other.md"
    doc.write_text("# no table here\n")
    assert aggregate_table.main([str(doc)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs the lines" in err
    assert doc.read_text() == "# no table here\n"
    assert aggregate_table.main([]) == 2
