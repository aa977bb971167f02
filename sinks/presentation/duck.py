"""DuckDB over a pipeline's lake, offline: ``connect(spec)``, :func:`query`, :func:`changes` (the
view's change feed) and :func:`history`.

The ``delta`` extension (and, for a lake in a bucket, ``httpfs``) is installed from its
``duckdb-extension-<name>`` package (a file inside it) into a private extension directory, and
auto-install / auto-load are disabled: DuckDB never downloads an extension. The pipeline's
tables are registered as views ``panes``, ``current``, ``late``, ``rejected`` and ``runs``
(``delta_scan`` of each table that exists).

A lake in a bucket (``s3://bucket/prefix``) is read with the S3 settings of the standard AWS
environment, given to DuckDB as a temporary secret of the connection (:func:`s3_secret_fields`;
DuckDB reads no AWS configuration file). A lake on Azure storage (``az://container/prefix``) is
read with the ``azure`` extension and a secret made from the standard Azure environment
(:func:`~sinks.lake.azure_store.duckdb_secret_fields`); an ``abfss://`` lake is read through
Azure's DFS endpoint (not tested here: the Azurite emulator has none). No error of this module
quotes a credential.

Time travel (:func:`connect` ``as_of=``, :mod:`sinks.presentation.as_of`): each table at a Delta
version (``"panes:3"``, ``"current:2"``), every table at a time, or ``current`` folded from the pane
log up to a version (``"folded:3"``).
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from sinks.fold import Changes, read_changes, view_from_pane_log
from sinks.lake import (
    TABLES,
    InvalidRequest,
    LakeError,
    TableMissing,
    ViewSpec,
    duckdb_secret_fields,
    is_azure,
    is_object_store,
    one_line,
    plain_table,
    representable_us,
    table_exists,
)
from sinks.presentation.as_of import AsOf
from sinks.presentation.as_of import as_of as parse_as_of


def extension_file(name: str) -> Path:
    """The ``<name>.duckdb_extension`` shipped by the ``duckdb-extension-<name>`` package
    (``delta``, ``httpfs``), for the installed DuckDB version."""
    import duckdb

    package = f"duckdb-extension-{name}"
    try:
        pkg = importlib.import_module(package.replace("-", "_"))
    except ImportError:
        raise LakeError(
            f"the DuckDB {name} extension is not installed: pip install "
            f"{package}=={duckdb.__version__}"
        ) from None
    base = Path(str(pkg.__file__)).parent / "extensions"
    version = "v" + duckdb.__version__
    file = f"{name}.duckdb_extension"
    found = sorted(base.glob(f"{version}/**/{file}")) or sorted(base.glob(f"**/{file}"))
    if not found:
        raise LakeError(f"no {file} under {base} (duckdb {duckdb.__version__})")
    return found[0]


def load_extension(con: Any, name: str) -> None:
    """Load the extension ``name`` into ``con``, installed first (into the connection's
    extension directory) from the file of its package (:func:`extension_file`) if it is not
    there yet: nothing is downloaded."""
    import duckdb

    try:
        con.execute(f"LOAD {name}")
    except duckdb.Error:
        con.execute(f"INSTALL {_lit(str(extension_file(name)))}")
        con.execute(f"LOAD {name}")


def raw_connect(
    extension_directory: str | None = None,
    *,
    object_store: bool = False,
    azure_location: str | None = None,
):
    """A DuckDB connection with ``delta`` loaded from the package file, no network; with
    ``object_store``, also ``httpfs`` and the S3 settings of the standard AWS environment
    (:func:`s3_secret_fields`), for tables in a bucket; with ``azure_location`` (a table on Azure
    storage), the ``azure`` extension and a secret for that location's account from the standard
    Azure environment (:func:`_create_azure_secret`)."""
    import duckdb

    ext_dir = extension_directory or os.path.join(
        tempfile.gettempdir(), f"panestore-duckdb-{os.getuid()}"
    )
    os.makedirs(ext_dir, exist_ok=True)
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "extension_directory": ext_dir,
        }
    )
    load_extension(con, "delta")
    if azure_location is not None:
        load_extension(con, "azure")
        _create_azure_secret(con, azure_location)
    if object_store and azure_location is None:
        load_extension(con, "httpfs")
        _create_s3_secret(con)
    con.execute("SET TimeZone = 'UTC'")
    return con


def s3_secret_fields(environ: Mapping[str, str] | None = None) -> dict[str, str | bool]:
    """The fields of a DuckDB ``TYPE s3`` secret from the standard AWS environment: the
    credentials (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), the
    region (``AWS_REGION`` or ``AWS_DEFAULT_REGION``) and a custom endpoint (``AWS_ENDPOINT_URL``:
    DuckDB wants ``host:port``, TLS off for ``http://``, path-style URLs). Both ``httpfs`` and
    ``delta_scan`` (delta-kernel) read the secret. Variables left unset are left out."""
    env = os.environ if environ is None else environ
    fields: dict[str, str | bool] = {}
    for field, names in _SECRET_VARIABLES.items():
        value = next((env[n] for n in names if env.get(n)), None)
        if value:
            fields[field] = value
    endpoint = env.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        fields["ENDPOINT"] = parts.netloc
        fields["USE_SSL"] = parts.scheme != "http"
        virtual = env.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "").lower() == "true"
        fields["URL_STYLE"] = "vhost" if virtual else "path"
    return fields


_SECRET_VARIABLES = {
    "KEY_ID": ("AWS_ACCESS_KEY_ID",),
    "SECRET": ("AWS_SECRET_ACCESS_KEY",),
    "SESSION_TOKEN": ("AWS_SESSION_TOKEN",),
    "REGION": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}


def _create_s3_secret(con: Any) -> None:
    """Create the connection's temporary S3 secret (:func:`s3_secret_fields`)."""
    fields = s3_secret_fields()
    settings = {k: str(v).lower() if isinstance(v, bool) else _lit(v) for k, v in fields.items()}
    _create_secret(con, "s3", settings, "the S3 settings of the AWS environment")


def _create_azure_secret(con: Any, location: str) -> None:
    """Create the connection's temporary Azure secret for ``location``'s account
    (:func:`~sinks.lake.azure_store.duckdb_secret_fields`: a connection string, a service
    principal or the credential chain)."""
    try:
        fields = duckdb_secret_fields(location)
    except ValueError as e:  # a location of no known account
        raise LakeError(one_line(e)) from None
    settings = {k: _lit(v) for k, v in fields.items()}
    _create_secret(con, "azure", settings, "the Azure settings of the environment")


def _create_secret(con: Any, kind: str, settings: dict[str, str], what: str) -> None:
    """``CREATE OR REPLACE TEMPORARY SECRET panestore_<kind> (TYPE <kind>, <settings>)``. A
    refusal names the settings given, never a value: DuckDB's message may quote the statement,
    which holds the credentials."""
    import duckdb

    given = "".join(f", {k} {v}" for k, v in settings.items())
    try:
        con.execute(f"CREATE OR REPLACE TEMPORARY SECRET panestore_{kind} (TYPE {kind}{given})")
    except duckdb.Error as e:
        raise LakeError(
            f"DuckDB refused {what} ({type(e).__name__}; "
            f"settings given: {', '.join(settings) or 'none'})"
        ) from None


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def current_as_of(spec: ViewSpec, as_of: Any) -> pa.Table:
    """The ``current`` view (an Arrow table) as of a view version (an int, ``view:N`` or
    ``current:N``), a time, or the pane log folded up to a version (``folded:N``)."""
    when = AsOf.parse(f"current:{as_of}" if isinstance(as_of, int) else as_of)
    if when.folded is not None:
        return view_from_pane_log(spec, upto=when.folded)
    table = _table_at(spec, "current", when)
    if table is None:
        raise InvalidRequest(f"--as-of {when.describe()}: the current view did not exist then")
    return table


def _table_at(spec: ViewSpec, name: str, when: AsOf) -> pa.Table | None:
    """Table ``name`` at the version ``when`` pins (None: it did not exist at that time)."""
    from deltalake import DeltaTable

    at = when.pin(name)
    path = spec.table_path(name)
    if not table_exists(spec, name):
        raise TableMissing(_missing(spec, name))
    dt = DeltaTable(path, storage_options=dict(spec.storage_options or {}) or None)
    latest = dt.version()
    if isinstance(at, int) and at > latest:
        raise InvalidRequest(f"--as-of {name}:{at}: table {name} has versions 0..{latest}")
    try:
        if at is not None:
            dt.load_as_version(at)
    except Exception as e:  # delta-rs: no version at or before that time (or cleaned away)
        if isinstance(at, datetime):
            return None
        raise InvalidRequest(f"--as-of {name}:{at}: {one_line(e, limit=300)}") from None
    if isinstance(at, datetime) and dt.version() == 0:  # delta-rs: its first version, even
        created_ms = dt.history(1)[0].get("timestamp")  # for a time before it was created
        if created_ms is not None and created_ms > at.timestamp() * 1000:
            return None
    return plain_table(dt.to_pyarrow_table())


def _missing(spec: ViewSpec, name: str) -> str:
    does = "run the pipeline first (`panestore run CONF`)"
    if name == "current":
        does += ", or fold its pane log (`panestore materialize CONF`)"
    return f"table {name} does not exist yet in lake {spec.lake}: {does}"


def connect(spec: ViewSpec, *, as_of: Any = None, extension_directory: str | None = None):
    """DuckDB connection with views ``panes``, ``current``, ``late``, ``rejected``, ``runs``
    (each table that exists: at its newest version, or where ``as_of`` pins it:
    :mod:`sinks.presentation.as_of`); ``httpfs`` and the S3 settings are loaded only for a lake on
    an S3 store, the ``azure`` extension and the Azure settings only for one on Azure storage."""
    when = parse_as_of(as_of)
    remote = any(is_object_store(spec.table_path(name)) for name in TABLES)
    azure = next((spec.table_path(n) for n in TABLES if is_azure(spec.table_path(n))), None)
    con = raw_connect(extension_directory, object_store=remote, azure_location=azure)
    for name in TABLES:
        path = spec.table_path(name)
        if when is not None and name == "current" and when.folded is not None:
            table: pa.Table | None = view_from_pane_log(spec, upto=when.folded)
        elif when is not None and when.pin(name) is not None:
            if not table_exists(spec, name):
                continue  # a query that reads it is told (query)
            table = _table_at(spec, name, when)
        else:
            if table_exists(spec, name):
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM delta_scan({_lit(path)})")
            continue
        if table is not None:
            con.register(f"_{name}_as_of", table)
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM _{name}_as_of")
    return con


# -- output -------------------------------------------------------------------------------------

FORMATS = ("table", "csv", "json", "parquet")


def write_result(rel, fmt: str = "table", out: str | None = None, max_rows: int = 200) -> str:
    """Render a DuckDB relation: a readable table (text), or CSV / JSON (lines) / Parquet.
    Parquet needs ``out``; CSV / JSON go to ``out`` or are returned."""
    if fmt not in FORMATS:
        raise InvalidRequest(f"unknown output format {fmt!r}; one of {FORMATS}")
    if fmt == "table":
        return format_table(rel.columns, rel.fetchmany(max_rows + 1), max_rows)
    if fmt == "parquet" and not out:
        raise InvalidRequest("parquet output needs an output file (--out FILE)")
    if out:
        opts = {"csv": "FORMAT CSV, HEADER", "json": "FORMAT JSON", "parquet": "FORMAT PARQUET"}
        rel.query("_r", f"COPY (SELECT * FROM _r) TO {_lit(out)} ({opts[fmt]})")
        return ""
    buf = io.StringIO()
    cols = rel.columns
    rows = rel.fetchall()
    if fmt == "csv":
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if v is None else v for v in r])
    else:
        for r in rows:
            buf.write(json.dumps(dict(zip(cols, r, strict=True)), default=str) + "\n")
    return buf.getvalue()


