"""Retrieved memory examples at the adaptation stage: computed once, reused by every test input.

Local adaptation's fast and low-rank paths adapt only the weights above a stage (the scope's,
`lifelong.mechanisms.scopes`); everything below it is frozen, so a memory example's rows are
carried through the frozen stages once (`frozen_prefix`) and kept for the whole evaluation
phase (`NeighbourCache`), however many test inputs retrieve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.heads import reads_pooled_only
from lifelong.memory import EpisodicWriter
from lifelong.model import Classifier


def frozen_prefix(
    model: Classifier,
    stage: int,
    ids: torch.Tensor,
    mask: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """Carry a batch's inputs (`Batch.inputs`) through the frozen stages below ``stage``.

    Computed without gradient. Returns the model's inputs at ``stage``, ready for
    ``model(*inputs, start=stage)``: the representation and its mask, plus the token types at
    stage 0 (the token ids, which the embeddings have yet to read them with); past stage 0 the
    representation already holds them. At the head stage only the [CLS] position is kept when
    the head reads nothing else (a classification head; a span head reads every token), and
    the last layer is computed there alone (``pooled_only``: its keys and values still read
    every token; the full layer's value up to float rounding, 1.10x faster on real test rows:
    ``experiments/bench/evaluation.py``).
    """
    if stage == 0:
        return (ids, mask) if token_type_ids is None else (ids, mask, token_type_ids)
    types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    pooled = stage == model.encoder.num_layers + 1 and reads_pooled_only(model.head)
    with torch.no_grad():  # a pooled head reads [CLS] only: the last layer computes it alone
        x = model.encoder.run_stages(
            ids, mask, 0, stage, packed=True, pooled_only=pooled, **types
        )  # (n, t, d)
    if pooled:
        return x[:, :1], mask[:, :1]
    return x, mask


@dataclass
class Stored:
    """One memory example at the adaptation stage: its rows (unpadded) and their labels.

    ``types`` are the rows' token-type ids at stage 0, where the rows are still token ids
    (later stages hold them already); ``None`` when the rows have none.
    """

    rows: list[torch.Tensor]
    labels: torch.Tensor
    types: list[torch.Tensor] | None = None


class NeighbourCache:
    """Memory examples' rows at the adaptation stage, by memory slot.

    Args:
        model: The trained model (its frozen stages compute the rows).
        writer: The episodic writer whose memory the slots index.
        stage: The first stage the adaptation changes (`Scope.stage`).

    """

    def __init__(self, model: Classifier, writer: EpisodicWriter, stage: int) -> None:
        self.model, self.writer, self.stage = model, writer, stage
        self.slots: dict[int, Stored] = {}  # slot -> its rows at the stage

    def clear(self) -> None:
        """Forget every cached example (the model has changed)."""
        self.slots.clear()

    def prefix(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """A batch's inputs carried through the frozen stages (`frozen_prefix`)."""
        return frozen_prefix(self.model, self.stage, *batch.inputs())

    def fill(self, slots: np.ndarray) -> None:
        """Compute the prefix of every retrieved memory example not cached yet, 64 at a time."""
        missing = np.array(sorted(set(slots.reshape(-1).tolist()) - set(self.slots)), np.int64)
        for s in range(0, len(missing), 64):
            part = missing[s : s + 64]
            nb = self.writer.batch(part)
            with torch.no_grad():
                x, mask, *types = self.prefix(nb)  # token types only at stage 0
            lengths = mask.sum(dim=1).tolist()
            for g, slot in enumerate(part.tolist()):
                rows = nb.example_rows(g).tolist()
                self.slots[slot] = Stored(
                    [x[r, : lengths[r]].clone() for r in rows],
                    nb.labels[rows].clone(),
                    [types[0][r, : lengths[r]].clone() for r in rows] if types else None,
                )

    def batch(self, slots: np.ndarray) -> Batch:
        """The cached rows of some memory examples as one padded batch, grouped by example."""
        stored = [self.slots[int(s)] for s in slots]
        rows = [r for item in stored for r in item.rows]
        x, mask = pad_rows(rows)
        groups = torch.cat(
            [
                torch.full((len(item.rows),), g, dtype=torch.long, device=x.device)
                for g, item in enumerate(stored)
            ]
        )
        types = [t for item in stored for t in item.types or ()]  # stage 0 only
        labels = torch.cat([item.labels for item in stored])
        return Batch(x, mask, labels, groups, token_type_ids=pad_rows(types)[0] if types else None)

    def stacked(self, slots: np.ndarray) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """One-row memory examples stacked per test example.

        Returns:
            Their model inputs at the adaptation stage, (n, k, t', ...) and the mask (n, k, t')
            (and their token types (n, k, t') at stage 0 when the rows have them), and their
            labels (n, k, ...).

        """
        stored = [self.slots[int(s)] for s in slots.reshape(-1)]
        labels = torch.stack([item.labels[0] for item in stored])
        x, mask = pad_rows([item.rows[0] for item in stored])
        inputs = [x.view(*slots.shape, *x.shape[1:]), mask.view(*slots.shape, x.shape[1])]
        types = [item.types[0] for item in stored if item.types]  # stage 0 only
        if types:
            inputs.append(pad_rows(types)[0].view(*slots.shape, x.shape[1]))  # (n, k, t')
        return tuple(inputs), labels.view(*slots.shape, *labels.shape[1:])

    def widths(self, slots: np.ndarray) -> np.ndarray:
        """The longest cached row among each test example's neighbours: (n,) for slots (n, k)."""
        return np.array(
            [max(len(r) for s in row for r in self.slots[int(s)].rows) for row in slots],
            dtype=np.int64,
        )

    def owner_rows(self, slots: np.ndarray) -> tuple[Batch, list[int]]:
        """The cached rows of every owner's neighbours as one batch, owners in order.

        Returns:
            The rows at the adaptation stage (their representation in ``input_ids``), with
            labels and, for multi-row examples, groups numbering the examples across owners;
            and the owners' row bounds (owner o: ``bounds[o]:bounds[o + 1]``).

        """
        stored = [[self.slots[int(s)] for s in row] for row in slots]
        rows = [r for owner in stored for item in owner for r in item.rows]
        x, mask = pad_rows(rows)  # (R, t, d), (R, t)
        labels = torch.cat([item.labels for owner in stored for item in owner])
        sizes = [len(item.rows) for owner in stored for item in owner]
        groups = None
        if any(size > 1 for size in sizes):
            groups = torch.repeat_interleave(
                torch.arange(len(sizes), device=x.device), torch.tensor(sizes, device=x.device)
            )
        bounds = np.cumsum([0] + [sum(len(item.rows) for item in owner) for owner in stored])
        return Batch(x, mask, labels, groups), [int(b) for b in bounds]


