"""The sorting task of the ∞-former and Memoria papers: sort 20 tokens by how often they occur.

A sequence is ``n`` tokens from a vocabulary of 20 whose distribution drifts from ``p_init`` to
``p_final`` along the sequence, then ``SEP``, then the 20 tokens ordered by descending count in
the ``n`` tokens. A causal LM is trained with teacher forcing to produce the 20 targets; the loss
and accuracy count only those 20 predictions. The sequence is read segment by segment, so a
module can only sort correctly if its memory kept the counts of the earlier segments.

Conventions (the papers' data script leaves them open):

* Ties in count are broken by token id, smaller first; tokens that never occur (count 0) are
  appended after the others in the same order, so the target is always a permutation of 0-19.
* Sequences are *left*-padded with ``PAD`` (attention mask 0) to a whole number of segments, so
  ``SEP`` and the 20 targets always end the last segment (given a segment of at least 21
  tokens). `sequence_length` gives the ``n`` that fills ``k`` segments exactly (no padding).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lifelong.encoders.checks import check_at_least
from lifelong.encoders.segments import SegmentEncoder, drain_auxiliary

SORT_TOKENS = 20
SEP = 20
PAD = 21
VOCAB_SIZE = 22
TARGET_LENGTH = SORT_TOKENS  # the 20 sorted tokens after SEP
IGNORE = -100  # label of the positions that are not scored


def sequence_length(segments: int, segment_length: int) -> int:
    """The ``n`` for which ``n`` tokens + SEP + 20 targets fill ``segments`` segments exactly.

    Raises:
        ValueError: If a segment cannot hold SEP and the 20 targets, or ``segments < 1``.

    """
    if segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    if segment_length < TARGET_LENGTH + 1:
        raise ValueError(
            f"segment_length must be >= {TARGET_LENGTH + 1} (SEP + 20 targets), "
            f"got {segment_length}"
        )
    return segments * segment_length - TARGET_LENGTH - 1


def sort_by_count(tokens: np.ndarray) -> np.ndarray:
    """The 20 token ids by descending count in ``tokens`` (ties and unseen tokens by id).

    Args:
        tokens: Token ids in ``[0, 20)``, shape (n,).

    Returns:
        A permutation of ``0..19``, shape (20,).

    """
    counts = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=SORT_TOKENS)  # (20,)
    if counts.shape[0] != SORT_TOKENS:
        raise ValueError(f"tokens must lie in [0, {SORT_TOKENS}), got max {int(tokens.max())}")
    return np.argsort(-counts, kind="stable")  # stable: equal counts keep id order


@dataclass
class SortingBatch:
    """A batch of sorting sequences ready for a causal LM.

    Attributes:
        input_ids: Token ids (b, T), left-padded with ``PAD``.
        attention_mask: 1 for real tokens, 0 for padding (b, T).
        labels: At each position, the token to predict from it: the i-th target at the position
            just before it (``SEP`` for the first), ``IGNORE`` everywhere else (b, T).

    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor


class SortingGenerator:
    """Seeded generator of sorting sequences of ``n`` input tokens.

    Args:
        length: Input tokens ``n`` before ``SEP``.
        seed: Seed of the numpy ``Generator``.

    """

    def __init__(self, length: int, seed: int = 0) -> None:
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}")
        self.length = length
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int) -> np.ndarray:
        """Sequences of ``n`` tokens + SEP + 20 targets, shape (b, n + 21), int64."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        tokens = self.tokens(batch_size)  # (b, n)
        targets = np.stack([sort_by_count(row) for row in tokens])  # (b, 20)
        sep = np.full((batch_size, 1), SEP, dtype=np.int64)
        return np.concatenate([tokens, sep, targets], axis=1)

    def tokens(self, batch_size: int) -> np.ndarray:
        """Drifting input tokens alone, shape (b, n), from fresh ``p_init`` and ``p_final``."""
        p_init, p_final = self.distributions(batch_size)
        return self.draw_tokens(p_init, p_final)

    def distributions(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Fresh ``p_init`` and ``p_final`` (b, 20): ``randint(1, 10, 20)`` each, normalised."""
        return self._distribution(batch_size), self._distribution(batch_size)

    def draw_tokens(self, p_init: np.ndarray, p_final: np.ndarray) -> np.ndarray:
        """Token j of n ~ (1 - r) p_init + r p_final with r = (j + 1) / n, shape (b, n).

        Args:
            p_init: Distributions over the 20 tokens at the start (b, 20).
            p_final: Distributions at the end (b, 20).

        """
        if p_init.shape != p_final.shape or p_init.shape[-1] != SORT_TOKENS:
            raise ValueError(
                f"p_init and p_final must both be (b, {SORT_TOKENS}), "
                f"got {p_init.shape} and {p_final.shape}"
            )
        r = np.arange(1, self.length + 1, dtype=np.float64) / self.length  # (n,)
        probs = (1 - r)[None, :, None] * p_init[:, None] + r[None, :, None] * p_final[:, None]
        cdf = np.cumsum(probs, axis=-1)  # (b, n, 20)
        u = self.rng.random((p_init.shape[0], self.length, 1))  # (b, n, 1)
        tokens = (u > cdf).sum(-1)  # inverse CDF, (b, n)
        return np.minimum(tokens, SORT_TOKENS - 1).astype(np.int64)

    def batch(self, batch_size: int, segment_length: int | None = None) -> SortingBatch:
        """A padded, labelled batch (see `make_batch`)."""
        return make_batch(self.sample(batch_size), segment_length)

    def _distribution(self, batch_size: int) -> np.ndarray:
        weights = self.rng.integers(1, 10, size=(batch_size, SORT_TOKENS)).astype(np.float64)
        return weights / weights.sum(-1, keepdims=True)  # (b, 20)