def format_table(columns: list[str], rows: list[tuple], max_rows: int = 200) -> str:
    more = len(rows) > max_rows
    rows = rows[:max_rows]
    text = [[_cell(v) for v in r] for r in rows]
    widths = [len(c) for c in columns]
    for r in text:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in text]
    out.append(f"({len(rows)} rows{', more not shown' if more else ''})")
    return "\n".join(out)


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    return str(v)


READ_ONLY = (
    "a query reads: one SELECT (or WITH, FROM, VALUES, PIVOT, DESCRIBE, SHOW, SUMMARIZE, a "
    "PRAGMA that reads) or an EXPLAIN of one"
)
"""What :func:`query` runs: the statements that read."""

# a statement's leading blanks and comments, and EXPLAIN's own words before the statement it
# explains: ANALYZE, then options in parentheses (or a parenthesized query: tried both ways)
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_EXPLAIN = re.compile(r"EXPLAIN\b\s*(?:ANALY[SZ]E\b\s*)?", re.I)
_OPTIONS = re.compile(r"\([^()]*\)\s*")


def check_read_only(sql: str) -> None:
    """Refuse ``sql`` (:class:`InvalidRequest`, naming what is refused) unless it is one
    statement that reads (:data:`READ_ONLY`), by DuckDB's own parser and before anything runs:
    a statement that writes (COPY, EXPORT, CREATE, INSERT, UPDATE, DELETE, MERGE, ATTACH, ...),
    loads code (INSTALL, LOAD) or changes settings (SET, RESET, USE, a PRAGMA that sets), an
    EXPLAIN (ANALYZE runs it) of one, CALL, PREPARE / EXECUTE, and more than one statement.

    DuckDB's parser turns a PIVOT that lists no values (``ON country``, no ``IN (...)``) into
    two statements of no text of their own, a CREATE TYPE of the values and the SELECT; that
    pair is one PIVOT, taken (the type lives in the query's in-memory connection only).

    >>> check_read_only("WITH s AS (SELECT 1 AS n) SELECT n FROM s")
    >>> check_read_only("COPY (SELECT 1) TO 'x.csv'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sinks.lake.errors.InvalidRequest: COPY refused: a query reads: one SELECT (...) or an ...
    """
    import duckdb

    with _duckdb_errors():
        statements = duckdb.extract_statements(sql)
    if not statements:
        raise InvalidRequest(f"no SQL statement: {READ_ONLY}")
    *before, last = statements
    pivot = not last.query and all(
        not s.query and s.type == duckdb.StatementType.CREATE for s in before
    )
    if before and not pivot:
        own = sum(1 for s in statements if s.query)
        what = (
            f"{own} statements"
            if own > 1
            else f"{_first_word(sql) or 'SQL'} (DuckDB runs it as {len(statements)} statements)"
        )
        raise InvalidRequest(f"{what} refused: {READ_ONLY}")
    refused = _refused(last, sql)
    if refused:
        raise InvalidRequest(f"{refused} refused: {READ_ONLY}")


