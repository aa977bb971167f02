"""Helpers of the Spark integration tests: landing files, offset-log replay into the simulator."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

T0 = 1_704_067_200  # 2024-01-01T00:00:00Z


def wait_while_running(running, condition, seconds: float = 120) -> bool:
    """Whether ``condition()`` held within ``seconds`` while ``running`` (a thread running a
    ``--follow`` run) is alive; a condition that raises (a table not created yet) did not."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and running.is_alive():
        try:
            if condition():
                return True
        except Exception:  # the table does not exist yet
            pass
        time.sleep(0.5)
    return False


def iso(seconds: float) -> str:
    whole = int(seconds)
    frac = round((seconds - whole) * 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + whole)) + f".{frac:06d}Z"


def put(directory: Path, name: str, lines: list[str]) -> Path:
    """Land a file atomically (hidden temp name, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    final = directory / name
    os.replace(tmp, final)
    return final


def land_in_order(directory: Path, files: list[list[str]], name: str) -> None:
    """Land ``files`` (each a list of lines) as ``name.format(i)``, file ``i`` modified at
    second ``1_700_000_000 + i``: Spark's file source reads files in order of modification,
    so with one file a batch, file ``i`` is batch ``i``'s."""
    for i, lines in enumerate(files):
        path = put(directory, name.format(i), lines)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def offset_log(ckpt: Path) -> list[tuple[int, int, int, int | None]]:
    """[(batch id, watermark ms, batch timestamp ms, landing-source log offset)] per batch."""
    out = []
    for p in sorted(
        (ckpt / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1
    ):
        if not p.name.isdigit():
            continue
        lines = p.read_text().splitlines()
        meta = json.loads(lines[1])
        src = lines[2].strip()
        log_offset = json.loads(src)["logOffset"] if src.startswith("{") else None
        out.append((int(p.name), meta["batchWatermarkMs"], meta["batchTimestampMs"], log_offset))
    return out


def committed_batches(ckpt: Path) -> set[int]:
    return {int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit()}


def next_watermarks(ckpt: Path) -> dict[int, int]:
    """batch id -> the watermark Spark computed after the batch (its commit log)."""
    return {
        int(p.name): json.loads(p.read_text().splitlines()[1])["nextBatchWatermarkMs"]
        for p in (ckpt / "commits").iterdir()
        if p.name.isdigit()
    }


def parse_view(text: str):
    """A view line (``device_id``, ``ts``, ``seconds``) as the simulator's element (key, value,
    event time µs), or None for a line the job rejects."""
    from datetime import datetime

    try:
        r = json.loads(text)
        ts = datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
        us = int(ts.timestamp()) * 1_000_000 + ts.microsecond
        return (r["device_id"], {"seconds": r["seconds"]}, us) if r.get("device_id") else None
    except (ValueError, KeyError, TypeError):
        return None


def replay(pipeline, parse_line, fires_from: int = 0) -> list[tuple[int, list, list]]:
    """Rebuild each batch from the checkpoint and run the simulator over them: returns
    [(batch id, panes, dropped)]; ``parse_line(text) -> (key, value, ts_us) or None``.

    A batch moves the clocks to its own (offset log), takes its rows, then, from batch
    ``fires_from`` on, fires its watermark advance itself, at its own processing time: to the
    watermark Spark computed after it (commit log). The batches of a lake's older code (state
    layout format 2) left that advance to Spark's next batch, a no-data one."""
    from jobs.driver.plan import operator_config
    from panes import Simulator

    ckpt = Path(pipeline.checkpoint_path)
    cfg = operator_config(pipeline)
    sim = Simulator(pipeline.windowing(), pipeline.combine_fn())
    done = committed_batches(ckpt)
    after = next_watermarks(ckpt)
    result, prev = [], -1
    for batch_id, wm_ms, pt_ms, log_offset in offset_log(ckpt):
        if batch_id not in done:
            continue
        rows = []
        if log_offset is not None:
            for lo in range(prev + 1, log_offset + 1):
                listing = ckpt / "sources" / "0" / str(lo)
                for line in listing.read_text().splitlines()[1:] if listing.exists() else []:
                    path = json.loads(line)["path"].removeprefix("file://")
                    for text in Path(path).read_text().splitlines():
                        parsed = parse_line(text)
                        if parsed is not None:
                            rows.append(parsed)
            prev = log_offset
        n_dropped = len(sim.dropped)
        # One micro-batch == advance both clocks, the batch's rows as one bundle, then the
        # advance to the watermark Spark computed after the batch (fired in the batch).
        panes = sim.advance(cfg.model_watermark(wm_ms), pt_ms * 1000)
        panes += sim.add_elements(sorted(rows, key=lambda e: (e[0], e[2], repr(e[1]))))
        if batch_id >= fires_from and after[batch_id] > wm_ms:
            panes += sim.advance(cfg.model_watermark(after[batch_id]), pt_ms * 1000)
        result.append((batch_id, panes, sim.dropped[n_dropped:]))
    return result


def norm_pane(record: dict, columns) -> tuple:
    return tuple(
        tuple((s["start_us"], s["end_us"]) for s in v or ()) if k == "supersedes" else v
        for k, v in sorted(record.items())
        if k in columns
    )
