"""`EpisodicMemory`: a key-value store over a FAISS index, shared by every replay strategy.

Keys are vectors from a frozen key network, one per example; values are whole examples stored
compactly as named int32 fields (`ExampleRecords`: token ids, labels, candidates, answer spans;
never pickled Python objects). Every count the strategies use (size, write rate, samples,
neighbours) is a count of examples. Reads are uniform sampling (replay) and k-nearest neighbours
under L2 distance (local adaptation). A memory that is only ever sampled (REPLAY, A-GEM, the
meta-learners) holds no keys (``key_dim=0``): Holla et al.'s ``cls_replay.py`` stores examples
without encoding them, and encoding every stream example with a second BERT would cost a
third of a replay run's training time for keys nobody reads.
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lifelong.files import atomic_write_bytes
from lifelong.memory import search
from lifelong.memory.policies import WriteAll, WritePolicy, fresh_policy, policy_from_state
from lifelong.memory.records import ExampleRecords, RaggedStore
from lifelong.memory.search import (
    AUTO,
    TORCH,
    Backend,
    IndexChoice,
    TorchFlatIndex,
    TorchIVFIndex,
    build_index,
    check_index,
    choose_backend,
    choose_index,
)

if TYPE_CHECKING:
    import faiss

    Index = faiss.Index | TorchFlatIndex | TorchIVFIndex

log = logging.getLogger(__name__)

FORMAT = "lifelong.episodic_memory"
VERSION = 2

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
        examples: The stored examples, one per slot.

    """

    slots: np.ndarray
    examples: ExampleRecords

    def __len__(self) -> int:
        return len(self.slots)