def _refused(statement: Any, whole: str) -> str | None:
    """What is refused in ``statement`` (None: it reads)."""
    import duckdb

    text = statement.query or whole
    if statement.type == duckdb.StatementType.SELECT:
        return None
    if statement.type == duckdb.StatementType.EXPLAIN:
        explained = _explained(text)
        if explained is None:
            return "EXPLAIN of something that is not a query"
        inner = _refused(explained, "")
        return None if inner is None else f"EXPLAIN of {inner}"
    return _first_word(text) or statement.type.name


def _explained(text: str) -> Any:
    """The one statement an EXPLAIN statement's ``text`` explains, or None."""
    import duckdb

    m = _EXPLAIN.match(text, _start(text))
    if m is None:
        return None
    rest = text[m.end() :]
    with_options = _OPTIONS.match(rest)
    for candidate in (rest, rest[with_options.end() :] if with_options else None):
        if not candidate:
            continue
        try:
            statements = duckdb.extract_statements(candidate)
        except duckdb.Error:
            continue
        if len(statements) == 1:
            return statements[0]
    return None


def _start(text: str) -> int:
    """Where ``text``'s statement starts, after blanks and comments."""
    m = _LEADING.match(text)
    return m.end() if m else 0


def _first_word(text: str) -> str:
    rest = text[_start(text) :]
    m = re.match(r"[A-Za-z_]+", rest)
    return m.group(0).upper() if m else ""


