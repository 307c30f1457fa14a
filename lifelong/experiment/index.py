"""The run index: one SQLite row per run, with its config, status, metrics and paths.

Every run records itself here when it starts (status ``running``) and when it ends
(``finished`` or ``failed``); a run killed outright keeps ``running`` until it is resumed. The
database is an embedded SQLite file (default ``<output_dir>/index.sqlite``) in WAL mode, and
every write is one ``BEGIN IMMEDIATE`` transaction with a generous busy timeout, so several
processes (parallel sweep workers, two sweeps at once) can write it concurrently without losing
rows, and a writer killed mid-write leaves no half-written row (SQLite's journal rolls it back).
WAL needs a local file system: put the index on local disk, not on NFS.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

INDEX_NAME = "index.sqlite"
STATUSES = ("running", "finished", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_dir  TEXT PRIMARY KEY,
    name     TEXT NOT NULL,
    stream   TEXT NOT NULL,
    task_order TEXT NOT NULL,
    strategy TEXT NOT NULL,
    seed     INTEGER NOT NULL,
    status   TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed')),
    config   TEXT NOT NULL,
    metrics  TEXT,
    error    TEXT,
    host     TEXT,
    pid      INTEGER,
    created  REAL NOT NULL,
    updated  REAL NOT NULL
)
"""


class RunIndexError(RuntimeError):
    """The run index cannot be opened or holds something unexpected."""


class RunIndex:
    """An SQLite table of runs, safe for concurrent writers.

    Args:
        path: The database file (created with its parent directory if missing).
        timeout: Seconds a writer waits for another writer's lock before failing.

    """

    def __init__(self, path: str | Path, *, timeout: float = 120.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._set_up()
                return
            except sqlite3.OperationalError as err:
                if not _transient(err) or time.monotonic() >= deadline:
                    raise RunIndexError(f"{self.path}: not a usable run index: {err}") from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as err:
                raise RunIndexError(f"{self.path}: not a usable run index: {err}") from None

    def _set_up(self) -> None:
        # Switching a database to WAL takes an exclusive lock, and SQLite answers "database is
        # locked" at once (no busy handler) when several processes open a cold index together,
        # as parallel sweep workers do: switch only when not already in WAL, and the caller
        # retries that transient error until ``timeout``.
        with self._connect(translate=False) as conn:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            with _transaction(conn):
                conn.execute(_SCHEMA)

    @contextmanager
    def _connect(self, *, translate: bool = True) -> Iterator[sqlite3.Connection]:
        """A connection; SQLite's errors in the block become one `RunIndexError` line.

        A full disk, a file that is no database, a read-only file: each says the index's path
        and SQLite's reason (``translate=False`` leaves them to the caller: the set-up retries
        another process's lock).
        """
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as err:
            raise RunIndexError(f"{self.path}: cannot open the run index: {err}") from None
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            yield conn
        except sqlite3.Error as err:
            if not translate:
                raise
            raise RunIndexError(f"{self.path}: cannot use the run index: {err}") from None
        finally:
            conn.close()

    def start(self, run_dir: str | Path, config: Mapping[str, Any]) -> None:
        """Record a run as ``running`` (insert, or update a resumed run's row).

        Args:
            run_dir: The run directory (the row's key, stored as an absolute path).
            config: The resolved run config (``RunConfig.to_dict()``).

        """
        now = time.time()
        key = _key(run_dir)
        from lifelong.streams.registry import spec_from_mapping

        # a task list, or the order as its stream names it (i..iv, FewRel's clusters-<N>)
        tasks = config.get("tasks")
        order = ",".join(tasks) if tasks else spec_from_mapping(config).order_id
        with self._connect() as conn, _transaction(conn):
            conn.execute(
                "INSERT INTO runs (run_dir, name, stream, task_order, strategy, seed, status, "
                "config, host, pid, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?) "
                "ON CONFLICT(run_dir) DO UPDATE SET status = 'running', config = excluded.config, "
                "error = NULL, host = excluded.host, pid = excluded.pid, "
                "updated = excluded.updated",
                (
                    key,
                    Path(key).name,
                    str(config["stream"]),
                    order,
                    str(config["strategy"]),
                    int(config["seed"]),
                    json.dumps(dict(config), sort_keys=True),
                    socket.gethostname(),
                    os.getpid(),
                    now,
                    now,
                ),
            )

    def finish(self, run_dir: str | Path, metrics: Mapping[str, Any]) -> None:
        """Mark a run ``finished`` with its metrics."""
        self._end(run_dir, "finished", metrics=json.dumps(dict(metrics), sort_keys=True))

    def fail(self, run_dir: str | Path, error: str) -> None:
        """Mark a run ``failed`` with the error that stopped it."""
        self._end(run_dir, "failed", error=error)

    def _end(
        self,
        run_dir: str | Path,
        status: str,
        *,
        metrics: str | None = None,
        error: str | None = None,
    ) -> None:
        with self._connect() as conn, _transaction(conn):
            updated = conn.execute(
                "UPDATE runs SET status = ?, metrics = COALESCE(?, metrics), error = ?, "
                "updated = ? WHERE run_dir = ?",
                (status, metrics, error, time.time(), _key(run_dir)),
            ).rowcount
        if updated != 1:
            raise RunIndexError(f"{self.path}: no run {_key(run_dir)!r} to mark {status}")

    def get(self, run_dir: str | Path) -> dict[str, Any] | None:
        """The row of ``run_dir`` (config and metrics decoded), or None."""
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_dir = ?", (_key(run_dir),)).fetchone()
        return None if row is None else _decode(row)

    def rows(self, **where: Any) -> list[dict[str, Any]]:
        """Every row, oldest first, optionally filtered by column values (e.g. status=...)."""
        columns = {"name", "stream", "task_order", "strategy", "seed", "status"}
        unknown = set(where) - columns
        if unknown:
            raise RunIndexError(f"cannot filter runs by {sorted(unknown)}; use {sorted(columns)}")
        clause = " AND ".join(f"{c} = ?" for c in where) or "1"
        with self._connect() as conn:
            found = conn.execute(
                f"SELECT * FROM runs WHERE {clause} ORDER BY created, run_dir",  # noqa: S608
                tuple(where.values()),
            ).fetchall()
        return [_decode(r) for r in found]


def default_index_path(output_dir: str | Path) -> Path:
    """Where runs under ``output_dir`` are indexed by default."""
    return Path(output_dir) / INDEX_NAME


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front, so concurrent writers queue (busy_timeout)
    # instead of failing on a lock upgrade half-way through.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back itself (a full disk does)
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the error that brought us here is the one to report
        raise
    conn.execute("COMMIT")


def _transient(err: sqlite3.OperationalError) -> bool:
    """Whether ``err`` is another connection's lock, which passes, not a broken file."""
    text = str(err).lower()
    return "locked" in text or "busy" in text


def _key(run_dir: str | Path) -> str:
    return str(Path(run_dir).resolve())


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["config"] = json.loads(out["config"])
    out["metrics"] = json.loads(out["metrics"]) if out["metrics"] else None
    return out