class EpisodicMemory:
    """A growable key-value episodic memory of whole examples with a FAISS index over its keys.

    Args:
        key_dim: Width of the keys; 0 for a memory that stores no keys and is only sampled
            (`write` then takes ``keys=None`` and `nearest` raises).
        policy: Which examples to write (default: all).
        index: ``"auto"`` (the default): chosen by size as the memory grows, and chosen
            again each time it has doubled (`lifelong.memory.search.choose_index`: exact
            search while small; when large, an IVF index checked on stored keys it was not
            trained on to find at least 95% of the exact 32 nearest neighbours, a tie counted
            as found
            (`lifelong.memory.search.sampled_recall`), else exact search);
            ``"torch"``: exact search in torch on ``device`` (`TorchFlatIndex`); or a FAISS
            ``index_factory`` string, used as given: ``"Flat"`` is exact L2, ``"HNSW32"`` or
            ``"IVF1024,Flat"`` approximate (FAISS's default ``nprobe`` of 1; with
            ``backend="torch"``, ``"IVF<n>,Flat"`` is `TorchIVFIndex`).
        seed: Seed of the memory's own generator (sampling and write decisions).
        device: The run's device: searches run there when it is a GPU (FAISS's GPU build
            when installed, else an exact torch search on the device; `lifelong.memory.search`).
        backend: ``auto`` (see `lifelong.memory.search.choose_backend`), ``faiss`` or
            ``torch`` (exact search on ``device``; also used wherever FAISS is missing).

    Raises:
        ValueError: A bad ``key_dim``, a policy that needs keys without them, or an ``index``
            that is none of the above (or needs FAISS where it is not installed).

    """

    def __init__(
        self,
        key_dim: int,
        *,
        policy: WritePolicy | None = None,
        index: str = AUTO,
        seed: int = 0,
        device: torch.device | str = "cpu",
        backend: Backend = "auto",
    ) -> None:
        if key_dim < 0:
            raise ValueError(f"key_dim must be >= 0 (0: a memory without keys), got {key_dim}")
        if key_dim == 0 and getattr(policy, "needs_keys", False):
            raise ValueError(f"{type(policy).__name__} decides by the keys: key_dim must be >= 1")
        check_index(index, key_dim or None)
        if index == TORCH:
            backend = TORCH
        self.device = torch.device(device)
        self.requested_backend: Backend = backend
        self.backend = choose_backend(
            self.device, "Flat" if index in (AUTO, TORCH) else index, backend
        )
        self.key_dim = key_dim
        self.policy: WritePolicy = policy if policy is not None else WriteAll()
        self.index_spec = index
        self.rng = np.random.default_rng(seed)
        self._size = 0
        self._keys = np.zeros((0, key_dim), dtype=np.float32)
        self._fields: dict[str, RaggedStore] = {}
        self._index: Index | None = None
        self._indexed = 0  # keys [0, _indexed) are in the index and unchanged since
        self._choice: IndexChoice | None = None  # what serves the search (None: none built)
        self._chosen_at = 0  # the size it was chosen for

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> np.ndarray:
        """The stored keys, shape (size, key_dim) (a read-only view)."""
        view = self._keys[: self._size]
        view.flags.writeable = False
        return view

    @property
    def field_names(self) -> tuple[str, ...]:
        """The fields of the stored examples (empty until the first write)."""
        return tuple(self._fields)

    # -- writing ---------------------------------------------------------------------------
    @property
    def keyed(self) -> bool:
        """Whether the memory stores keys (and can be searched)."""
        return self.key_dim > 0

    def write(self, examples: ExampleRecords, keys: KeySource | None = None) -> np.ndarray:
        """Offer examples to memory; the write policy decides which are stored.

        Args:
            examples: The incoming examples, compactly (one record each).
            keys: Keys (n, key_dim), or a function from chosen indices to their keys; ``None``
                for a memory without keys.

        Returns:
            The slots written, shape (m,).

        """
        n = len(examples)
        if self._fields and examples.names != self.field_names and n:
            raise ValueError(
                f"examples with fields {examples.names} cannot join a memory of {self.field_names}"
            )
        if getattr(self.policy, "needs_keys", False):  # e.g. diversity: decides by the keys
            keys = np.asarray(keys(np.arange(n)) if callable(keys) else keys)
            nearest = self.nearest(keys, 1)[0][:, 0] if self._size else np.full(n, np.inf)
            plan = self.policy.plan_keyed(keys, nearest, self._size, self.rng)
        else:
            plan = self.policy.plan(n, self._size, self.rng)
        if len(plan.indices) == 0:
            return plan.slots
        if keys is None:
            if self.keyed:
                raise ValueError(f"a memory with keys of width {self.key_dim} needs keys to write")
            keys = np.zeros((n, 0), np.float32)
        chosen_keys = keys(plan.indices) if callable(keys) else np.asarray(keys)[plan.indices]
        chosen_keys = np.ascontiguousarray(chosen_keys, dtype=np.float32)
        if chosen_keys.shape != (len(plan.indices), self.key_dim):
            raise ValueError(
                f"keys must have shape ({len(plan.indices)}, {self.key_dim}), "
                f"got {chosen_keys.shape}"
            )
        everything = len(plan.indices) == n and bool((plan.indices == np.arange(n)).all())
        self._store(plan.slots, examples if everything else examples.select(plan.indices),
                    chosen_keys)  # fmt: skip
        return plan.slots

    def _store(self, slots: np.ndarray, examples: ExampleRecords, keys: np.ndarray) -> None:
        new_size = max(self._size, int(slots.max()) + 1)
        if new_size - self._size != int((slots >= self._size).sum()):
            raise ValueError("a write plan must append contiguously after the stored examples")
        if not self._fields:
            self._fields = {name: RaggedStore() for name in examples.names}
        for name, store in self._fields.items():
            store.put(slots, examples[name])
        if new_size > len(self._keys):
            grown = np.zeros((max(new_size, 2 * len(self._keys), 16), self.key_dim), np.float32)
            grown[: len(self._keys)] = self._keys
            self._keys = grown
        self._keys[slots] = keys
        overwritten = slots[slots < self._size]
        if len(overwritten):
            self._indexed = min(self._indexed, int(overwritten.min()))
        self._size = new_size

    def clear(self) -> None:
        """Forget every stored example; the policy's counters restart, the generator goes on."""
        self._size, self._fields, self._index, self._indexed = 0, {}, None, 0
        self._keys = np.zeros((0, self.key_dim), dtype=np.float32)
        self.policy = fresh_policy(self.policy.state())

    def held_bytes(self) -> int:
        """Bytes the memory holds: its examples' token ids (and other fields) and their keys."""
        keys = self._keys[: self._size].nbytes if self.keyed else 0
        return keys + sum(store.held_bytes() for store in self._fields.values())

    # -- reading ---------------------------------------------------------------------------
    def get(self, slots: np.ndarray) -> MemoryItems:
        """Read the values in ``slots``."""
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= self._size):
            raise IndexError(
                f"slots must be in [0, {self._size}), got {slots.min()}..{slots.max()}"
            )
        return MemoryItems(
            slots, ExampleRecords({k: store.get(slots) for k, store in self._fields.items()})
        )

    def get_array(self, name: str, slots: np.ndarray) -> np.ndarray:
        """One field of the values in ``slots`` (any shape) as an array ``slots.shape + (L,)``.

        For fields whose every record has the same length L (e.g. kNN-LM's next token, L = 1);
        vectorised, unlike `get`.

        Raises:
            KeyError: No such field.
            IndexError: A slot outside the memory.

        """
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= self._size):
            raise IndexError(
                f"slots must be in [0, {self._size}), got {slots.min()}..{slots.max()}"
            )
        if name not in self._fields:
            raise KeyError(f"no field {name!r}; the memory holds {', '.join(self._fields)}")
        return self._fields[name].get_array(slots)

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
        if not self.keyed:
            raise ValueError("this memory stores no keys (key_dim 0): it is sampled, not searched")
        if self._size == 0:
            raise ValueError("cannot search an empty memory")
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.key_dim:
            raise ValueError(f"queries must have shape (q, {self.key_dim}), got {queries.shape}")
        k = min(k, self._size)
        distances, slots = self._searching(k).search(queries, k)
        return distances, slots.astype(np.int64)

    def recall(self, queries: np.ndarray, k: int) -> tuple[float, float]:
        """Recall@k of `nearest` on ``queries`` (q, key_dim) against exact search, and its SE.

        For queries that are not stored (held-out text, test examples): how much of their
        exact ``k`` nearest the search in use finds (`lifelong.memory.search.query_recall`;
        1.0 for an exact search, up to ties broken otherwise).
        """
        if self._size == 0:
            raise ValueError("cannot search an empty memory")
        index = self._searching(min(k, self._size))  # as `nearest` searches
        return search.query_recall(index, self._keys[: self._size], queries, k)

    def _searching(self, k: int) -> Index:
        """The synced index, set up to find ``k`` neighbours."""
        index = self._synced_index()
        if hasattr(index, "hnsw"):  # graph search: explore enough candidates for k results
            index.hnsw.efSearch = max(index.hnsw.efSearch, 4 * k)
        return index

    @property
    def index_choice(self) -> IndexChoice | None:
        """What serves `nearest` now (``None`` until the first search builds an index)."""
        return self._choice

    def _synced_index(self) -> Index:
        regrown = self._size >= search.REGROW * self._chosen_at
        if self._index is None or (self.index_spec == AUTO and regrown):
            self._choose()
        if self._indexed < self._index.ntotal:  # slots overwritten: re-add, keep the training
            self._index.reset()
            self._indexed = 0
        if self._indexed < self._size:
            self._index.add(self._keys[self._indexed : self._size])
            self._indexed = self._size
        return self._index

    def _choose(self) -> None:
        """Choose the search for the current size, (re)build its index, log a change."""
        if self.index_spec == AUTO:
            choice = choose_index(self._size, self.device, self.requested_backend)
        else:
            spec = "Flat" if self.index_spec == TORCH else self.index_spec
            choice = IndexChoice(spec, self.backend)
        self._chosen_at = self._size
        if choice == self._choice and choice.exact and self._index is not None:
            return  # the same exact search: keep adding to it
        index = build_index(self.key_dim, choice.spec, self.device, choice.backend)
        if not index.is_trained:
            index, choice = self._trained(index, choice)
        self._index, self._indexed = index, index.ntotal
        if self._choice is None or choice.describe() != self._choice.describe():
            size = f"{self._size:,}"
            log.info(
                "episodic memory search: %s -> %s (size %s)",
                self.index_spec,
                choice.describe(),
                size,
            )
        self._choice = choice

    def _trained(self, index: Index, choice: IndexChoice) -> tuple[Index, IndexChoice]:
        """``index`` trained on (a sample of) the stored keys and holding them all.

        An IVF index `choose_index` proposed is checked on stored keys it was not trained on
        (`lifelong.memory.search.tune_nprobe`); where no ``nprobe`` reaches the recall target,
        an exact index stands in.
        """
        keys = self._keys[: self._size]
        rng = np.random.default_rng(self._size)  # not the memory's own: sampling is unchanged
        lists = getattr(index, "nlist", 0)  # IVF: a sample of keys per list is enough
        trained = search.train_ids(len(keys), lists, rng) if lists else np.arange(len(keys))
        index.train(keys if len(trained) == len(keys) else keys[trained])
        index.add(keys)
        if not choice.probes:
            return index, choice
        checked = search.tune_nprobe(index, keys, choice, rng, trained)
        if checked is not None:
            return index, checked
        exact = search.exact_choice(choice)
        log.info(
            "episodic memory search: %s below recall@%d %.2f at every nprobe tried (%s): %s",
            choice.spec,
            search.CHECK_K,
            search.RECALL_TARGET,
            ", ".join(map(str, choice.probes)),
            exact.describe(),
        )
        return build_index(self.key_dim, "Flat", self.device, exact.backend), exact

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the memory to ``path`` atomically (a versioned ``.npz`` archive)."""
        atomic_write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The memory as the bytes `save` writes (for checkpoints holding several objects)."""
        n = self._size
        header = {
            "format": FORMAT,
            "version": VERSION,
            "key_dim": self.key_dim,
            "size": n,
            "fields": list(self._fields),
            "index": self.index_spec,
            "policy": self.policy.state(),
            "rng": self.rng.bit_generator.state,
        }
        arrays = {}
        for name, store in self._fields.items():
            store.compact()
            arrays[f"values.{name}"] = store.flat()
            arrays[f"lengths.{name}"] = store.length[:n].astype(np.int64)
        buf = io.BytesIO()
        np.savez(
            buf,
            header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            keys=self._keys[:n],
            **arrays,
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
        n, names = header["size"], list(header.get("fields", []))
        lengths = {k: arrays.get(f"lengths.{k}") for k in names}
        values = {k: arrays.get(f"values.{k}") for k in names}
        if (
            len(arrays["keys"]) != n
            or any(v is None or lengths[k] is None for k, v in values.items())
            or any(len(lengths[k]) != n or int(lengths[k].sum()) != len(values[k]) for k in names)
        ):
            raise MemoryFileError(f"{path}: arrays disagree with the header's size {n}")
        memory = cls(
            header["key_dim"], policy=policy_from_state(header["policy"]), index=header["index"]
        )
        memory.rng.bit_generator.state = header["rng"]
        if n:
            memory._fields = {k: RaggedStore.from_flat(values[k], lengths[k]) for k in names}
            memory._keys = np.ascontiguousarray(arrays["keys"], dtype=np.float32).copy()
            memory._size = n
        return memory

    def state_dict(self) -> bytes:
        """The memory as bytes (`to_bytes`), so that a memory is a strategy component."""
        return self.to_bytes()

    def load_state_dict(self, state: bytes) -> None:
        """Restore this memory in place from what `state_dict` returned.

        The memory keeps its device and its search settings (``index``, ``backend``: the run's
        config decides them, not the checkpoint's); the index is rebuilt on the next search.
        """
        keep = ("device", "backend", "requested_backend", "index_spec")
        settings = {name: getattr(self, name) for name in keep}
        loaded = EpisodicMemory.from_bytes(state, key_dim=self.key_dim if self.keyed else None)
        if not self.keyed:  # a checkpoint of a version that keyed this memory: drop the keys
            loaded.key_dim, loaded._keys, loaded._index = 0, loaded._keys[:, :0].copy(), None
        self.__dict__.update(loaded.__dict__)
        self.__dict__.update(settings)

    def state(self) -> dict[str, Any]:
        """A short description for logs: size, key width, policy."""
        return {"size": self._size, "key_dim": self.key_dim, "policy": self.policy.state()}


def _read_archive(data: bytes, path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as err:
        raise MemoryFileError(f"{path}: truncated or corrupt memory file ({err})") from None
    missing = {"header", "keys"} - set(arrays)
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