def make_batch(sequences: np.ndarray, segment_length: int | None = None) -> SortingBatch:
    """Tensors for sequences (b, n + 21): left-pad to a multiple of ``segment_length``, label.

    Args:
        sequences: Token ids, each ending in SEP + 20 targets.
        segment_length: Pad the length up to a multiple of it (no padding if None).

    """
    sequences = np.asarray(sequences, dtype=np.int64)
    b, total = sequences.shape
    if total < TARGET_LENGTH + 2:
        raise ValueError(f"sequences must have >= {TARGET_LENGTH + 2} tokens, got {total}")
    pad = 0 if segment_length is None else -total % segment_length
    ids = torch.from_numpy(sequences)  # (b, n + 21)
    labels = torch.full_like(ids, IGNORE)
    labels[:, -TARGET_LENGTH - 1 : -1] = ids[:, -TARGET_LENGTH:]  # predict target i from i - 1
    mask = torch.ones_like(ids)
    if pad:
        ids = torch.cat([ids.new_full((b, pad), PAD), ids], dim=1)  # (b, T)
        labels = torch.cat([labels.new_full((b, pad), IGNORE), labels], dim=1)
        mask = torch.cat([mask.new_zeros(b, pad), mask], dim=1)
    return SortingBatch(input_ids=ids, attention_mask=mask, labels=labels)


def sorting_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the labelled positions: (b, t, V), (b, t) -> scalar."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)


def sorting_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """Correct arg-max predictions and scored positions: (b, t, V), (b, t) -> (correct, total)."""
    scored = labels != IGNORE  # (b, t)
    correct = (logits.argmax(-1) == labels) & scored
    return int(correct.sum()), int(scored.sum())


@dataclass
class SortingOutput:
    """What `SortingLM` returns.

    Attributes:
        logits: Next-token logits of the segments run with a graph (b, t_w, V).
        start: Position of the first of those tokens in the input.
        auxiliary: The module's regulariser from those segments, or None.

    """

    logits: torch.Tensor
    start: int
    auxiliary: torch.Tensor | None


