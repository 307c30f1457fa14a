"""A long-range recall task: facts in the first segment, the question at the end of the last.

RMT's memorisation task (Bulatov et al. 2023, section 4: a fact at the start of the input, noise
after it, the question at the very end; their facts are bAbI sentences in QuALITY text) in
synthetic tokens, so that nothing but memory can answer it:

    segment 1:   k₁ v₁ k₂ v₂ … k_F v_F  noise …
    segments 2…: noise …
    last:        … noise  QUERY k_q v_q

with F distinct keys, values drawn at random, noise tokens uniform. A causal LM is scored on
one prediction, the value ``v_q`` from the position of ``k_q`` (teacher forcing); chance is
1 / values. A module that reads only the last segment (``transformer``) cannot beat chance
once the facts are one segment or more before the question; ``full-attention`` reads the whole
sequence at once (an upper reference).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from lifelong.lm.sorting import IGNORE, SortingBatch


@dataclass(frozen=True)
class RecallTask:
    """The task's sizes (vocabulary: noise, then keys, then values, then QUERY).

    Attributes:
        facts: Key-value pairs at the start, F.
        keys: Distinct key tokens.
        values: Distinct value tokens (chance = 1 / values).
        noise: Distinct noise tokens.

    """

    facts: int = 3
    keys: int = 8
    values: int = 16
    noise: int = 16

    def __post_init__(self) -> None:
        if self.facts < 1 or self.keys < self.facts:
            raise ValueError(f"need 1 <= facts <= keys, got {self.facts} facts, {self.keys} keys")
        if self.values < 2 or self.noise < 1:
            raise ValueError(f"need >= 2 values and >= 1 noise token, got {self}")

    @property
    def query(self) -> int:
        """The QUERY token's id."""
        return self.noise + self.keys + self.values

    @property
    def vocab_size(self) -> int:
        """Every token id: noise, keys, values and QUERY."""
        return self.query + 1

    @property
    def chance(self) -> float:
        """Accuracy of a guess: 1 / values."""
        return 1.0 / self.values

    def min_length(self) -> int:
        """The shortest one-segment sequence: the facts, QUERY, key and value."""
        return 2 * self.facts + 3


class RecallGenerator:
    """Seeded recall sequences of ``segments × segment_length`` tokens.

    Args:
        task: The sizes.
        segments: Segments per sequence (the distance from the facts to the question).
        segment_length: Tokens per segment.
        seed: Seed of the numpy ``Generator``.
        curriculum: A step -> number of segments schedule for training (RMT's curriculum,
            `lifelong.encoders.rmt.curriculum_segments`); None: always ``segments``.

    """

    def __init__(
        self,
        task: RecallTask,
        segments: int,
        segment_length: int,
        seed: int = 0,
        curriculum: Callable[[int], int] | None = None,
    ) -> None:
        if segments < 1:
            raise ValueError(f"segments must be >= 1, got {segments}")
        if segment_length < task.min_length():
            raise ValueError(
                f"segment_length {segment_length} cannot hold {task.facts} facts and a question"
            )
        self.task = task
        self.segments = segments
        self.segment_length = segment_length
        self.curriculum = curriculum
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int, length: int) -> np.ndarray:
        """Sequences (b, length) laid out as the module docstring shows."""
        task = self.task
        if length < task.min_length():
            raise ValueError(f"a sequence of {length} tokens cannot hold {task.facts} facts")
        ids = self.rng.integers(0, task.noise, size=(batch_size, length))  # noise everywhere
        keys = np.argsort(self.rng.random((batch_size, task.keys)), axis=1)[:, : task.facts]
        values = self.rng.integers(0, task.values, size=(batch_size, task.facts))
        ids[:, 0 : 2 * task.facts : 2] = task.noise + keys
        ids[:, 1 : 2 * task.facts : 2] = task.noise + task.keys + values
        asked = self.rng.integers(0, task.facts, size=batch_size)
        rows = np.arange(batch_size)
        ids[:, -3] = task.query
        ids[:, -2] = task.noise + keys[rows, asked]
        ids[:, -1] = task.noise + task.keys + values[rows, asked]
        return ids.astype(np.int64)

    def batch(
        self, batch_size: int, segment_length: int | None = None, step: int | None = None
    ) -> SortingBatch:
        """A batch of ``segments`` (or the curriculum's number at ``step``) segments.

        ``segment_length`` is the reading model's (`SortingLM`'s interface) and is not used:
        the sequences are ``segments × self.segment_length`` tokens whoever reads them (full
        attention reads them as one segment).
        """
        segments = self.segments
        if step is not None and self.curriculum is not None:
            segments = self.curriculum(step)
        ids = torch.from_numpy(self.sample(batch_size, segments * self.segment_length))
        labels = torch.full_like(ids, IGNORE)
        labels[:, -2] = ids[:, -1]  # the value, predicted from the asked key's position
        return SortingBatch(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)


__all__ = ["RecallGenerator", "RecallTask"]
