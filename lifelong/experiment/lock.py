"""One writer per run directory: an OS file lock held while a run writes its directory.

`hold` takes an exclusive ``flock`` on ``RUN/.lock`` (and writes the holder's pid and host into
it) before a run, a resume or a sweep point touches the directory, and releases it when the run
ends. The kernel releases the lock when the process dies, however it dies, so a run killed with
``kill -9`` is resumed as before; a live holder — a run still training, or paused with SIGSTOP —
refuses a second writer with `RunLockedError`, naming the holder's pid. The lock file is removed
when the holder lets go normally; one left behind by a kill is stale and is simply taken over.

Holds are re-entrant within a process (a sweep point holds its directory, then `run` or `resume`
holds it again). ``flock`` works on local file systems; on NFS it may not exclude (as with the
run index, keep runs on local disk). Where ``fcntl`` does not exist (Windows) nothing is locked.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"

_HELD: dict[Path, int] = {}  # run directory -> nesting depth of this process's hold


class RunLockedError(RuntimeError):
    """Another live process holds the run directory.

    Attributes:
        run_dir: The directory.
        holder: What the holder wrote into the lock file (``"<pid> on <host>"``), if readable.

    """

    def __init__(self, run_dir: Path, holder: str) -> None:
        self.run_dir = run_dir
        self.holder = holder
        super().__init__(
            f"{run_dir}: in use by process {holder} (a run is writing it, possibly paused); "
            "wait for it to end, or stop that process, then `lifelong run --resume` continues"
        )


@contextmanager
def hold(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir`` (created if missing) for the block; refuse if another process does.

    Raises:
        RunLockedError: Another live process holds it (the message names its pid).

    """
    key = Path(run_dir).resolve()
    if key in _HELD or fcntl is None:
        _HELD[key] = _HELD.get(key, 0) + 1
        try:
            yield
        finally:
            _release_nested(key)
        return
    key.mkdir(parents=True, exist_ok=True)
    fd = _acquire(key / LOCK_NAME, key)
    _HELD[key] = 1
    try:
        yield
    finally:
        del _HELD[key]
        (key / LOCK_NAME).unlink(missing_ok=True)  # still holding it: no one else can have it
        os.close(fd)  # releases the lock


def holder(run_dir: str | Path) -> str | None:
    """Who holds ``run_dir`` now (``"<pid> on <host>"``), or None if no live process does."""
    path = Path(run_dir) / LOCK_NAME
    if fcntl is None or not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(path)
    finally:
        os.close(fd)
    return None


def _acquire(path: Path, run_dir: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive lock (the file as it is now)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLockedError(run_dir, _read_holder(path)) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:  # not a file the previous holder unlinked while we opened it
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode())
            return fd
        os.close(fd)


def _read_holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or "?"
    except OSError:
        return "?"


def _release_nested(key: Path) -> None:
    _HELD[key] -= 1
    if _HELD[key] == 0:
        del _HELD[key]
