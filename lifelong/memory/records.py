"""`ExampleRecords`: whole examples stored compactly, as named integer arrays.

A record is one example in the form a task kind tokenised it: classification keeps the token
ids and the label, relation extraction the sentence's token ids, its candidate relation ids and
the gold, QA the question's and the context's token ids and the answer's token span. Each
field holds one 1-d int32 array per example (lengths differ between examples). The episodic
memory stores records, counts them and hands them back; the task kind expands them into model
rows (`lifelong.tasks`). No Python objects are pickled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

INT = np.int32


@dataclass(frozen=True)
class ExampleRecords:
    """A batch of examples as named ragged integer fields.

    Attributes:
        fields: Field name -> one 1-d int32 array per example (all fields have one array per
            example).

    """

    fields: Mapping[str, tuple[np.ndarray, ...]]

    def __post_init__(self) -> None:
        sizes = {name: len(rows) for name, rows in self.fields.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"record fields hold different numbers of examples: {sizes}")

    @classmethod
    def build(cls, **fields: Iterable[Sequence[int] | np.ndarray]) -> ExampleRecords:
        """Records from per-example integer sequences, one keyword per field.

        A field given as a 2-D array (one row per example, e.g. kNN-LM's next tokens) is
        converted once and split into row views, not converted row by row.
        """
        return cls({k: _rows(v) for k, v in fields.items()})

    def __len__(self) -> int:
        return len(next(iter(self.fields.values()))) if self.fields else 0

    @property
    def names(self) -> tuple[str, ...]:
        """The field names."""
        return tuple(self.fields)

    def held_bytes(self) -> int:
        """Bytes of every field's arrays (MTL's pool of the whole stream)."""
        return sum(row.nbytes for rows in self.fields.values() for row in rows)

    def __getitem__(self, name: str) -> tuple[np.ndarray, ...]:
        try:
            return self.fields[name]
        except KeyError:
            raise KeyError(f"records have no field {name!r} (fields: {self.names})") from None

    def select(self, indices: Sequence[int] | np.ndarray) -> ExampleRecords:
        """The examples ``indices``, in that order."""
        idx = [int(i) for i in np.asarray(indices).reshape(-1)]
        return ExampleRecords({k: tuple(v[i] for i in idx) for k, v in self.fields.items()})

    @classmethod
    def concat(cls, *parts: ExampleRecords) -> ExampleRecords:
        """The examples of every part, in order (the parts must hold the same fields).

        Raises:
            ValueError: The parts hold different fields.

        """
        names = [p.names for p in parts]
        if any(set(n) != set(names[0]) for n in names):
            raise ValueError(f"records with different fields cannot be joined: {names}")
        return cls({k: tuple(row for p in parts for row in p[k]) for k in names[0]})

    def only(self, names: Sequence[str]) -> ExampleRecords:
        """The same examples with only the fields ``names`` (what memory stores)."""
        return ExampleRecords({k: self[k] for k in names})


def _rows(values: Iterable[Sequence[int] | np.ndarray]) -> tuple[np.ndarray, ...]:
    """One 1-d int32 array per example."""
    if isinstance(values, np.ndarray) and values.ndim == 2:
        return tuple(np.ascontiguousarray(values, dtype=INT))
    return tuple(np.asarray(r, dtype=INT).reshape(-1) for r in values)


class RaggedStore:
    """Growable storage of one record field: slot -> int32 array, in one flat buffer.

    Appends go to the end of the buffer; overwriting a slot appends its new array and leaves
    the old one as garbage, compacted away once it outgrows the live data.
    """

    def __init__(self) -> None:
        self.values = np.zeros(0, dtype=INT)
        self.used = 0  # buffer positions written
        self.start = np.zeros(0, dtype=np.int64)
        self.length = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.start)

    def held_bytes(self) -> int:
        """Bytes of the live values and their slot table (not the buffer's unused room)."""
        live = int(self.length.sum()) * self.values.itemsize
        return live + self.start.nbytes + self.length.nbytes

    def put(self, slots: np.ndarray, rows: Sequence[np.ndarray]) -> None:
        """Store ``rows[i]`` in ``slots[i]`` (slots may extend the store by appending)."""
        if len(slots) == 0:
            return
        size = max(len(self.start), int(slots.max()) + 1)
        if size > len(self.start):
            self.start = _grow(self.start, size)
            self.length = _grow(self.length, size)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        total = int(lengths.sum())
        self._reserve(self.used + total)
        if total:  # one copy for all rows (a loop per row cost ~1 µs each)
            self.values[self.used : self.used + total] = np.concatenate(rows)
        starts = self.used + np.cumsum(lengths) - lengths
        repeated = len(slots) > 1 and not bool((np.diff(slots) > 0).all())  # unsorted: check
        if repeated and len(np.unique(slots)) != len(slots):  # written twice: the last row wins
            last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]
            slots, starts, lengths = slots[last], starts[last], lengths[last]
        self.start[slots], self.length[slots] = starts, lengths
        self.used += total
        if self.used > 2 * int(self.length.sum()) + 1024:
            self.compact()

    def get(self, slots: Sequence[int] | np.ndarray) -> tuple[np.ndarray, ...]:
        """Copies of the arrays in ``slots``."""
        return tuple(
            self.values[self.start[s] : self.start[s] + self.length[s]].copy() for s in slots
        )

    def get_array(self, slots: np.ndarray) -> np.ndarray:
        """The arrays in ``slots`` (any shape) stacked, where all have one length L.

        Vectorised (no loop over slots): shape ``slots.shape + (L,)``.

        Raises:
            ValueError: The slots' arrays differ in length.

        """
        slots = np.asarray(slots, dtype=np.int64)
        lengths = self.length[slots]
        width = int(lengths.flat[0]) if lengths.size else 0
        if lengths.size and not bool((lengths == width).all()):
            raise ValueError("get_array needs arrays of one length; use get for ragged ones")
        return self.values[self.start[slots][..., None] + np.arange(width)]

    def compact(self) -> None:
        """Drop overwritten arrays: the live ones in slot order, back to back."""
        flat = self.flat()
        self.values, self.used = flat, len(flat)
        self.start = np.concatenate([[0], np.cumsum(self.length)[:-1]]).astype(np.int64)

    def flat(self) -> np.ndarray:
        """Every slot's array concatenated in slot order."""
        if not len(self.start):
            return np.zeros(0, dtype=INT)
        return np.concatenate(
            [self.values[s : s + n] for s, n in zip(self.start.tolist(), self.length.tolist())]
        ).astype(INT)

    @classmethod
    def from_flat(cls, flat: np.ndarray, lengths: np.ndarray) -> RaggedStore:
        """Inverse of (`flat`, ``length``)."""
        store = cls()
        store.values = np.asarray(flat, dtype=INT).copy()
        store.used = len(store.values)
        store.length = np.asarray(lengths, dtype=np.int64).copy()
        store.start = np.concatenate([[0], np.cumsum(store.length)[:-1]]).astype(np.int64)
        return store

    def _reserve(self, n: int) -> None:
        if n > len(self.values):
            self.values = _grow(self.values, max(n, 2 * len(self.values), 1024))


def _grow(array: np.ndarray, size: int) -> np.ndarray:
    grown = np.zeros(size, dtype=array.dtype)
    grown[: len(array)] = array
    return grown
