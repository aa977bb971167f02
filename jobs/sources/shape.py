"""What a pipeline's records hold, for the one statement of a record's rules
(:mod:`jobs.executor.record_rules`)."""

from __future__ import annotations

from jobs.config.pipeline import Pipeline
from jobs.executor.record_rules import RecordShape


def record_shape(pipeline: Pipeline) -> RecordShape:
    """What a record of ``pipeline`` holds, for the one statement of a record's rules
    (:mod:`jobs.executor.record_rules`), which every tagger renders: the plan's Spark SQL
    (:mod:`jobs.driver.plan`), a pane-log source's (:func:`jobs.sources.pane_log.driver.tagged`)
    and the JSON-lines decoder's Arrow, which is given this shape
    (:func:`jobs.sources.files.landing.jsonl_decoder`)."""
    column = pipeline.event_time_column
    return RecordShape(
        columns=tuple(pipeline.source.schema),
        keys=tuple(pipeline.keys),
        event_time=pipeline.event_time,
        values=tuple(pipeline.value_columns),
        epoch_us=None if column is None else column.epoch_us,
        ingestion_time=column is None,
        conditions=tuple(pipeline.conditions),
        dedup=tuple(pipeline.dedup),
        buckets=pipeline.state_buckets,
    )
