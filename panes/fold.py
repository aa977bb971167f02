"""Folding panes into current results, and the batch results they must equal.

:func:`fold` is the reference semantics of the current view: what a consumer that applies the
pane log in order ends up with. :func:`batch` computes the same windows from the accepted
elements in one go. For every window function, trigger, accumulation mode and bundling,
``fold(panes) == batch(accepted elements)``: a view equals the batch result.

Fold rules, per accumulation mode:

* accumulating: a window's latest pane replaces its value;
* discarding: a window's panes merge into its value (the combiner's merge of their
  accumulators), and a merged window absorbs the values of the windows it supersedes;
* accumulating & retracting: a retraction withdraws exactly the pane it names; a pane sets its
  window's value.

In every mode a pane deletes the windows it supersedes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from panes.combiners import CombineFn, inputs_of
from panes.pane import Dropped, Pane
from panes.weights import split_elements_by_weight
from panes.window import Window
from panes.windowfns import WindowFn
from panes.windowing import AccumulationMode

ViewKey = tuple[Any, Window]


class FoldError(ValueError):
    """The panes are not a consistent log (e.g. a retraction of a value that is not current)."""


def fold_accumulators(
    panes: Iterable[Pane], mode: AccumulationMode, combine_fn: CombineFn
) -> dict[ViewKey, Any]:
    """The accumulator of every live (key, window) after applying ``panes`` in order."""
    view: dict[ViewKey, tuple[int, Any]] = {}  # (pane index, accumulator)
    discarding = mode is AccumulationMode.DISCARDING
    for pane in panes:
        at = (pane.key, pane.window)
        if pane.is_retraction:
            current = view.get(at)
            if current is None or current[0] != pane.pane.index:
                raise FoldError(
                    f"retraction of pane {pane.pane.index} of {at}, which is not "
                    f"current ({current})"
                )
            del view[at]
            continue
        absorbed = [view.pop((pane.key, w)) for w in pane.supersedes if (pane.key, w) in view]
        if discarding:
            parts = [acc for _, acc in absorbed]
            if at in view:
                parts.append(view[at][1])
            parts.append(pane.accumulator)
            acc = parts[0] if len(parts) == 1 else combine_fn.merge(parts)
        else:
            acc = pane.accumulator
        view[at] = (pane.pane.index, acc)
    return {at: acc for at, (_, acc) in view.items()}


def fold(
    panes: Iterable[Pane], mode: AccumulationMode, combine_fn: CombineFn
) -> dict[ViewKey, Any]:
    """The current value of every live (key, window) after applying ``panes`` in order."""
    return {
        at: combine_fn.extract(acc)
        for at, acc in fold_accumulators(panes, mode, combine_fn).items()
    }


def batch(
    elements: Iterable[tuple[Any, Any, int]],
    window_fn: WindowFn,
    combine_fn: CombineFn,
    dropped: Iterable[Dropped] = (),
) -> dict[ViewKey, Any]:
    """The windows and values a batch computation gives for ``elements``.

    ``dropped`` elements are left out of the windows they were dropped from (an element of
    sliding windows can be dropped from one window and accepted in another).

    Weighted elements (:class:`~panes.weights.Retracted` values, weight -1): windows are
    assigned and merged over the timestamps of all elements, of either weight; a window's value
    is its +1 values with the -1 values withdrawn, and a window whose weight is not positive
    does not exist (the engine's rules for weighted input).

    A combiner that reads event times is given the elements' (:func:`~panes.combiners.inputs_of`).
    """
    # Dropped values by (key, timestamp, window); values need not be hashable (records are
    # dicts), so each one is matched by equality and used once.
    excluded: dict[tuple[Any, int, Window | None], list[Any]] = {}
    for d in dropped:
        excluded.setdefault((d.key, d.timestamp, d.window), []).append(d.value)
    by_key: dict[Any, list[tuple[Window, Any, int]]] = {}
    for key, value, timestamp in elements:
        for window in window_fn.assign(timestamp, value):
            values = excluded.get((key, timestamp, window))
            if values and value in values:
                values.remove(value)
                continue
            by_key.setdefault(key, []).append((window, value, timestamp))
    result: dict[ViewKey, Any] = {}
    for key, assigned in by_key.items():
        final = {w: w for w, _, _ in assigned}
        if window_fn.is_merging:
            _merge_to_fixpoint(window_fn, final)
        groups: dict[Window, list[tuple[Any, int]]] = {}
        for window, value, timestamp in assigned:
            groups.setdefault(final[window], []).append((value, timestamp))
        for window, group in groups.items():
            added, withdrawn = split_elements_by_weight(group)
            if len(added) <= len(withdrawn):
                continue
            acc = combine_fn.add_all(combine_fn.create(), inputs_of(combine_fn, added))
            for value in inputs_of(combine_fn, withdrawn):
                acc = combine_fn.retract(acc, value)
            result[(key, window)] = combine_fn.extract(acc)
    return result


def _merge_to_fixpoint(window_fn: WindowFn, final: dict[Window, Window]) -> None:
    """Map every window to the window it ends up in once nothing merges any more."""
    while True:
        live = set(final.values())
        merges = window_fn.merge(live)
        if not merges:
            return
        into = {member: result for members, result in merges for member in members}
        for window, current in final.items():
            final[window] = into.get(current, current)
