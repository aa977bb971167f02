"""The ``[watermark]`` table of a pipeline's configuration: what its watermark follows."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.config.values import Duration, PipelineConfigError, expect, parse_duration_setting

WATERMARK_POLICIES = ("bounded_out_of_orderness", "ingestion_time", "writer_noted")


@dataclass(frozen=True, init=False)
class Watermark:
    """``bounded_out_of_orderness``: watermark = largest event time seen - ``delay`` (heuristic;
    data behind it is late). ``ingestion_time``: arrival (batch) time is the event time, the
    watermark is perfect and nothing is ever late (the Dataflow paper, §2.3). ``writer_noted``: the
    minimum of the times the live writers noted (:mod:`jobs.driver.writers_watermark`); a writer
    that noted nothing for ``idle_timeout`` stops holding it. ``delay`` must be 0 with
    ``writer_noted``. Durations are given as in a configuration file, µs or text, and held in µs.

    >>> Watermark(delay="5m") == Watermark(delay=300_000_000)
    True
    >>> Watermark("writer_noted", idle_timeout="10m").idle_timeout
    600000000
    """

    policy: str
    delay: int
    idle_timeout: int

    def __init__(
        self,
        policy: str = "bounded_out_of_orderness",
        delay: Duration = 0,
        idle_timeout: Duration = "5m",
    ) -> None:
        """Check the settings (raising :class:`PipelineConfigError` naming the first bad one)."""
        expect("watermark.policy", policy, str, f"one of {WATERMARK_POLICIES}")
        if policy not in WATERMARK_POLICIES:
            raise PipelineConfigError(
                "watermark.policy", f"{policy!r} is not one of {WATERMARK_POLICIES}"
            )
        object.__setattr__(self, "policy", policy)
        for name, value in (("delay", delay), ("idle_timeout", idle_timeout)):
            object.__setattr__(self, name, parse_duration_setting(f"watermark.{name}", value))
        if self.policy == "writer_noted" and self.delay:
            raise PipelineConfigError(
                "watermark.delay",
                "must be 0 with writer_noted: the writers' marks say how far "
                "event time has come (a writer that lags notes a lower time)",
            )
        if self.policy == "writer_noted" and self.idle_timeout <= 0:
            raise PipelineConfigError("watermark.idle_timeout", "must be positive")
