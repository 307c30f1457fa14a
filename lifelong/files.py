"""Atomic file writes: the one writer every file `lifelong` produces goes through.

Light on purpose (standard library only), so that the sample generators in ``tools/``, the
run store and the reports share it without importing torch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one.

    The bytes go to a temporary file in the same directory, are flushed and fsynced, and the
    temporary file is renamed over ``path`` (an atomic operation on POSIX file systems).

    Args:
        path: The file to write; its directory is created if missing.
        data: The whole new content.
        mode: Permission bits of the new file (default: those of a file created with the
            process's umask, as ``open(path, "w")`` would give; the temporary file itself is
            private).

    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str, *, mode: int | None = None) -> None:
    """Write UTF-8 text atomically (see `atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
