"""A bucket of the columnar path, stored: its table of windows as one compressed Arrow stream.

The table is the columnar engine's (:attr:`panes.columnar.ColumnarEngine.schema`); the stream's
schema carries :data:`FORMAT` under :data:`FORMAT_KEY`, so a bucket of another layout is refused,
never misread.
"""

from __future__ import annotations

import pyarrow as pa

from panes.columnar import ColumnarEngine, Windows

FORMAT = b"windows-2"
"""The schema metadata value (key :data:`FORMAT_KEY`) that marks a bucket stored in this form."""
FORMAT_KEY = b"panestore.bucket"
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def load(engine: ColumnarEngine, blob: bytes | None) -> Windows:
    """A bucket stored in this form (None or empty: no windows)."""
    if not blob:
        return engine.empty()
    with pa.ipc.open_stream(blob) as reader:
        if (reader.schema.metadata or {}).get(FORMAT_KEY) != FORMAT:
            raise ValueError("the bucket is not a window table of this version")
        return engine.windows(reader.read_all())


def save(windows: Windows) -> bytes | None:
    """The bucket's blob (None: no window is left)."""
    if windows.rows == 0:
        return None
    table = windows.table()
    table = table.replace_schema_metadata({FORMAT_KEY: FORMAT})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


__all__ = ["FORMAT", "FORMAT_KEY", "load", "save"]
