"""A ViewSpec holds the pipeline's rules of a window's life (its allowed lateness among them):
what verify and report tell final windows by."""

from __future__ import annotations

from dataclasses import replace

from panes import FixedWindows, Sessions, Windowing, combiners
from panes.window import Window
from panes.windowing import AccumulationMode
from sinks.lake.spec import ViewSpec

AGGS = (("n", combiners.count()),)


def spec(window_fn, rules=None) -> ViewSpec:
    mode = AccumulationMode.DISCARDING
    return ViewSpec("p", "lake", ("user",), AGGS, window_fn, mode, rules=rules)


def test_a_spec_without_rules_has_its_window_functions_at_no_lateness():
    rules = spec(FixedWindows(10)).window_rules
    assert (
        rules.lateness == 0 and rules.gone(Window(0, 10), 11) and not rules.gone(Window(0, 10), 10)
    )


def test_a_spec_takes_the_pipelines_rules():
    rules = Windowing(FixedWindows(10), allowed_lateness=5).rules
    assert spec(FixedWindows(10), rules).window_rules is rules
    # a spec replaced with another window function: the same rules of it
    other = replace(spec(FixedWindows(10), rules), window_fn=Sessions(10)).window_rules
    assert other.window_fn == Sessions(10) and other.lateness == 5
    assert not other.gone(Window(0, 10), 24) and other.gone(Window(0, 10), 25)
