"""The episodic writer: every stream example offered to a memory keyed by a frozen encoder.

A memory value is one whole example (its stored record fields), which the task kind expands
into model rows when it is read; the key is the frozen key network's vector of the example
(MbPA++, de Masson d'Autume et al., 2019, §3: a fixed key network, so keys do not drift).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lifelong._deprecated import deprecated_alias
from lifelong.memory.episodic import EpisodicMemory
from lifelong.memory.keys import KeyEncoder, QueryKeys
from lifelong.memory.policies import RandomWrite, WriteAll, WritePolicy

if TYPE_CHECKING:
    import torch
    from torch import nn

    from lifelong.batch import Batch
    from lifelong.memory.records import ExampleRecords
    from lifelong.tasks import TaskKind


class EpisodicWriter:
    """An episodic memory of whole examples plus the frozen key network that keys them.

    A strategy builds one from its context with `lifelong.mechanisms.replay.episodic_writer`.

    Args:
        kind: The task kind: how examples are keyed (``key_rows``, ``key_position``), which
            record fields are stored (``stored_fields``) and how stored examples become rows.
        encoder: The pre-trained encoder, copied and frozen as the key network (so build this
            before training starts); ``None`` for a memory that is only sampled (REPLAY,
            A-GEM, OML-ER, ANML-ER, MAML-ER, MbPA++-rand): no key network is copied and nothing
            is encoded on a write, as in Holla et al.'s ``cls_replay.py``, whose memory stores
            examples without keys.
        write_prob: Probability of writing each example (1 = all of them, as in MbPA++).
        policy: Any other write policy (e.g. `DiversityWrite`); overrides ``write_prob``.
        seed: Seed of the write policy's and the sampler's generator.
        device: Where the keys are searched (the run's device).
        index: The nearest-neighbour search (`EpisodicMemory`'s ``index``: ``auto``, ``torch``,
            ``Flat`` or a FAISS factory string).

    """

    def __init__(
        self,
        kind: TaskKind,
        encoder: nn.Module | None,
        *,
        write_prob: float = 1.0,
        policy: WritePolicy | None = None,
        seed: int = 0,
        device: torch.device | str = "cpu",
        index: str = "auto",
    ) -> None:
        self.kind = kind
        self.key_encoder: KeyEncoder | None = None
        self.queries: QueryKeys | None = None  # test inputs' keys, each batch keyed once
        if encoder is not None:
            self.key_encoder = KeyEncoder(encoder, position=kind.key_position)
            self.queries = QueryKeys(self.key_encoder)
        if policy is None:
            policy = WriteAll() if write_prob >= 1.0 else RandomWrite(write_prob)
        self.memory = EpisodicMemory(
            self.key_encoder.dim if self.key_encoder else 0,
            policy=policy,
            seed=seed,
            device=device,
            index=index,
        )
        self.offered = 0  # stream examples offered to memory
        self.written = 0  # examples the policy wrote (overwrites included)

    @property
    def task(self) -> TaskKind:
        """Deprecated alias of `kind` ("task" names a stream's task; this is its kind)."""
        deprecated_alias("EpisodicWriter.task", "EpisodicWriter.kind")
        return self.kind

    def keys(self, examples: ExampleRecords) -> np.ndarray:
        """Memory keys of ``examples``, one per example, shape (n, key_dim)."""
        if self.key_encoder is None:
            raise ValueError("this writer keys nothing (keyed=False): its memory is only sampled")
        return self.key_encoder(self.kind.key_rows(examples))

    def query_keys(self, examples: ExampleRecords) -> np.ndarray:
        """`keys` of test inputs, each batch keyed once (`QueryKeys`): the same values."""
        if self.queries is None:
            raise ValueError("this writer keys nothing (keyed=False): its memory is only sampled")
        return self.queries(self.kind.key_rows(examples))

    def write(self, batch: Batch) -> np.ndarray:
        """Offer the batch's examples to memory; keys are computed only for those written."""
        if batch.examples is None:
            raise ValueError("only batches made by a task kind carry the examples memory stores")
        examples = batch.examples.only(self.kind.stored_fields)
        keys = None
        if self.key_encoder is not None:
            keys = lambda chosen: self.keys(examples.select(chosen))  # noqa: E731
        slots = self.memory.write(examples, keys)
        self.offered += len(examples)
        self.written += len(slots)
        return slots

    def batch(self, slots: np.ndarray) -> Batch:
        """The stored examples in ``slots`` as model rows."""
        return self.kind.rows(self.memory.get(slots).examples)

    def report(self) -> dict[str, float]:
        """Examples held at the end and the fraction of offered examples written."""
        rate = self.written / self.offered if self.offered else 0.0
        return {"memory_examples": len(self.memory), "write_rate": round(rate, 4)}

    def state_dict(self) -> dict[str, Any]:
        """The memory (as bytes) and the write counts."""
        return {
            "memory": self.memory.state_dict(),
            "offered": self.offered,
            "written": self.written,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the memory and the write counts."""
        self.memory.load_state_dict(state["memory"])
        self.offered, self.written = int(state["offered"]), int(state["written"])