def _tables_named(sql: str) -> set[str] | None:
    """The lake tables ``sql`` names, from DuckDB's parse tree (nothing bound or run; a CTE of
    a table's name counts as the table); None when DuckDB cannot tell (a statement its
    serializer does not take, such as ``PIVOT``, that its binder cannot bind either)."""
    import duckdb

    con = duckdb.connect()
    try:
        serialized = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        tree = json.loads(serialized[0] if serialized else "{}")
        if not tree.get("error"):
            found: set[str] = set()
            stack: list[Any] = [tree]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    if node.get("type") == "BASE_TABLE":
                        found.add(str(node.get("table_name")))
                    stack += node.values()
                elif isinstance(node, list):
                    stack += node
            return found & set(TABLES)
        return {t for t in duckdb.get_table_names(sql) if t in TABLES}
    except duckdb.Error:
        return None
    finally:
        con.close()


def query(
    spec: ViewSpec, sql: str, fmt: str = "table", out: str | None = None, as_of: Any = None
) -> str:
    """Run ``sql`` over the lake's tables (:func:`connect`) and render the result
    (:func:`write_result`). Queries read: SQL that is not one statement that reads is refused
    before anything runs (:func:`check_read_only`). SQL that DuckDB refuses raises
    :class:`InvalidRequest`, any other DuckDB failure (writing ``out``, reading a table) a
    :class:`LakeError`, each with DuckDB's message on one line."""
    check_read_only(sql)
    when = parse_as_of(as_of)
    reads = _tables_named(sql)
    if when is not None:
        if reads is None:
            raise InvalidRequest(
                f"--as-of {when.describe()}: DuckDB cannot tell which tables this statement "
                "reads, so which version of each it should read: write it as a SELECT"
            )
        when.check_reads(reads)
    con = connect(spec, as_of=when)
    try:
        views = {row[0] for row in con.sql("SELECT view_name FROM duckdb_views()").fetchall()}
        for name in sorted((reads or set()) - views):
            if when is not None and when.pinned(name) and table_exists(spec, name):
                raise InvalidRequest(f"table {name} did not exist as of {when.describe()}")
            raise InvalidRequest(_missing(spec, name))
        with _duckdb_errors():
            return write_result(con.sql(sql), fmt, out)
    finally:
        con.close()


