"""sinks: a pipeline's lake — its Delta tables, the fold into the view, and what reads them.

Five rooms, each with a front door (``from sinks.fold import Materializer``), each importing only
the rooms above it in this list:

* :mod:`sinks.lake`: the lake's format and writes (tables, the pane log, exactly-once appends,
  data files, object stores, locks);
* :mod:`sinks.upkeep`: compaction and vacuum;
* :mod:`sinks.fold`: the materializer (the pane log folded into the ``current`` view) and the
  view's change feed;
* :mod:`sinks.verification`: the view against two independent recomputations;
* :mod:`sinks.presentation`: DuckDB over the lake, the pictures and the report.
"""

import os

# delta-rs's allocator (its own jemalloc) keeps freed pages for ten seconds by default: the MERGE
# of one piece of a fold left ~270 MiB held through the next piece's reduction, which DuckDB and
# Arrow allocate elsewhere (measured: the 10M fold's peak 900 -> 795 MiB, docs/decisions.md).
# Read when deltalake is first imported: set here, before any module of sinks imports it.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
