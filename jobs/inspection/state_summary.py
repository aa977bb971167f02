"""A lake's operator state summarized without Spark: what ``panestore status`` and the run report
say of the keys and windows the state holds.

:func:`summarize_state` finds what the executor's reader needs in the lake's run files: the
shards of the state layout its first run recorded
(:func:`jobs.driver.preflight.recorded_state_layout`), the last batch the checkpoint committed
(:func:`jobs.checkpoint.logs.last_commit`) and the pipeline's operator
(:func:`jobs.driver.plan.operator_config`: its path and key columns); the reading is
:func:`jobs.executor.state_summary.summarize`'s. It writes nothing and takes no lock: a run may
be writing the state meanwhile; every shard is read as the committed batch left it, whatever
the run wrote since, unless the run went on by four more batches during the read and so
deleted that version (:data:`jobs.executor.state_store.KEEP_VERSIONS`): then
``FileNotFoundError``, and asking again reads the newer state.
"""

from __future__ import annotations

from jobs.checkpoint.logs import last_commit
from jobs.config.pipeline import Pipeline
from jobs.driver.plan import operator_config
from jobs.driver.preflight import recorded_state_layout
from jobs.executor.state_store import state_root
from jobs.executor.state_summary import LARGEST, MAX_DECODED_BYTES, StateSummary, summarize


def summarize_state(
    pipeline: Pipeline, *, largest: int = LARGEST, max_bytes: int = MAX_DECODED_BYTES
) -> StateSummary | None:
    """The summary of ``pipeline``'s operator state after the last committed batch (None: the
    lake has no committed batch yet); ``largest``: how many of the largest open windows it
    names; ``max_bytes``: how many bytes of keys' engine states it decodes on the lifted and
    per-element paths (:func:`jobs.executor.state_summary.summarize`). A state layout of a
    format this version does not read raises :class:`~jobs.config.values.PipelineConfigError`.
    """
    layout = recorded_state_layout(pipeline)
    committed = last_commit(pipeline.checkpoint_path)
    if layout is None or committed is None:
        return None
    return summarize(
        state_root(pipeline.checkpoint_path),
        committed,
        layout.shards,
        operator_config(pipeline),
        largest=largest,
        max_bytes=max_bytes,
    )


__all__ = ["StateSummary", "summarize_state"]
