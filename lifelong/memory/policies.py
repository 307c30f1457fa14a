"""Write policies: which incoming examples episodic memory keeps, and in which slot.

A policy turns ``n`` incoming examples into a *plan*: the indices of the examples to store and
the slot each goes to (``slot == size`` appends, ``slot < size`` overwrites). Policies are
deterministic given the memory's random generator, and their counters are saved with the memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

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


@dataclass
class DiversityWrite:
    """Meta-MbPA's diversity-based writes: examples far from everything stored are kept.

    Wang et al. (2020) score an example x by its distance to memory under the frozen key network
    g, d(x) = min_m ||g(x) − g(m)||², through exp(−d(x)/β) (β = 10), and write it with
    ``log p(x) ∝ −d(x)/β``. Read literally, that p is largest for d = 0: near-duplicates of
    stored examples would be written most, against the paper's stated aim ("select examples that
    are less similar to existing memory"). So by default (``rule="dissimilar"``) we read
    exp(−d/β) as how well memory already covers x and write with probability proportional to
    the novelty ``1 − exp(−d/β)``: a near-duplicate of a stored key (d ≈ 0) is almost never
    written, a far example almost always is. ``rule="literal"`` scores with exp(−d/β) itself,
    the formula as printed, for comparison; an empty memory (d = inf, nothing to be similar to,
    the formula undefined) scores 1 under both rules, so the first example can be written.

    The factor is set online so that about ``rate`` of the stream is kept (1% in the paper):
    p(x) = min(1, rate · score(x) / mean score so far). Within a batch, examples are decided in
    order, each against memory plus the examples of the batch chosen before it.

    Attributes:
        rate: Target fraction of the stream to keep.
        beta: β, the distance scale.
        rule: ``"dissimilar"`` (score 1 − exp(−d/β)) or ``"literal"`` (score exp(−d/β)).
        seen: Examples offered so far.
        written: Examples written so far.
        novelty_sum: Sum of the score of every example offered (for the running mean).

    """

    rate: float = 0.01
    beta: float = 10.0
    rule: Literal["dissimilar", "literal"] = "dissimilar"
    seen: int = 0
    written: int = 0
    novelty_sum: float = 0.0
    name: str = "diversity"
    needs_keys: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"diversity write rate must be in (0, 1], got {self.rate}")
        if not self.beta > 0:
            raise ValueError(f"diversity beta must be > 0, got {self.beta}")
        if self.rule not in ("dissimilar", "literal"):
            raise ValueError(f"diversity rule must be 'dissimilar' or 'literal', got {self.rule!r}")

    def plan(self, n: int, size: int, rng: np.random.Generator) -> WritePlan:
        """Not usable without keys: `EpisodicMemory.write` calls `plan_keyed` instead."""
        raise TypeError("the diversity policy needs the incoming keys; use plan_keyed")

    def novelty(self, distance: np.ndarray) -> np.ndarray:
        """1 − exp(−d/β) for squared key distances d (1 for an empty memory, d = inf)."""
        return 1.0 - np.exp(-np.asarray(distance, dtype=np.float64) / self.beta)

    def score(self, distance: np.ndarray) -> np.ndarray:
        """The write score of the rule: `novelty`, or exp(−d/β) (1 for d = inf) if literal."""
        if self.rule == "dissimilar":
            return self.novelty(distance)
        d = np.asarray(distance, dtype=np.float64)
        return np.where(np.isinf(d), 1.0, np.exp(-d / self.beta))

    def probability(self, novelty: float) -> float:
        """Write probability of an example of this score, given the running mean."""
        mean = self.novelty_sum / self.seen if self.seen else 1.0
        return float(min(1.0, self.rate * novelty / mean)) if mean > 0 else self.rate

    def plan_keyed(
        self, keys: np.ndarray, distance: np.ndarray, size: int, rng: np.random.Generator
    ) -> WritePlan:
        """Plan the write of examples with keys (n, key_dim).

        Args:
            keys: Keys of the incoming examples.
            distance: Squared distance of each to its nearest stored key (inf if memory is
                empty), shape (n,).
            size: The memory's current size.
            rng: The memory's generator.

        """
        keys = np.asarray(keys, dtype=np.float64)
        chosen: list[int] = []
        for i in range(len(keys)):
            d = float(distance[i])
            if chosen:  # also against the examples of this batch already chosen
                d = min(d, float(((keys[chosen] - keys[i]) ** 2).sum(axis=1).min()))
            novelty = float(self.score(d))
            self.seen += 1
            self.novelty_sum += novelty
            if rng.random() < self.probability(novelty):
                chosen.append(i)
        self.written += len(chosen)
        return _append(np.array(chosen, dtype=np.int64), size)

    @property
    def write_rate(self) -> float:
        """Fraction of the offered examples written so far."""
        return self.written / self.seen if self.seen else 0.0

    def state(self) -> dict[str, Any]:
        """Settings and counters."""
        return {
            "name": self.name,
            "rate": self.rate,
            "beta": self.beta,
            "rule": self.rule,
            "seen": self.seen,
            "written": self.written,
            "novelty_sum": self.novelty_sum,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the counters."""
        self.seen, self.written = int(state["seen"]), int(state["written"])
        self.novelty_sum = float(state["novelty_sum"])


def make_policy(name: str, **options: Any) -> WritePolicy:
    """Build a policy by name.

    Names: ``all``, ``random`` (``p=``), ``reservoir`` (``capacity=``), ``diversity``
    (``rate=``, ``beta=``, ``rule=``).

    Raises:
        ValueError: Unknown name, or options the policy does not take.

    """
    factories: dict[str, Any] = {
        "all": WriteAll,
        "random": RandomWrite,
        "reservoir": ReservoirWrite,
        "diversity": DiversityWrite,
    }
    if name not in factories:
        raise ValueError(f"unknown write policy {name!r}; expected one of {sorted(factories)}")
    try:
        return factories[name](**options)
    except TypeError as err:
        raise ValueError(f"write policy {name!r}: bad options {options}: {err}") from None


def fresh_policy(state: dict[str, Any]) -> WritePolicy:
    """A policy with the settings of a `state` and its counters at zero."""
    counters = ("name", "seen", "written", "novelty_sum")
    return make_policy(state["name"], **{k: v for k, v in state.items() if k not in counters})


def policy_from_state(state: dict[str, Any]) -> WritePolicy:
    """Rebuild a policy from what its `state` returned, counters included."""
    policy = fresh_policy(state)
    policy.load_state(state)
    return policy
