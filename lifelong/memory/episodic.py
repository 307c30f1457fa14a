"""`EpisodicMemory`: a key-value store over a FAISS index, shared by every replay strategy.

Keys are vectors from a frozen key network; values are examples stored compactly as token-id rows
and label arrays (never pickled Python objects). Reads are uniform sampling (replay) and k-nearest
neighbours under L2 distance (local adaptation).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from lifelong.memory.policies import WriteAll, WritePolicy, policy_from_state
from lifelong.utils import atomic_write_bytes

FORMAT = "lifelong.episodic_memory"
VERSION = 1

KeySource = np.ndarray | Callable[[np.ndarray], np.ndarray]
"""Keys for the incoming examples: an array (n, d), or a function from chosen indices to keys,
so that keys are computed only for the examples a policy actually writes."""


class MemoryFileError(ValueError):
    """A saved memory is truncated, corrupt, or does not match what was expected."""


@dataclass
class MemoryItems:
    """Values read from memory.

    Attributes:
        slots: The memory slots read, shape (n,).
        tokens: Token-id rows (int32), one per slot, unpadded.
        labels: Labels, shape (n, *label_shape).

    """

    slots: np.ndarray
    tokens: list[np.ndarray]
    labels: np.ndarray


class EpisodicMemory:
    """A growable key-value episodic memory with a FAISS index over its keys.

    Args:
        key_dim: Width of the keys.
        policy: Which examples to write (default: all).
        index: A FAISS ``index_factory`` string; ``"Flat"`` is exact L2 (the default),
            ``"HNSW32"`` an approximate graph index for large memories.
        seed: Seed of the memory's own generator (sampling and write decisions).

    """

    def __init__(
        self,
        key_dim: int,
        *,
        policy: WritePolicy | None = None,
        index: str = "Flat",
        seed: int = 0,
    ) -> None:
        if key_dim < 1:
            raise ValueError(f"key_dim must be >= 1, got {key_dim}")
        self.key_dim = key_dim
        self.policy: WritePolicy = policy if policy is not None else WriteAll()
        self.index_spec = index
        self.rng = np.random.default_rng(seed)
        self._size = 0
        self._keys = np.zeros((0, key_dim), dtype=np.float32)
        self._tokens = np.zeros((0, 0), dtype=np.int32)  # (capacity, longest row), right-padded
        self._lengths = np.zeros(0, dtype=np.int32)
        self._labels: np.ndarray | None = None
        self._index: faiss.Index | None = None
        self._indexed = 0  # keys [0, _indexed) are in the index and unchanged since

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> np.ndarray:
        """The stored keys, shape (size, key_dim) (a read-only view)."""
        view = self._keys[: self._size]
        view.flags.writeable = False
        return view

    # -- writing ---------------------------------------------------------------------------
    def write(
        self, tokens: Sequence[np.ndarray], labels: np.ndarray, keys: KeySource
    ) -> np.ndarray:
        """Offer examples to memory; the write policy decides which are stored.

        Args:
            tokens: Unpadded token-id rows, one per example.
            labels: Labels, shape (n,) or (n, *label_shape).
            keys: Keys (n, key_dim), or a function from chosen indices to their keys.

        Returns:
            The slots written, shape (m,).

        """
        labels = np.asarray(labels, dtype=np.int64)
        if len(tokens) != len(labels):
            raise ValueError(f"write got {len(tokens)} token rows but {len(labels)} labels")
        if getattr(self.policy, "needs_keys", False):  # e.g. diversity: decides by the keys
            keys = np.asarray(keys(np.arange(len(labels))) if callable(keys) else keys)
            nearest = self.nearest(keys, 1)[0][:, 0] if self._size else np.full(len(labels), np.inf)
            plan = self.policy.plan_keyed(keys, nearest, self._size, self.rng)
        else:
            plan = self.policy.plan(len(labels), self._size, self.rng)
        if len(plan.indices) == 0:
            return plan.slots
        chosen_keys = keys(plan.indices) if callable(keys) else np.asarray(keys)[plan.indices]
        chosen_keys = np.ascontiguousarray(chosen_keys, dtype=np.float32)
        if chosen_keys.shape != (len(plan.indices), self.key_dim):
            raise ValueError(
                f"keys must have shape ({len(plan.indices)}, {self.key_dim}), "
                f"got {chosen_keys.shape}"
            )
        self._store(
            plan.slots, [tokens[i] for i in plan.indices], labels[plan.indices], chosen_keys
        )
        return plan.slots

    def _store(
        self, slots: np.ndarray, rows: list[np.ndarray], labels: np.ndarray, keys: np.ndarray
    ) -> None:
        new_size = max(self._size, int(slots.max()) + 1)
        if new_size - self._size != int((slots >= self._size).sum()):
            raise ValueError("a write plan must append contiguously after the stored examples")
        self._reserve(new_size, max(len(r) for r in rows), labels.shape[1:])
        for slot, row in zip(slots, rows):
            self._tokens[slot, : len(row)] = row
            self._tokens[slot, len(row) :] = 0
            self._lengths[slot] = len(row)
        self._labels[slots] = labels
        self._keys[slots] = keys
        overwritten = slots[slots < self._size]
        if len(overwritten):
            self._indexed = min(self._indexed, int(overwritten.min()))
        self._size = new_size

    def _reserve(self, size: int, width: int, label_shape: tuple[int, ...]) -> None:
        if self._labels is None:
            self._labels = np.zeros((0, *label_shape), dtype=np.int64)
        elif self._labels.shape[1:] != label_shape:
            raise ValueError(
                f"labels of shape {label_shape} do not match stored labels {self._labels.shape[1:]}"
            )
        capacity = len(self._lengths)
        if size > capacity or width > self._tokens.shape[1]:
            new_cap = max(size, 2 * capacity if size > capacity else capacity, 16)
            new_width = max(width, self._tokens.shape[1])
            self._tokens = _grow(self._tokens, (new_cap, new_width))
            self._lengths = _grow(self._lengths, (new_cap,))
            self._labels = _grow(self._labels, (new_cap, *label_shape))
            self._keys = _grow(self._keys, (new_cap, self.key_dim))

    # -- reading ---------------------------------------------------------------------------
    def get(self, slots: np.ndarray) -> MemoryItems:
        """Read the values in ``slots``."""
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= self._size):
            raise IndexError(
                f"slots must be in [0, {self._size}), got {slots.min()}..{slots.max()}"
            )
        tokens = [self._tokens[s, : self._lengths[s]].copy() for s in slots]
        labels = self._labels[slots] if self._labels is not None else np.zeros(0, np.int64)
        return MemoryItems(slots, tokens, labels.copy())

    def sample(self, n: int) -> MemoryItems:
        """Draw ``min(n, size)`` distinct stored examples uniformly at random."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty memory")
        slots = np.sort(self.rng.choice(self._size, size=min(n, self._size), replace=False))
        return self.get(slots)

    def nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Find the ``k`` nearest stored keys of each query under L2 distance.

        Args:
            queries: Query vectors, shape (q, key_dim).
            k: Neighbours per query (capped at the memory size).

        Returns:
            ``(distances, slots)``, both of shape (q, min(k, size)); squared L2 distances,
            nearest first.

        """
        if self._size == 0:
            raise ValueError("cannot search an empty memory")
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.key_dim:
            raise ValueError(f"queries must have shape (q, {self.key_dim}), got {queries.shape}")
        index = self._synced_index()
        k = min(k, self._size)
        if hasattr(index, "hnsw"):  # graph search: explore enough candidates for k results
            index.hnsw.efSearch = max(index.hnsw.efSearch, 4 * k)
        distances, slots = index.search(queries, k)
        return distances, slots.astype(np.int64)

    def _synced_index(self) -> faiss.Index:
        if self._index is None or self._indexed < self._index.ntotal:
            self._index = faiss.index_factory(self.key_dim, self.index_spec, faiss.METRIC_L2)
            self._indexed = 0
            if not self._index.is_trained:
                self._index.train(self._keys[: self._size])
        if self._indexed < self._size:
            self._index.add(self._keys[self._indexed : self._size])
            self._indexed = self._size
        return self._index

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the memory to ``path`` atomically (a versioned ``.npz`` archive)."""
        atomic_write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The memory as the bytes `save` writes (for checkpoints holding several objects)."""
        n = self._size
        lengths = self._lengths[:n]
        flat = np.concatenate([self._tokens[i, : lengths[i]] for i in range(n)]) if n else []
        header = {
            "format": FORMAT,
            "version": VERSION,
            "key_dim": self.key_dim,
            "size": n,
            "index": self.index_spec,
            "policy": self.policy.state(),
            "rng": self.rng.bit_generator.state,
        }
        buf = io.BytesIO()
        np.savez(
            buf,
            header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            keys=self._keys[:n],
            tokens=np.asarray(flat, dtype=np.int32),
            lengths=lengths,
            labels=self._labels[:n] if self._labels is not None else np.zeros(0, np.int64),
        )
        return buf.getvalue()

    @classmethod
    def load(cls, path: str | Path, *, key_dim: int | None = None) -> EpisodicMemory:
        """Read a memory written by `save`.

        Args:
            path: The file.
            key_dim: If given, the key width the caller expects.

        Raises:
            MemoryFileError: The file is missing, truncated or corrupt, has another format or
                version, disagrees with itself, or has keys of another width than ``key_dim``.

        """
        path = Path(path)
        if not path.is_file():
            raise MemoryFileError(f"{path}: no such memory file")
        return cls.from_bytes(path.read_bytes(), key_dim=key_dim, where=str(path))

    @classmethod
    def from_bytes(
        cls, data: bytes, *, key_dim: int | None = None, where: str = "memory"
    ) -> EpisodicMemory:
        """Read a memory from the bytes `to_bytes` returned (errors name ``where``)."""
        path = where
        arrays, header = _read_archive(data, where)
        if key_dim is not None and header["key_dim"] != key_dim:
            raise MemoryFileError(
                f"{path}: memory has keys of width {header['key_dim']}, expected {key_dim}"
            )
        n, lengths = header["size"], arrays["lengths"]
        if not (len(arrays["keys"]) == len(lengths) == len(arrays["labels"]) == n) or int(
            lengths.sum()
        ) != len(arrays["tokens"]):
            raise MemoryFileError(f"{path}: arrays disagree with the header's size {n}")
        memory = cls(
            header["key_dim"], policy=policy_from_state(header["policy"]), index=header["index"]
        )
        memory.rng.bit_generator.state = header["rng"]
        if n:
            rows = np.split(arrays["tokens"], np.cumsum(lengths)[:-1])
            memory._store(np.arange(n), rows, arrays["labels"], arrays["keys"])
        return memory

    def state(self) -> dict[str, Any]:
        """A short description for logs: size, key width, policy."""
        return {"size": self._size, "key_dim": self.key_dim, "policy": self.policy.state()}


def _grow(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    grown = np.zeros(shape, dtype=array.dtype)
    grown[tuple(slice(0, s) for s in array.shape)] = array
    return grown


def _read_archive(data: bytes, path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as err:
        raise MemoryFileError(f"{path}: truncated or corrupt memory file ({err})") from None
    missing = {"header", "keys", "tokens", "lengths", "labels"} - set(arrays)
    if missing:
        raise MemoryFileError(f"{path}: not a lifelong memory file (missing {sorted(missing)})")
    try:
        header = json.loads(arrays["header"].tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MemoryFileError(f"{path}: unreadable header ({err})") from None
    if header.get("format") != FORMAT:
        raise MemoryFileError(f"{path}: format {header.get('format')!r}, expected {FORMAT!r}")
    if header.get("version") != VERSION:
        raise MemoryFileError(
            f"{path}: memory format version {header.get('version')}, this lifelong reads {VERSION}"
        )
    return arrays, header
