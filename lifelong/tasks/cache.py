"""Tokenise each dataset once: token ids cached in memory for the run and on disk across runs.

Without a cache a run tokenises every training mini-batch as it arrives and every test set at
every evaluation (T + 1 times). `TokenCache.prepare` encodes a split (a task's train, test or
examples) once with the task kind's ``encode`` and keeps the records; a run's prepared kind
(`lifelong.tasks.prepared.PreparedKind`) then serves every batch of those examples from them.
On disk a split's records live in one ``.npz`` file named by a SHA-256 over

* the task kind and the settings that shape its records (max length, QA windows, segment ids),
* the tokenizer (its class, name or path, a hash of its vocabulary, its lower-casing), and
* every field of every example of the split, in order (text, pair, label, answers, candidates,
  uid) — a hash of the data as read, so editing the source file (or sampling other rows of it)
  names another file and the stale one is never read.

Files are written atomically, so runs sharing a cache (every strategy, seed and sweep point on
the same data) never read half a file; any run may write a missing one. A file that cannot be
read back (corrupt, truncated, another format) is tokenised again and rewritten, with a warning;
a cache directory that cannot be written (read-only, a file in the way) leaves the run's token ids
in memory, with a warning: neither stops a run.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lifelong.files import atomic_write_bytes
from lifelong.memory.records import INT, ExampleRecords

if TYPE_CHECKING:
    from lifelong.streams.core import Example, TaskStream
    from lifelong.tasks import TaskKind

log = logging.getLogger(__name__)

FORMAT = "lifelong.token_cache.v1"


def default_cache_dir() -> Path:
    """``$LIFELONG_CACHE_DIR``, else ``$XDG_CACHE_HOME/lifelong``, else ``~/.cache/lifelong``."""
    if root := os.environ.get("LIFELONG_CACHE_DIR"):
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "lifelong"


def resolve_cache_dir(value: str) -> Path | None:
    """The directory the ``token_cache`` config key names (``auto``, ``off`` or a path)."""
    if value == "off":
        return None
    if value == "auto":
        return default_cache_dir() / "tokens"
    return Path(value).expanduser()


def split_key(examples: Sequence[Example], identity: str) -> str:
    """The SHA-256 naming a split's cache file: the kind's identity and every example's fields."""
    digest = hashlib.sha256(f"{FORMAT}\n{identity}\n{len(examples)}\n".encode())
    for e in examples:
        fields = (e.text, e.text_pair, e.label, e.uid, e.answers, e.candidates)
        digest.update(repr(fields).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def kind_identity(kind: TaskKind, tokenizer: Any, settings: Any) -> str:
    """What a kind's records depend on besides the examples: kind, settings and tokenizer."""
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    vocab = hashlib.sha256(repr(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()
    lower = getattr(tokenizer, "do_lower_case", None)
    return f"{kind.name}|{settings!r}|{type(tokenizer).__name__}|{name}|{vocab}|{lower}"


def records_to_bytes(records: ExampleRecords) -> bytes:
    """The records as an ``.npz`` archive: per field its flat values and per-example lengths."""
    arrays: dict[str, np.ndarray] = {}
    for name in records.names:
        rows = records[name]
        arrays[f"lengths.{name}"] = np.array([len(r) for r in rows], dtype=np.int64)
        arrays[f"values.{name}"] = (
            np.concatenate(rows).astype(INT) if rows else np.zeros(0, dtype=INT)
        )
    arrays["format"] = np.array(FORMAT)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def records_from_bytes(data: bytes, where: str) -> ExampleRecords:
    """Inverse of `records_to_bytes` (a `ValueError` naming ``where`` if it is not one)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as err:
        raise ValueError(f"{where}: unreadable token cache file ({err})") from None
    if str(arrays.get("format", "")) != FORMAT:
        raise ValueError(f"{where}: not a {FORMAT} file")
    fields = {}
    for key in arrays:
        if key.startswith("lengths."):
            name = key.removeprefix("lengths.")
            lengths, values = arrays[key], arrays[f"values.{name}"]
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            fields[name] = tuple(values[a:b] for a, b in zip(bounds[:-1], bounds[1:]))
    return ExampleRecords(fields)


class TokenCache:
    """Every prepared example's record, by example, read from disk or tokenised once.

    Args:
        kind: The task kind whose ``encode`` makes the records.
        identity: `kind_identity` of the kind (names the files with the examples' hash).
        directory: Where the files go; ``None`` keeps the records in memory only.

    """

    def __init__(self, kind: TaskKind, identity: str, directory: Path | None) -> None:
        self.kind = kind
        self.identity = identity
        self.directory = directory
        self._records: dict[int, dict[str, np.ndarray]] = {}  # id(example) -> its fields
        self._held: list[Sequence[Example]] = []  # keeps the examples (and their ids) alive
        self.hits = 0  # splits read from disk
        self.misses = 0  # splits tokenised

    def prepare(self, examples: Sequence[Example]) -> None:
        """Encode a split once (or read it from disk) and index its records by example."""
        if not examples or id(examples[0]) in self._records:
            return
        records = self._load_or_encode(examples)
        names = records.names
        for i, example in enumerate(examples):
            self._records[id(example)] = {name: records[name][i] for name in names}
        self._held.append(examples)

    def prepare_stream(self, stream: TaskStream) -> None:
        """`prepare` the training and test split of every task (what a run reads)."""
        for task in stream:
            for split in (task.train, task.test):
                self.prepare(split)
        log.info(
            "token cache: %d splits read from %s, %d tokenised",
            self.hits,
            self.directory or "memory",
            self.misses,
        )

    def lookup(self, examples: Sequence[Example]) -> ExampleRecords | None:
        """The prepared records of ``examples``, or ``None`` if any was never prepared."""
        found = [self._records.get(id(e)) for e in examples]
        if not found or any(f is None for f in found):
            return None
        names = tuple(found[0])  # type: ignore[arg-type]
        return ExampleRecords({n: tuple(f[n] for f in found) for n in names})  # type: ignore[index]

    def _load_or_encode(self, examples: Sequence[Example]) -> ExampleRecords:
        path = None
        if self.directory is not None:
            path = self.directory / f"{split_key(examples, self.identity)}.npz"
            if (records := self._read(path, len(examples))) is not None:
                self.hits += 1
                return records
        records = self.kind.encode(examples)
        self.misses += 1
        if path is not None:
            self._write(path, records)
        return records

    def _read(self, path: Path, n: int) -> ExampleRecords | None:
        """A cached split's records, or None: missing, or unreadable (then rebuilt, warned)."""
        if not path.is_file():
            return None
        try:
            records = records_from_bytes(path.read_bytes(), str(path))
        except (OSError, ValueError) as err:
            log.warning("token cache: %s; tokenising the split again and rewriting the file", err)
            return None
        if len(records) != n:
            log.warning(
                "token cache: %s holds %d records, not %d; rebuilding it", path, len(records), n
            )
            return None
        return records

    def _write(self, path: Path, records: ExampleRecords) -> None:
        """Write a split's records; where the cache cannot be written, keep them in memory."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, records_to_bytes(records))
        except OSError as err:
            log.warning(
                "token cache: cannot write %s (%s); this run keeps its token ids in memory "
                "(set token_cache to a writable directory, or off)",
                self.directory,
                err.strerror or err,
            )
            self.directory = None