def width_chunks(widths: np.ndarray, chunk: int) -> list[np.ndarray]:
    """Test examples in chunks of ``chunk``, those with the narrowest neighbours first.

    A vmapped chunk pads every example's neighbours to the chunk's widest row, so examples of
    similar width share a chunk (length bucketing); the order is stable, and the caller puts
    the results back in the batch's order (`in_batch_order`).

    Args:
        widths: Each test example's widest neighbour row (`NeighbourCache.widths`), (n,).
        chunk: Test examples per chunk.

    Returns:
        The chunks' example indices, covering ``range(n)`` once.

    """
    order = np.argsort(widths, kind="stable")
    return [order[s : s + chunk] for s in range(0, len(order), chunk)]


def in_batch_order(parts: Sequence[torch.Tensor], chunks: Sequence[np.ndarray]) -> torch.Tensor:
    """The chunks' results (c_i, ...) concatenated and put back in the batch's order."""
    placed = np.concatenate(chunks)
    inverse = torch.as_tensor(np.argsort(placed), device=parts[0].device)
    return torch.cat(list(parts))[inverse]


def trimmed(inputs: Sequence[torch.Tensor], mask: torch.Tensor) -> list[torch.Tensor]:
    """Inputs (c, t, ...) cut to their mask's (c, t) longest row: padding nothing reads."""
    width = max(int(mask.sum(dim=1).max()), 1)
    return [x[:, :width] for x in inputs]


def pad_rows(rows: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad cached rows (t_i, ...) into (n, t, ...) and a mask (n, t)."""
    width = max(len(r) for r in rows)
    like = rows[0]
    x = like.new_zeros((len(rows), width, *like.shape[1:]))
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=like.device)
    for i, row in enumerate(rows):
        x[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return x, mask


class Adapting(Protocol):
    """What the fast and low-rank paths read of a `LocalAdapter` (which satisfies it).

    Attributes:
        model: The trained model; its weights are only read.
        scope: Which weights adapt (`lifelong.mechanisms.scopes`).
        options: The adaptation's options (`AdaptationOptions`: K, ``fast_chunk``, path).
        cache: The retrieved examples' rows at the scope's stage.
        lora_seed: The seed of the low-rank deltas' A.

    """

    model: Classifier
    scope: Any
    options: Any
    cache: NeighbourCache
    lora_seed: int

    def adapt_kwargs(self) -> dict[str, Any]:
        """`local_adapt`'s keywords: L, the step size, λ, the momentum, the loss scale."""
        ...