@contextmanager
def _duckdb_errors() -> Iterator[None]:
    """DuckDB's errors as :class:`InvalidRequest` (the SQL is wrong) or :class:`LakeError`."""
    import duckdb

    try:
        yield
    except (duckdb.ProgrammingError, duckdb.DataError) as e:
        raise InvalidRequest(f"the SQL failed: {one_line(e)}") from None
    except duckdb.Error as e:
        raise LakeError(f"DuckDB failed: {one_line(e)}") from None


def changes(
    spec: ViewSpec, since: int, until: int | None = None, fmt: str = "table", out: str | None = None
) -> tuple[str, Changes]:
    """The change feed of ``current`` for view versions ``since..until``
    (:func:`sinks.fold.change_feed.read_changes`) rendered as :func:`query` renders a result; the
    rendered text and what was read (its ``line()`` tells where to continue)."""
    read = read_changes(spec, since, until)
    con = raw_connect()
    try:
        con.register("changes", read.table)
        with _duckdb_errors():
            return write_result(con.sql("SELECT * FROM changes"), fmt, out), read
    finally:
        con.close()


# -- history of a window -------------------------------------------------------------------------


def _us_text(us: int | None) -> str:
    if us is None:
        return "NULL"
    if representable_us(us) is None:
        return "-inf" if us < 0 else "+inf"
    dt = datetime.fromtimestamp(us / 1e6, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")


def history_rows(spec: ViewSpec, key: Any, window_start: int | None = None) -> list[dict]:
    """The pane sequence of a key (or of one window): one dict per pane-log row, in order."""
    con = connect(spec)
    try:
        keys = spec.key_of(key)
        if len(keys) != len(spec.keys):
            raise InvalidRequest(f"key {key!r} does not match key columns {list(spec.keys)}")
        where = " AND ".join(f'"{k}" = ?' for k in spec.keys)
        params: list[Any] = [str(k) if isinstance(k, str) else k for k in keys]
        if window_start is not None:
            where += " AND window_start_us = ?"
            params.append(int(window_start))
        vals = ", ".join(f'"{v}"' for v in spec.value_names)
        try:
            rel = con.execute(
                f"""SELECT window_start_us, window_end_us, pane_index, timing, is_retraction,
                       {vals}, timestamp_us, watermark_us, processing_time_us, is_last, supersedes,
                       batch_id
                FROM panes WHERE {where}
                ORDER BY batch_id, processing_time_us, watermark_us, NOT is_retraction,
                         window_start_us, window_end_us, pane_index""",
                params,
            )
        except Exception as e:
            if "panes" in str(e) and "does not exist" in str(e):
                raise TableMissing(f"no pane log at {spec.table_path('panes')}") from None
            raise
        cols = [d[0] for d in rel.description]
        return [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]
    finally:
        con.close()


def history(spec: ViewSpec, key: Any, window_start: int | None = None) -> str:
    """Readable pane sequence: timing, index, value, retractions, watermark and processing time
    at each emission."""
    rows = history_rows(spec, key, window_start)
    if not rows:
        return f"no panes for key {key!r}" + (
            f" and window start {window_start}" if window_start is not None else ""
        )
    cols = [
        "window",
        "pane",
        "timing",
        "change",
        *spec.value_names,
        "watermark",
        "processing time",
        "batch",
        "note",
    ]
    out = []
    for r in rows:
        note = []
        if r["is_last"]:
            note.append("last")
        if r["supersedes"]:
            note.append(
                "supersedes "
                + ", ".join(
                    f"[{_us_text(s['start_us'])}, {_us_text(s['end_us'])})" for s in r["supersedes"]
                )
            )
        out.append(
            (
                f"[{_us_text(r['window_start_us'])}, {_us_text(r['window_end_us'])})",
                r["pane_index"],
                r["timing"],
                "retract" if r["is_retraction"] else "emit",
                *[_cell(r[v]) for v in spec.value_names],
                _us_text(r["watermark_us"]),
                _us_text(r["processing_time_us"]),
                r["batch_id"],
                "; ".join(note),
            )
        )
    return format_table(cols, out, max_rows=10_000)


def window_elements(
    spec: ViewSpec, key: Any, elements: pa.Table, window_start: int | None = None
) -> str:
    """The input records of each window of a key's pane history (its windows' bounds, from the
    pane log), by input when ``elements`` name theirs (a pipeline of several inputs'
    ``input`` column): one line per window and input with its count and event times.
    ``elements``: the pipeline's elements table (key columns, ``ts_us``, value columns)."""
    import pyarrow.compute as pc

    from panes.inputs import INPUT_COLUMN

    rows = history_rows(spec, key, window_start)
    bounds = sorted({(r["window_start_us"], r["window_end_us"]) for r in rows})
    keys = spec.key_of(key)
    mine = elements
    for column, value in zip(spec.keys, keys, strict=True):
        mine = mine.filter(pc.equal(mine.column(column), value))
    by_input = INPUT_COLUMN in mine.column_names
    out = []
    for start, end in bounds:
        ts = mine.column("ts_us")
        inside = mine.filter(pc.and_(pc.greater_equal(ts, start), pc.less(ts, end)))
        names = sorted(set(inside.column(INPUT_COLUMN).to_pylist())) if by_input else [None]
        window = f"[{_us_text(start)}, {_us_text(end)})"
        if not names:
            out.append((window, "-", 0, ""))
        for name in names:
            of = inside
            if name is not None:
                of = inside.filter(pc.equal(inside.column(INPUT_COLUMN), name))
            times = sorted(of.column("ts_us").to_pylist())
            shown = ", ".join(_us_text(t) for t in times[:5]) + (" ..." if len(times) > 5 else "")
            out.append((window, name or "-", len(times), shown))
    if not out:
        return f"no panes for key {key!r}"
    return format_table(["window", "input", "elements", "event times"], out, max_rows=10_000)
