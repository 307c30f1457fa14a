"""Write policies: which incoming examples episodic memory keeps, and in which slot.

A policy turns ``n`` incoming examples into a *plan*: the indices of the examples to store and
the slot each goes to (``slot == size`` appends, ``slot < size`` overwrites). Policies are
deterministic given the memory's random generator, and their counters are saved with the memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


@dataclass
class WritePlan:
    """Which incoming examples to store where.

    Attributes:
        indices: Positions in the incoming batch, shape (m,).
        slots: Memory slot of each, shape (m,); slots >= the current size are appends, in order.

    """

    indices: np.ndarray
    slots: np.ndarray


class WritePolicy(Protocol):
    """Decides which examples to write."""

    name: str

    def plan(self, n: int, size: int, rng: np.random.Generator) -> WritePlan:
        """Plan the write of ``n`` examples into a memory holding ``size``."""
        ...

    def state(self) -> dict[str, Any]:
        """Counters and settings, JSON-serialisable."""
        ...

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what `state` returned."""
        ...


def _append(indices: np.ndarray, size: int) -> WritePlan:
    return WritePlan(indices.astype(np.int64), size + np.arange(len(indices), dtype=np.int64))


@dataclass
class WriteAll:
    """Store every example (MbPA++'s default: p_write = 1)."""

    name: str = "all"

    def plan(self, n: int, size: int, rng: np.random.Generator) -> WritePlan:
        """Append all ``n`` examples."""
        return _append(np.arange(n), size)

    def state(self) -> dict[str, Any]:
        """Return the policy's settings."""
        return {"name": self.name}

    def load_state(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


@dataclass
class RandomWrite:
    """Store each example independently with probability ``p`` (MbPA++'s 50% / 10% memories)."""

    p: float
    name: str = "random"

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"random write probability must be in [0, 1], got {self.p}")

    def plan(self, n: int, size: int, rng: np.random.Generator) -> WritePlan:
        """Append the examples whose coin flip came up."""
        return _append(np.flatnonzero(rng.random(n) < self.p), size)

    def state(self) -> dict[str, Any]:
        """Return the policy's settings."""
        return {"name": self.name, "p": self.p}

    def load_state(self, state: dict[str, Any]) -> None:
        """Nothing to restore beyond the settings."""


@dataclass
class ReservoirWrite:
    """Reservoir sampling: a uniform sample of everything seen, at most ``capacity`` examples."""

    capacity: int
    seen: int = 0
    name: str = "reservoir"

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"reservoir capacity must be >= 1, got {self.capacity}")

    def plan(self, n: int, size: int, rng: np.random.Generator) -> WritePlan:
        """Append while there is room, then replace a random slot with probability cap/seen."""
        chosen: dict[int, int] = {}  # slot -> incoming index; a later example wins a slot
        appended = 0
        for i in range(n):
            self.seen += 1
            if size + appended < self.capacity:
                chosen[size + appended] = i
                appended += 1
                continue
            j = int(rng.integers(self.seen))
            if j < self.capacity:
                chosen[j] = i
        slots = np.array(sorted(chosen), dtype=np.int64)
        indices = np.array([chosen[s] for s in slots], dtype=np.int64)
        return WritePlan(indices, slots)

    def state(self) -> dict[str, Any]:
        """Return the capacity and the number of examples seen."""
        return {"name": self.name, "capacity": self.capacity, "seen": self.seen}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the count of examples seen."""
        self.seen = int(state["seen"])


def make_policy(name: str, **options: Any) -> WritePolicy:
    """Build a policy by name: ``all``, ``random`` (``p=``) or ``reservoir`` (``capacity=``).

    Raises:
        ValueError: Unknown name, or options the policy does not take.

    """
    factories: dict[str, Any] = {
        "all": WriteAll,
        "random": RandomWrite,
        "reservoir": ReservoirWrite,
    }
    if name not in factories:
        raise ValueError(f"unknown write policy {name!r}; expected one of {sorted(factories)}")
    try:
        return factories[name](**options)
    except TypeError as err:
        raise ValueError(f"write policy {name!r}: bad options {options}: {err}") from None


def policy_from_state(state: dict[str, Any]) -> WritePolicy:
    """Rebuild a policy from what its `state` returned."""
    options = {k: v for k, v in state.items() if k not in ("name", "seen")}
    policy = make_policy(state["name"], **options)
    policy.load_state(state)
    return policy
