"""Memoria (Park & Bak, 2024): a Hebbian, non-parametric working/short-term/long-term memory.

Three parts:

* `EngramMemory` -- the memory manager of one sample, a plain class with no parameters. It holds
  engrams (vector, type WM/STM/LTM, float lifespan, age) and a co-retrieval ``Count`` matrix whose
  row-normalised form is the edge weight ``E[i, j] = Count[i, j] / Count[i, i]``, and implements
  the paper's *retrieve* and *memorize & forget* stages. Everything in it runs under ``no_grad``;
  stored engrams are detached constants.
* `Memoria` -- the Memoria Transformer, a `SegmentEncoder` trained from scratch. An abstractor
  ``f_e`` turns hidden states into ``N_wm`` working-memory engrams; every memory layer runs
  self-attention, cross-attention to the working memory, cross-attention to the remembered
  engrams (the same attention weights, separate LayerNorms) and the feed-forward block.
* `MemoriaBert` -- a pretrained BERT with Memoria: engrams from the current segment's output of
  one BERT layer, new (zero-initialised) memory cross-attention in the layers above it.

The memory carried between segments is a list with one `EngramMemory` per batch row. A forward
pass never mutates the memory it was given: rows it writes to are copied first, so an old memory
stays valid (it can be re-used, e.g. to evaluate a segment twice). Rows whose segment holds no real
token are not memorised at all -- their `EngramMemory` is passed through unchanged -- which is
exactly what `DocumentEncoder`'s row-wise merge asks for; `merge_memory` is a per-row pick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least, check_positive, check_segment_inputs
from lifelong.encoders.hf import HFEncoder
from lifelong.encoders.layers import (
    FeedForward,
    ModuleConfig,
    MultiHeadAttention,
    TokenEmbedding,
    TransformerLayer,
    attend,
    bert_module_config,
    padding_mask,
    segment_mask,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool


class EngramKind(IntEnum):
    """The memory an engram belongs to."""

    WORKING = 0
    SHORT_TERM = 1
    LONG_TERM = 2


@dataclass
class Retrieval:
    """What one retrieve stage found, as positions in the `EngramMemory` store.

    Positions stay valid until the next `EngramMemory.memorize` (which compacts the store).

    Attributes:
        short_term: ``M_stm^rem`` (s,), ordered by closeness to the working memory.
        long_term: ``M_ltm^rem`` (l,), ordered by closeness to the working memory.
        found: ``M_ltm^found`` (f,), every long-term engram the graph search visited.

    """

    short_term: torch.Tensor
    long_term: torch.Tensor
    found: torch.Tensor

    @property
    def remembered(self) -> torch.Tensor:
        """``M_rem = M_stm^rem ∪ M_ltm^rem`` (s + l,), short-term first."""
        return torch.cat([self.short_term, self.long_term])


@dataclass(frozen=True)
class EngramSettings:
    """The sizes and the lifespan rule of a Memoria memory (Park & Bak, 2024, section 3).

    Attributes:
        working: ``N_wm``, engrams the abstractor writes per segment.
        short_term_retrieve: ``N_stm^rem``, short-term engrams retrieved per segment.
        long_term_retrieve: ``N_ltm^rem``, long-term engrams retrieved per segment.
        short_term_capacity: ``C_stm``, the short-term memory's capacity.
        lifespan: Initial lifespan of a new working-memory engram (the paper's sorting setting
            uses 5; its Hyperpartisan setting with BERT, 12).
        alpha: Lifespan extension scale: a step hands out ``alpha * |M_rem|`` lifespan in total
            (the reference code's 8).
        depth: ``N_depth``, greedy steps of the long-term graph search from each starting engram
            (the reference code's 10).

    """

    working: int
    short_term_retrieve: int
    long_term_retrieve: int
    short_term_capacity: int
    lifespan: float = 5.0
    alpha: float = 8.0
    depth: int = 10

    def __post_init__(self) -> None:
        check_at_least(1, working=self.working)
        check_at_least(
            0,
            short_term_retrieve=self.short_term_retrieve,
            long_term_retrieve=self.long_term_retrieve,
            short_term_capacity=self.short_term_capacity,
            depth=self.depth,
            alpha=self.alpha,
        )
        check_positive(lifespan=self.lifespan)


class EngramMemory:
    """The Memoria memory of one sample: engrams, their lifespans and the engram graph.

    Engrams are kept in creation order (oldest first) in one store; ``kinds`` says which memory
    each belongs to. Working memory (WM) is the set of engrams added by the last `add_working`;
    short-term memory (STM) is a FIFO of capacity ``short_term_capacity``; long-term memory (LTM)
    is unbounded but, since every engram loses one unit of lifespan per step and only retrieved
    engrams gain lifespan (``alpha`` per retrieved engram on average), its size settles around
    ``alpha * (short_term_retrieve + long_term_retrieve)``.

    One step is `add_working` -> `retrieve` -> (the host attends to the engrams) -> `memorize`.

    Args:
        dim: Width of an engram.
        settings: The sizes and the lifespan rule.
        seed: Seed of the generator that breaks ties between equally weighted edges.
        device: Where the engrams live.
        dtype: Floating type of the engrams.

    Attributes:
        vectors: Engram vectors (n, dim), detached.
        kinds: `EngramKind` values (n,).
        lifespans: Remaining lifespans (n,).
        ages: Memorize steps each engram has lived through (n,).
        counts: ``Count[i, j]``, how often engrams i and j were activated together (n, n);
            the diagonal counts activations.
        cue: The host's input for the next working memory (decoder hosts keep the previous
            segment's final hidden states of real tokens here, (t, dim)); None if there is none.

    """

    def __init__(
        self,
        dim: int,
        settings: EngramSettings,
        *,
        seed: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        check_at_least(1, dim=dim)
        self.dim = dim
        self.settings = settings
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)
        self.vectors = torch.zeros(0, dim, device=device, dtype=dtype)
        self.kinds = torch.zeros(0, dtype=torch.long, device=device)
        self.lifespans = torch.zeros(0, dtype=dtype, device=device)
        self.ages = torch.zeros(0, dtype=torch.long, device=device)
        self.counts = torch.zeros(0, 0, dtype=dtype, device=device)
        self.cue: torch.Tensor | None = None

    # -- inspection ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def indices(self, kind: EngramKind) -> torch.Tensor:
        """Store positions (k,) of the engrams of one kind, oldest first."""
        return (self.kinds == int(kind)).nonzero().squeeze(1)

    def size(self, kind: EngramKind) -> int:
        """Number of engrams of one kind."""
        return int((self.kinds == int(kind)).sum())

    def edge_weights(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``E[i, j] = Count[i, j] / Count[i, i]`` for i in ``rows`` (all by default): (r, n).

        Rows of engrams that were never activated (``Count[i, i] = 0``) are zero.
        """
        counts = self.counts if rows is None else self.counts[rows]  # (r, n)
        diagonal = self.counts.diagonal()
        diagonal = diagonal if rows is None else diagonal[rows]  # (r,)
        return counts / diagonal.clamp(min=1.0)[:, None]

    def closeness(self, positions: torch.Tensor) -> torch.Tensor:
        """``log C_i = log((1 / N_wm) Σ_j exp(-||e_i - e_wm,j||²))`` for engrams ``positions``.

        The paper's correlation weight, in log space so that it does not underflow for distant
        engrams (ranking by it is ranking by ``C``; the reference code ranks by the mean of
        ``-d²`` instead). Returns (k,); needs a working memory.
        """
        working = self.vectors[self.indices(EngramKind.WORKING)]  # (w, d)
        if working.shape[0] == 0:
            raise RuntimeError("closeness needs a working memory; call add_working first")
        distances = torch.cdist(self.vectors[positions], working).square()  # (k, w)
        return torch.logsumexp(-distances, dim=1) - math.log(working.shape[0])

    def copy(self) -> EngramMemory:
        """An independent copy (tensors cloned, generator state carried over)."""
        other = object.__new__(EngramMemory)
        other.__dict__.update(self.__dict__)
        other.generator = torch.Generator().set_state(self.generator.get_state())
        for name in ("vectors", "kinds", "lifespans", "ages", "counts"):
            setattr(other, name, getattr(self, name).clone())
        return other

    # -- retrieve ------------------------------------------------------------------------------

    @torch.no_grad()
    def add_working(self, engrams: torch.Tensor) -> torch.Tensor:
        """Store new working-memory engrams (w, dim) with the initial lifespan; returns positions.

        Raises:
            ValueError: ``engrams`` is not (w, dim) with ``1 <= w``.
            RuntimeError: The previous working memory has not been memorised yet.

        """
        if engrams.dim() != 2 or engrams.shape[1] != self.dim or engrams.shape[0] < 1:
            raise ValueError(f"engrams must have shape (w >= 1, {self.dim}), got {engrams.shape}")
        if self.size(EngramKind.WORKING):
            raise RuntimeError("the previous working memory was not memorised; call memorize")
        w, n = engrams.shape[0], len(self)
        self.vectors = torch.cat([self.vectors, engrams.detach().to(self.vectors)])
        self.kinds = torch.cat([self.kinds, self.kinds.new_full((w,), int(EngramKind.WORKING))])
        self.lifespans = torch.cat(
            [self.lifespans, self.lifespans.new_full((w,), self.settings.lifespan)]
        )
        self.ages = torch.cat([self.ages, self.ages.new_zeros(w)])
        counts = self.counts.new_zeros(n + w, n + w)
        counts[:n, :n] = self.counts
        self.counts = counts
        return torch.arange(n, n + w, device=self.kinds.device)

    @torch.no_grad()
    def retrieve(self) -> Retrieval:
        """The retrieve stage: working memory as the cue, remembered STM and LTM engrams out.

        1. rank the STM by closeness to the working memory and keep the top ``N_stm^rem``;
        2. from each of them, start in the LTM engram of highest edge weight (ties at random);
        3. walk ``depth`` greedy steps from each start, each to the not yet visited LTM engram of
           highest edge weight (the walks advance together and share the visited set, so two
           walks that meet merge); the visited engrams are ``M_ltm^found``. Every unvisited LTM
           engram is a candidate, also one of weight 0 (as in the reference code), so a walk
           only stops when the whole LTM has been visited;
        4. keep the top ``N_ltm^rem`` of them by closeness to the working memory.
        """
        short_term = self.indices(EngramKind.SHORT_TERM)
        k = min(self.settings.short_term_retrieve, short_term.numel())
        order = self.closeness(short_term).topk(k).indices if k else short_term[:0]
        short_term = short_term[order]  # (s,)
        found = self._search_long_term(short_term)  # (f,)
        k = min(self.settings.long_term_retrieve, found.numel())
        order = self.closeness(found).topk(k).indices if k else found[:0]
        return Retrieval(short_term=short_term, long_term=found[order], found=found)

    def _search_long_term(self, starts: torch.Tensor) -> torch.Tensor:
        long_term = self.indices(EngramKind.LONG_TERM)  # (m,)
        if starts.numel() == 0 or long_term.numel() == 0:
            return long_term[:0]
        unvisited = torch.ones_like(long_term, dtype=torch.bool)  # (m,)
        frontier = starts
        for _ in range(
            self.settings.depth + 1
        ):  # the first move picks M_ltm^init, then depth steps
            # argmax_j E[i, j] = argmax_j Count[i, j]: E's row i is Count's row i over Count[i, i]
            scores = self.counts[frontier[:, None], long_term[None, :]]  # (f, m)
            picked = _argmax_random_ties(scores, unvisited, self.generator).unique()  # (f',)
            unvisited[picked] = False
            frontier = long_term[picked]
            if not bool(unvisited.any()):
                break
        return long_term[~unvisited]

    # -- memorize & forget ---------------------------------------------------------------------

    @torch.no_grad()
    def memorize(self, remembered: torch.Tensor, contributions: torch.Tensor) -> torch.Tensor:
        """The memorize & forget stage after the host used the engrams.

        In the order of the paper's Section 3.4 (and the spec): strengthen the edges of
        ``M_act = M_wm ∪ M_rem``, extend the remembered engrams' lifespans, age every engram by
        one step, delete those with lifespan ``<= 0``, move the working memory to the STM and the
        STM's overflow (oldest first) to the LTM. The paper's Algorithm 3 and its code delete
        last, after the moves; deleting first lets a dying STM engram free its slot instead of
        pushing an older, still living one into the LTM.

        Args:
            remembered: Positions of ``M_rem`` (r,) (from `Retrieval.remembered`).
            contributions: Their contributions ``w`` (r,) (mean attention they received).

        Returns:
            The lifespan increments ``Inc`` (r,) that were handed out.

        """
        active = torch.cat([self.indices(EngramKind.WORKING), remembered])
        self.strengthen(active)
        increments = self.extend_lifespans(remembered, contributions)
        self.forget()
        self.consolidate()
        return increments

    @torch.no_grad()
    def strengthen(self, active: torch.Tensor) -> None:
        """``Count[i, j] += 1`` for every pair of ``active`` (k,) positions, ``i = j`` included."""
        if active.numel() != active.unique().numel():
            raise ValueError("active engrams must be distinct positions")
        self.counts[active[:, None], active[None, :]] += 1.0

    @torch.no_grad()
    def extend_lifespans(
        self, remembered: torch.Tensor, contributions: torch.Tensor
    ) -> torch.Tensor:
        """``lifespan_i += Inc_i = w_i / Σ_k w_k × |M_rem| × α`` for the remembered engrams.

        Zero total contribution shares the lifespan equally. Returns ``Inc`` (r,).

        Raises:
            ValueError: Shapes differ, contributions are negative or not finite, or a position is
                not a distinct STM/LTM engram.

        """
        if remembered.dim() != 1 or contributions.shape != remembered.shape:
            raise ValueError(
                f"remembered and contributions must be (r,) vectors of one length, got "
                f"{tuple(remembered.shape)} and {tuple(contributions.shape)}"
            )
        if remembered.numel() == 0:
            return self.lifespans.new_zeros(0)
        if remembered.numel() != remembered.unique().numel():
            raise ValueError("remembered engrams must be distinct positions")
        if bool((self.kinds[remembered] == int(EngramKind.WORKING)).any()):
            raise ValueError("remembered engrams must be short- or long-term, not working memory")
        weights = contributions.detach().to(self.lifespans)  # (r,)
        if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
            raise ValueError("contributions must be finite and non-negative")
        total = weights.sum()
        share = weights / total if float(total) > 0 else torch.full_like(weights, 1 / len(weights))
        increments = share * remembered.numel() * self.settings.alpha  # (r,)
        self.lifespans[remembered] += increments
        return increments

    @torch.no_grad()
    def forget(self) -> None:
        """Every engram loses one lifespan unit and ages a step; those at ``<= 0`` are deleted."""
        self.lifespans -= 1.0
        self.ages += 1
        self._keep(self.lifespans > 0)

    @torch.no_grad()
    def consolidate(self) -> None:
        """Working memory becomes short-term; STM beyond its capacity (oldest first) long-term."""
        self.kinds[self.kinds == int(EngramKind.WORKING)] = int(EngramKind.SHORT_TERM)
        short_term = self.indices(EngramKind.SHORT_TERM)  # oldest first
        overflow = short_term.numel() - self.settings.short_term_capacity
        if overflow > 0:
            self.kinds[short_term[:overflow]] = int(EngramKind.LONG_TERM)

    def _keep(self, keep: torch.Tensor) -> None:
        if bool(keep.all()):
            return
        index = keep.nonzero().squeeze(1)  # (k,)
        for name in ("vectors", "kinds", "lifespans", "ages"):
            setattr(self, name, getattr(self, name)[index])
        self.counts = self.counts[index][:, index]  # compacted (k, k)


def _argmax_random_ties(
    scores: torch.Tensor, allowed: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """Row-wise argmax of ``scores`` (r, c) over the ``allowed`` columns (c,), ties at random.

    At least one column must be allowed. Returns the chosen columns (r,).
    """
    masked = scores.masked_fill(~allowed, float("-inf"))  # (r, c)
    ties = masked == masked.max(dim=1, keepdim=True).values  # (r, c)
    noise = torch.rand(scores.shape, generator=generator).to(scores.device)  # (r, c)
    return torch.where(ties, noise, -1.0).argmax(dim=1)


# -- the learned parts ---------------------------------------------------------------------------


class Abstractor(nn.Module):
    """The memory encoder ``f_e``: ``M_wm = FFN(softmax(Q (W_k X)^T) W_v X)``.

    As in the reference code: one head, learned queries ``Q``, no ``1/sqrt(d)`` score scaling, and
    an FFN of two linear layers without an activation between them.

    Args:
        d_model: Width of the hidden states and engrams.
        engrams: ``N_wm``, the number of queries (engrams per step).
        inner: Inner width of the FFN.

    """

    def __init__(self, d_model: int, engrams: int, inner: int) -> None:
        super().__init__()
        self.queries = nn.Parameter(torch.randn(engrams, d_model) * 0.02)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, inner), nn.Linear(inner, d_model))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hidden states (b, t, d) with their token mask (b, t) -> engrams (b, N_wm, d)."""
        q = self.queries[None, None].expand(x.shape[0], 1, -1, -1)  # (b, 1, w, d)
        k = self.key(x)[:, None]  # (b, 1, t, d)
        v = self.value(x)[:, None]  # (b, 1, t, d)
        pooled, _ = attend(q, k, v, padding_mask(mask), scale=1.0)  # (b, 1, w, d)
        return self.ffn(pooled[:, 0])  # (b, w, d)


@dataclass
class _Recall:
    """A batch's memory read: padded engrams with key masks and what to memorise per row."""

    working: torch.Tensor  # (b, w, d), with gradient into f_e
    working_rows: torch.Tensor  # (b,) rows that have a working memory
    remembered: torch.Tensor | None  # (b, r, d) detached, None when no row remembered anything
    remembered_mask: torch.Tensor | None  # (b, r)
    retrievals: list[Retrieval | None]  # per row; None for rows that are not memorised


class _MemoriaCore(nn.Module):
    """The abstractor and the memory settings shared by `Memoria` and `MemoriaBert`."""

    def __init__(
        self,
        d_model: int,
        inner: int,
        settings: EngramSettings,
        seed: int,
        memory_device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_at_least(1, d_model=d_model)
        self.settings = settings
        self.d_model = d_model
        self.seed = seed
        self.memory_device = memory_device
        self.abstractor = Abstractor(d_model, settings.working, inner)

    def new_memory(self, batch: int, like: torch.Tensor) -> list[EngramMemory]:
        """One empty memory per row; row i breaks ties with the generator seeded ``seed + i``."""
        return [
            EngramMemory(
                self.d_model,
                self.settings,
                seed=self.seed + i,
                device=self.memory_device or like.device,
            )
            for i in range(batch)
        ]

    def prepare(
        self,
        memory: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        like: torch.Tensor,
    ) -> tuple[list[EngramMemory], torch.Tensor]:
        """Check a segment (b, t) and take the memories it works on, one per row.

        Fresh ones for a new document (``memory=None``); else copies of the given memories of
        the rows with real tokens, while rows without any keep theirs, untouched.

        Returns:
            The per-row memories and which rows are memorised (b,): those with a real token.

        """
        check_segment_inputs(input_ids, attention_mask)
        rows = attention_mask.bool().any(dim=1)  # (b,) rows that are memorised
        batch = rows.shape[0]
        if memory is None:
            return self.new_memory(batch, like), rows
        if not isinstance(memory, (list, tuple)) or len(memory) != batch:
            raise ValueError(
                f"memory must be a list of {batch} EngramMemory objects (one per row) or None"
            )
        return [m.copy() if bool(keep) else m for m, keep in zip(memory, rows)], rows

    def recall(
        self, memory: list[EngramMemory], cue: torch.Tensor, cue_mask: torch.Tensor
    ) -> _Recall:
        """Write ``f_e(cue)`` as working memory of the rows with a cue, then retrieve for them.

        Args:
            memory: Per-row memories (already copies, see `prepare`); written in place.
            cue: Host hidden states (b, t, d).
            cue_mask: Which of them are real tokens (b, t); rows without any are skipped.

        """
        working = self.abstractor(cue, cue_mask)  # (b, w, d)
        rows = cue_mask.bool().any(dim=1)  # (b,)
        retrievals: list[Retrieval | None] = []
        for i, row in enumerate(memory):
            if not bool(rows[i]):
                retrievals.append(None)
                continue
            row.add_working(working[i])
            retrievals.append(row.retrieve())
        remembered, remembered_mask = self._gather(memory, retrievals, working)
        return _Recall(working, rows, remembered, remembered_mask, retrievals)

    @staticmethod
    def _gather(
        memory: list[EngramMemory], retrievals: list[Retrieval | None], like: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        positions = [r.remembered if r is not None else None for r in retrievals]
        longest = max((p.numel() for p in positions if p is not None), default=0)
        if longest == 0:
            return None, None
        b, _, d = like.shape
        engrams = like.new_zeros(b, longest, d)  # (b, r, d), detached constants
        mask = torch.zeros(b, longest, dtype=torch.bool, device=like.device)  # (b, r)
        for i, p in enumerate(positions):
            if p is not None and p.numel():
                engrams[i, : p.numel()] = memory[i].vectors[p]
                mask[i, : p.numel()] = True
        return engrams, mask

    @torch.no_grad()
    def memorize(
        self, memory: list[EngramMemory], recall: _Recall, contributions: torch.Tensor | None
    ) -> None:
        """Memorize & forget for every row that retrieved; ``contributions`` is (b, r) or None."""
        for i, retrieval in enumerate(recall.retrievals):
            if retrieval is None:
                continue
            remembered = retrieval.remembered
            r = remembered.numel()
            if contributions is None:  # nothing read the engrams: equal shares
                weights = torch.zeros(r)
            else:
                weights = contributions[i, :r]  # (r,)
            memory[i].memorize(remembered, weights)


def _contribution(weights: torch.Tensor, query_mask: torch.Tensor) -> torch.Tensor:
    """Attention (b, h, t, r) averaged over heads and real queries (b, t) -> (b, r)."""
    per_query = weights.detach().mean(dim=1)  # (b, t, r)
    mask = query_mask.to(per_query.dtype)[..., None]  # (b, t, 1)
    return (per_query * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class MemoryAttention(nn.Module):
    """Cross-attention to the working memory, then to the remembered engrams (shared weights).

    Each read has its own LayerNorm and a residual. ``pre_norm=False`` is the post-LN pattern of
    `TransformerLayer` (``x = LN(x + attn(x, M))``); ``pre_norm=True`` (``x = x + attn(LN(x), M)``)
    with ``zero_init=True`` is an exact identity at initialisation, for inserting into a
    pretrained network. A row without any engram to read skips the read (and its LayerNorm).

    Args:
        d_model: Width.
        heads: Attention heads.
        dropout: Dropout on the attention output.
        pre_norm: Normalise the queries instead of the sum.
        zero_init: Zero the output projection.
        eps: LayerNorm epsilon.

    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        dropout: float = 0.0,
        *,
        pre_norm: bool = False,
        zero_init: bool = False,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, heads, dropout)
        self.norm_working = nn.LayerNorm(d_model, eps=eps)
        self.norm_remembered = nn.LayerNorm(d_model, eps=eps)
        self.pre_norm = pre_norm
        if zero_init:
            nn.init.zeros_(self.attention.output.weight)
            nn.init.zeros_(self.attention.output.bias)

    def forward(self, x: torch.Tensor, recall: _Recall) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Read the memory from ``x`` (b, t, d); returns ``x`` and the M_rem weights (b,h,t,r)."""
        rows = recall.working_rows  # (b,)
        x, _ = self._read(
            x, recall.working, rows[:, None].expand(-1, recall.working.shape[1]), self.norm_working
        )
        if recall.remembered is None:
            return x, None
        return self._read(x, recall.remembered, recall.remembered_mask, self.norm_remembered)

    def _read(
        self, x: torch.Tensor, engrams: torch.Tensor, keys: torch.Tensor, norm: nn.LayerNorm
    ) -> tuple[torch.Tensor, torch.Tensor]:
        mask = padding_mask(keys)  # (b, 1, 1, r)
        if self.pre_norm:
            out, weights = self.attention(norm(x), engrams, mask, return_weights=True)
            updated = x + out  # (b, t, d)
        else:
            out, weights = self.attention(x, engrams, mask, return_weights=True)
            updated = norm(x + out)  # (b, t, d)
        has_keys = keys.any(dim=1)[:, None, None]  # (b, 1, 1)
        return torch.where(has_keys, updated, x), weights


class MemoriaLayer(nn.Module):
    """Post-LN self-attention -> memory cross-attention (WM, then M_rem) -> feed-forward."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(config.d_model, config.heads, config.dropout)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.memory = MemoryAttention(config.d_model, config.heads, config.dropout)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, recall: _Recall | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(b, t, d) -> (b, t, d) and the attention on the remembered engrams (b, h, t, r)."""
        x = self.norm1(x + self.attention(x, mask=mask))
        weights = None
        if recall is not None:
            x, weights = self.memory(x, recall)
        return self.norm2(x + self.ffn(x)), weights


# -- the Memoria Transformer ---------------------------------------------------------------------


class Memoria(SegmentEncoder):
    """The Memoria Transformer: a Transformer whose layers read a Hebbian engram memory.

    Decoder host (``config.causal``, e.g. the sorting LM): the working memory of segment t is
    ``f_e`` of the detached final hidden states of segment t-1, so the memory never sees the
    current segment (no causal leakage); every layer cross-attends; the first segment of a
    document has no memory and runs as a plain Transformer. Encoder host (not causal): the
    working memory is ``f_e`` of the current segment's output of layer ``memory_layer`` and only
    the layers above it cross-attend.

    After the segment, each remembered engram's contribution -- the attention it received,
    averaged over the cross-attending layers, heads and real query tokens -- sets its lifespan
    increment (`EngramMemory.memorize`). Gradients reach ``f_e`` (through the current working
    memory) and the cross-attention weights only; stored engrams are constants and there is no
    back-propagation through time. Rows whose segment is all padding are not memorised.

    The memory is a list of one `EngramMemory` per row, never mutated by a forward pass (rows
    written to are copied, O(n²) for an n-engram memory). ``memory=None`` starts a document; the
    paper's periodic memory reset during training is the caller's (start new documents).

    Args:
        config: Module sizes.
        settings: The memory's sizes and lifespan rule (``working`` engrams are the
            abstractor's queries).
        memory_layer: Encoder host only: the (0-based) layer whose output makes the working
            memory; layers above it cross-attend; -1 takes the embeddings. Default: the last two
            layers cross-attend (``max(-1, layers - 3)``). Must be None for a causal config.
        seed: Seed of the tie-breaking generators (row i uses ``seed + i``).
        memory_device: Where the engram memories live (default: with the model). ``"cpu"``
            saves accelerator memory and makes the small graph-search steps cheaper.

    """

    def __init__(
        self,
        config: ModuleConfig,
        settings: EngramSettings,
        *,
        memory_layer: int | None = None,
        seed: int = 0,
        memory_device: torch.device | str | None = None,
    ) -> None:
        super().__init__(config)
        if config.causal and memory_layer is not None:
            raise ValueError(
                "memory_layer must be None for a causal config (the decoder host takes the "
                "previous segment's final hidden states)"
            )
        if memory_layer is None:
            memory_layer = -1 if config.causal else max(-1, config.layers - 3)
        if not -1 <= memory_layer <= config.layers - 2:
            raise ValueError(
                f"memory_layer must be in [-1, {config.layers - 2}] so that a layer above it "
                f"cross-attends, got {memory_layer}"
            )
        self.memory_layer = memory_layer
        self.embed = TokenEmbedding(config)
        self.core = _MemoriaCore(config.d_model, config.ffn, settings, seed, memory_device)
        self.layers = nn.ModuleList(
            MemoriaLayer(config) if i > memory_layer else TransformerLayer(config)
            for i in range(config.layers)
        )

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) given the per-row memories (None: a new document)."""
        memory, rows = self.core.prepare(memory, input_ids, attention_mask, self.embed.words.weight)
        x = self.embed(input_ids)  # (b, t, d)
        mask = segment_mask(attention_mask, self.config.causal)  # (b, 1, t, t)
        recall = None
        if self.config.causal:
            cue = _previous_states(memory, rows, x)
            recall = self.core.recall(memory, *cue) if cue is not None else None
        elif self.memory_layer == -1:
            recall = self.core.recall(memory, x, attention_mask)
        weights: list[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            if isinstance(layer, MemoriaLayer):
                x, w = layer(x, mask, recall)
                weights += [w] if w is not None else []
            else:
                x = layer(x, mask)
            if not self.config.causal and i == self.memory_layer:
                recall = self.core.recall(memory, x, attention_mask)
        if recall is not None:
            self.core.memorize(memory, recall, _average(weights, attention_mask))
        if self.config.causal:
            for i in rows.nonzero().squeeze(1).tolist():  # next segment's cue, (t_i, d)
                memory[i].cue = x[i, attention_mask[i].bool()].detach()
        return EncoderOutput(hidden=x, pooled=mean_pool(x, attention_mask), memory=memory)

    def merge_memory(self, updated: Any, previous: Any, rows: torch.Tensor) -> Any:
        """Per-row pick: ``updated[i]`` where ``rows[i]``, else ``previous[i]``.

        A forward pass already leaves the memory of rows without real tokens untouched, so this
        returns the same memories as ``updated``.
        """
        return _pick_rows(updated, previous, rows)


def _pick_rows(updated: Any, previous: Any, rows: torch.Tensor) -> Any:
    if previous is None:
        return updated
    return [u if bool(keep) else p for u, p, keep in zip(updated, previous, rows, strict=True)]


def _average(weights: list[torch.Tensor], query_mask: torch.Tensor) -> torch.Tensor | None:
    """Contributions: M_rem attention averaged over layers, heads and real queries -> (b, r)."""
    if not weights:
        return None
    return torch.stack([_contribution(w, query_mask) for w in weights]).mean(0)


def _previous_states(
    memory: list[EngramMemory], rows: torch.Tensor, like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Decoder host's cue: the previous segment's final states (b, t', d) and mask (b, t').

    Rows without a previous segment or without real tokens now get an empty mask (no working
    memory, nothing memorised); None when no row has a cue.
    """
    cues = [m.cue if bool(keep) else None for m, keep in zip(memory, rows)]
    if all(c is None for c in cues):
        return None
    longest = max(c.shape[0] for c in cues if c is not None)
    states = like.new_zeros(len(cues), longest, like.shape[-1])  # (b, t', d)
    mask = torch.zeros(len(cues), longest, dtype=torch.long, device=like.device)  # (b, t')
    for i, c in enumerate(cues):
        if c is not None:
            states[i, : c.shape[0]] = c
            mask[i, : c.shape[0]] = 1
    return states, mask


# -- BERT with Memoria ---------------------------------------------------------------------------


class MemoriaBert(SegmentEncoder):
    """A pretrained BERT-style `HFEncoder` with Memoria (the paper's "BERT with Memoria").

    Layers up to ``memory_layer`` run unchanged; ``f_e`` of their output on the current segment
    is the working memory; each layer above reads the memory between its self-attention block
    and its feed-forward block through a new `MemoryAttention` (pre-LN, output projection zero-
    initialised, so that at initialisation the network computes exactly what the pretrained
    BERT computes; the reads learn from there). ``pooled`` is the [CLS] (first) position, as for
    `HFEncoder`; ``hidden_size`` is the BERT's. Memory semantics are those of `Memoria`.

    Args:
        encoder: The pretrained encoder (``load_encoder("minilm")``; ``"tiny"`` for tests).
        memory_layer: 0-based index of the layer whose output makes the working memory
            (at most ``num_layers - 2``); the paper uses 9 of 12 for Hyperpartisan.
        settings: The memory's sizes and lifespan rule (the paper's Hyperpartisan setting:
            ``EngramSettings(64, 64, 64, 128, lifespan=12)``).
        seed: Seed of the new blocks' initialisation and of the tie-breaking generators.
        memory_device: Where the engram memories live (see `Memoria`).

    """

    def __init__(
        self,
        encoder: HFEncoder,
        memory_layer: int,
        settings: EngramSettings,
        *,
        seed: int = 0,
        memory_device: torch.device | str | None = None,
    ) -> None:
        bert = encoder.model.config
        config = bert_module_config(encoder)
        super().__init__(config)
        if not 0 <= memory_layer <= config.layers - 2:
            raise ValueError(
                f"memory_layer must be in [0, {config.layers - 2}] so that a layer above it "
                f"cross-attends, got {memory_layer}"
            )
        self.encoder = encoder
        self.memory_layer = memory_layer
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.core = _MemoriaCore(config.d_model, config.ffn, settings, seed, memory_device)
            self.reads = nn.ModuleList(
                MemoryAttention(
                    config.d_model,
                    config.heads,
                    config.dropout,
                    pre_norm=True,
                    zero_init=True,
                    eps=bert.layer_norm_eps,
                )
                for _ in range(config.layers - memory_layer - 1)
            )

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) given the per-row memories (None: a new document)."""
        memory, _ = self.core.prepare(
            memory, input_ids, attention_mask, self.core.abstractor.queries
        )
        x = self.encoder.run_stages(input_ids, attention_mask, 0, self.memory_layer + 2)
        recall = self.core.recall(memory, x, attention_mask)
        layer_mask = self.encoder._layer_mask(attention_mask, x.dtype)
        layers = self.encoder._layers()[self.memory_layer + 1 :]
        weights = []
        for layer, read in zip(layers, self.reads, strict=True):
            attended = layer.attention(x, layer_mask)
            attended = attended[0] if isinstance(attended, tuple) else attended  # (b, t, d)
            attended, w = read(attended, recall)
            if w is not None:
                weights.append(w)
            x = layer.output(layer.intermediate(attended), attended)  # (b, t, d)
        self.core.memorize(memory, recall, _average(weights, attention_mask))
        return EncoderOutput(hidden=x, pooled=x[:, 0], memory=memory)

    def merge_memory(self, updated: Any, previous: Any, rows: torch.Tensor) -> Any:
        """Per-row pick (see `Memoria.merge_memory`)."""
        return _pick_rows(updated, previous, rows)


__all__ = [
    "Abstractor",
    "EngramKind",
    "EngramMemory",
    "EngramSettings",
    "Memoria",
    "MemoriaBert",
    "MemoriaLayer",
    "MemoryAttention",
    "Retrieval",
]
