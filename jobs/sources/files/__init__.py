"""A landing directory of files (``[source] format = "jsonl"``, ``"csv"`` or ``"parquet"``).

Producers land files in a directory (atomically: under a hidden name, then renamed); every file
at any depth below it is input, except hidden names. A run reads the files that are new since
the last batch, each once.

* Settings: ``path`` (the landing directory), ``schema``, ``format``, ``max_files_per_trigger``,
  ``csv_header``, ``csv_delimiter``, ``epoch_unit``, ``create_path``
  (:class:`jobs.config.source.Source`); which files are input and how to name a path literally
  to Spark and DuckDB: :mod:`jobs.reading.files.paths` (also read by the configuration's path
  check, ``panestore verify`` and the writers' watermark).
* Driver side: the records frame over Spark's file source (:func:`read_landing_zone`,
  :mod:`.landing`: reading, parsing, the parse rejections); files that changed after a batch read
  them, noted at a run's start and bound to one batch's rejected rows (:mod:`.changes`).
* Executor side: the JSON-lines decoder, a ``mapInArrow`` stage that decodes the lines Arrow
  reads as Spark would and packs them into key-bucket blobs
  (:class:`~jobs.executor.jsonl_decoder.JsonlDecoder`, in :mod:`jobs.executor`).

>>> from jobs.sources.files import read_landing_zone
>>> read_landing_zone.__module__
'jobs.sources.files.landing'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panes.front_door import lazy_exports

if TYPE_CHECKING:  # what the front door offers; each is imported on first use (panes.front_door)
    from jobs.sources.files.changes import ChangedFile, bind_changes, note_changes
    from jobs.sources.files.landing import read_landing_zone

__all__ = [
    "ChangedFile",
    "bind_changes",
    "note_changes",
    "read_landing_zone",
]
__getattr__ = lazy_exports(__name__, __file__)