class SortingLM(nn.Module):
    """A segment encoder with an LM head, read segment by segment with its memory carried along.

    The earlier segments run under ``torch.no_grad()`` (they only build the memory); the last
    ``grad_segments`` run with a graph through which the memory is not detached. This is the
    ∞-former's sorting setup (``grad_segments=1``). For full attention, pass the whole sequence
    length as ``segment_length`` with the memory-less ``Transformer``.

    Args:
        module: The segment encoder (causal, ``vocab_size`` >= the head's).
        segment_length: Tokens per segment.
        grad_segments: Trailing segments that run with a graph.
        vocab_size: Outputs of the head (22: sorting's; the recall task has its own).

    """

    def __init__(
        self,
        module: SegmentEncoder,
        segment_length: int,
        grad_segments: int = 1,
        vocab_size: int = VOCAB_SIZE,
    ):
        super().__init__()
        check_at_least(1, segment_length=segment_length, grad_segments=grad_segments)
        if not module.config.causal:
            raise ValueError("module must be causal (ModuleConfig(causal=True)) for an LM")
        if module.config.vocab_size < vocab_size:
            raise ValueError(f"module vocab_size must be >= {vocab_size}")
        self.module = module
        self.segment_length = segment_length
        self.grad_segments = grad_segments
        self.head = nn.Linear(module.hidden_size, vocab_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SortingOutput:
        """Run (b, T) token ids segment by segment; logits of the last ``grad_segments``."""
        starts = list(range(0, input_ids.shape[1], self.segment_length))
        window = starts[-self.grad_segments :]
        memory: Any = None
        with torch.no_grad():
            for start in starts[: len(starts) - len(window)]:
                memory = self._segment(input_ids, attention_mask, start, memory)[1]
        drain_auxiliary(self.module)  # drop what the no-grad segments accumulated
        hidden = []
        for start in window:
            out, memory = self._segment(input_ids, attention_mask, start, memory)
            hidden.append(out)
        logits = self.head(torch.cat(hidden, dim=1))  # (b, t_w, V)
        return SortingOutput(logits, window[0], drain_auxiliary(self.module))

    def _segment(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int, memory: Any
    ) -> tuple[torch.Tensor, Any]:
        stop = start + self.segment_length
        ids, mask = input_ids[:, start:stop], attention_mask[:, start:stop]  # (b, t)
        out = self.module.step(ids, mask, memory)
        return out.hidden, out.memory  # (b, t, d)

    def loss(self, batch: SortingBatch) -> tuple[torch.Tensor, SortingOutput]:
        """Cross-entropy on the target positions plus the module's regulariser, if any."""
        out = self(batch.input_ids, batch.attention_mask)
        loss = sorting_loss(out.logits, _window_labels(batch.labels, out.start))
        if out.auxiliary is not None:
            loss = loss + out.auxiliary
        return loss, out


def _window_labels(labels: torch.Tensor, start: int) -> torch.Tensor:
    if bool((labels[:, :start] != IGNORE).any()):
        raise ValueError(
            "a target lies before the segments run with a graph; use a segment_length >= 21 "
            "or more grad_segments"
        )
    return labels[:, start:]  # (b, t_w)


def cosine_schedule(steps: int, warmup: int) -> Callable[[int], float]:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``steps``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def train_sorting(
    model: SortingLM,
    length: int,
    *,
    steps: int = 400,
    batch_size: int = 32,
    lr: float = 5e-3,
    warmup: int = 20,
    clip: float = 1.0,
    seed: int = 0,
    data: Any = None,
) -> list[float]:
    """Train on freshly generated sequences: Adam, warm-up + cosine schedule, gradient clipping.

    Args:
        model: The LM to train (in place).
        length: Input tokens ``n`` per sequence (see `sequence_length`).
        steps: Optimiser steps, one new batch each.
        batch_size: Sequences per batch.
        lr: Peak learning rate.
        warmup: Linear warm-up steps.
        clip: Maximum gradient norm.
        seed: Seeds the data generator and torch (dropout).
        data: Another task's generator (its ``batch(batch_size, segment_length, step=…)``
            makes the step's batch; `lifelong.lm.recall`), instead of sorting sequences.

    Returns:
        The training loss of every step.

    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    torch.manual_seed(seed)
    if data is None:
        sorting = SortingGenerator(length, seed=seed)
        data = _Stepless(sorting)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(steps, warmup))
    model.train()
    losses = []
    for step in range(steps):
        loss, _ = model.loss(data.batch(batch_size, model.segment_length, step=step))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
    return losses


class _Stepless:
    """A generator whose batches do not depend on the training step."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def batch(self, batch_size: int, segment_length: int, step: int = 0) -> SortingBatch:
        return self.generator.batch(batch_size, segment_length)


@torch.no_grad()
def evaluate_sorting(
    model: SortingLM,
    length: int,
    *,
    examples: int = 256,
    batch_size: int = 64,
    seed: int = 10_000,
    data: Any = None,
) -> float:
    """Teacher-forced accuracy over the 20 target positions on a held-out generated set.

    Args:
        model: The trained LM.
        length: Input tokens ``n`` per sequence.
        examples: Held-out sequences.
        batch_size: Sequences per forward pass.
        seed: Seed of the held-out generator (distinct from the training seeds).
        data: Another task's held-out generator (``batch(batch_size, segment_length)``).

    Returns:
        The fraction of target tokens predicted correctly (chance is 0.05 for sorting).

    """
    data = SortingGenerator(length, seed=seed) if data is None else data
    model.eval()
    correct = total = 0
    for start in range(0, examples, batch_size):
        batch = data.batch(min(batch_size, examples - start), model.segment_length)
        out = model(batch.input_ids, batch.attention_mask)
        hit, scored = sorting_accuracy(out.logits, _window_labels(batch.labels, out.start))
        correct, total = correct + hit, total + scored
    return correct / total
