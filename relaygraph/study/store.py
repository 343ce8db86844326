"""A study's results in SQLite: one row per cell, keyed by the spec's hash and the cell.

Rows are written (and committed) as each cell finishes, in WAL mode, so a crash of the driver
loses at most the cells in flight. Only the driver writes. A database holds one spec: opening it
with another spec's hash is refused unless the caller asks for a new database.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sqlite3
import time
from pathlib import Path

from .spec import StudyError

__all__ = ["Store", "versions", "machine", "COLUMNS"]

SCHEMA_VERSION = "1"
# typed columns pulled out of each cell's result for queries and tables; the rest is in ``result``
RESULT_COLUMNS = ("nodes", "classes", "tree_cost", "dag_cost", "seconds", "optimal", "gap",
                  "cost_before", "cost_after", "speedup")
COLUMNS = ("spec_hash", "cell", "kind", "status", "input", "model", "extractor", "cost", "rules",
           "node_limit", "time_limit", *RESULT_COLUMNS, "error", "params", "result", "started",
           "finished", "attempts", "worker", "machine", "versions")


@functools.cache
def versions() -> dict:
    """relaygraph's version and its dependencies' (those installed)."""
    from importlib import metadata

    import relaygraph

    out = {"relaygraph": relaygraph.__version__, "python": platform.python_version()}
    for dist in ("numpy", "scipy", "highspy", "egglog", "dask", "distributed"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


@functools.cache
def machine() -> str:
    """The machine that ran a cell: host, CPU model and core count."""
    from ..egraph.extract.bench import machine_description

    return f"{platform.node()}: {machine_description()}"


def _VERSIONS() -> str:  # noqa: N802 - one JSON text for every row this process writes
    return json.dumps(versions())


class Store:
    """One study database (``path``) opened for the spec hashed ``spec_hash``."""

    def __init__(self, path: str | os.PathLike, spec_hash: str, spec_text: str = "", new: bool = False):
        self.path = Path(path)
        self.spec_hash = spec_hash
        if new and self.path.exists():
            _verify(self.path)  # --new replaces a sound study database, never some other file
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.db = _connect(self.path)
        try:
            self._prepare(spec_text)
        except BaseException:
            self.db.close()
            raise

    def _prepare(self, spec_text: str) -> None:
        db = self.db
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        cols = ", ".join(f"{c} {'INTEGER' if c == 'attempts' else ''}".strip() for c in COLUMNS)
        db.execute(f"CREATE TABLE IF NOT EXISTS cells ({cols}, PRIMARY KEY (spec_hash, cell))")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if not meta:
            db.executemany("INSERT INTO meta VALUES (?, ?)",
                           [("schema", SCHEMA_VERSION), ("spec_hash", self.spec_hash),
                            ("spec", spec_text), ("created", time.strftime("%Y-%m-%d %H:%M:%S"))])
            db.commit()
        elif meta.get("spec_hash") != self.spec_hash:
            raise StudyError(f"{self.path} holds the study of spec {meta.get('spec_hash')}, not of this "
                             f"spec {self.spec_hash}; use --new (new=True) to start it afresh, or "
                             "another database")

    def set_meta(self, key: str, value: str) -> None:
        """Record one setting of the study (the cells it has, where its spec is)."""
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
        self.db.commit()

    def rows(self) -> dict[str, dict]:
        """Every row of this spec, by cell key."""
        cur = self.db.execute("SELECT * FROM cells WHERE spec_hash = ?", (self.spec_hash,))
        names = [d[0] for d in cur.description]
        return {r[1]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}

    def status(self) -> dict[str, str]:
        """Each recorded cell's status (done or failed), by cell key."""
        return dict(self.db.execute("SELECT cell, status FROM cells WHERE spec_hash = ?",
                                    (self.spec_hash,)).fetchall())

    def write(self, cell, result: dict, started: float, finished: float, where: str) -> dict:
        """Record one finished cell (done, or failed with its error) and commit it now."""
        error = result.get("error")
        p = cell.params
        old = self.db.execute("SELECT attempts FROM cells WHERE spec_hash = ? AND cell = ?",
                              (self.spec_hash, cell.key)).fetchone()
        row = {"spec_hash": self.spec_hash, "cell": cell.key, "kind": cell.kind,
               "status": "failed" if error else "done", "input": p.get("input"), "model": p.get("model"),
               "extractor": p.get("extractor"), "cost": p.get("cost"), "rules": p.get("rules"),
               "node_limit": p.get("node_limit"), "time_limit": p.get("time_limit"),
               **{c: _scalar(result.get(c)) for c in RESULT_COLUMNS},
               "error": error, "params": json.dumps(p, sort_keys=True),
               "result": json.dumps(result, default=str), "started": started, "finished": finished,
               "attempts": (old[0] if old else 0) + 1, "worker": result.get("worker") or where,
               "machine": result.get("machine") or machine(), "versions": _VERSIONS()}
        self.db.execute(f"INSERT OR REPLACE INTO cells ({', '.join(COLUMNS)}) VALUES "
                        f"({', '.join('?' * len(COLUMNS))})", [row[c] for c in COLUMNS])
        self.db.commit()
        return row

    def close(self) -> None:
        """Close the connection (the WAL is checkpointed into the file)."""
        self.db.close()


def _scalar(value):
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, (int, float, str)) or value is None else str(value)


def _check_sqlite(path: Path) -> None:
    """Refuse a file that is not an SQLite database, before anything writes to it."""
    if path.is_dir():
        raise StudyError(f"{path}: is a folder, not a study database")
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise StudyError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if head and head != b"SQLite format 3\x00":
        raise StudyError(f"{path}: not a study database (not an SQLite file); it is left as it is")


def _verify(path: Path) -> None:
    """Refuse a file that is not a sound SQLite database, reading it only."""
    if path.exists() and path.stat().st_size:
        _check_sqlite(path)
        try:  # read-only first: a damaged file is reported before anything writes to it
            ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
            try:
                verdict = ro.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                ro.close()
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if verdict != "ok":
            raise StudyError(f"{path}: a corrupt study database ({verdict}); it is left as it is")


def _connect(path: Path) -> sqlite3.Connection:
    _verify(path)
    try:
        db = sqlite3.connect(path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise StudyError(f"{path}: a corrupt study database ({exc}); it is left as it is") from None
    if tables and not {"meta", "cells"} <= tables:
        db.close()
        raise StudyError(f"{path}: an SQLite file, but not a study database (tables: "
                         f"{', '.join(sorted(tables))}); it is left as it is")
    return db


def open_existing(path: str | os.PathLike) -> tuple[sqlite3.Connection, dict]:
    """A study database opened to read (status, show, load): its connection and meta table."""
    path = Path(path)
    if not path.exists():
        raise StudyError(f"{path}: no such study database")
    db = _connect(path)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StudyError(f"{path}: a corrupt study database ({exc}); it is left as it is") from None
    if "spec_hash" not in meta:
        db.close()
        raise StudyError(f"{path}: not a study database (no spec recorded in it)")
    return db, meta
