"""Local adaptation (MbPA / MbPA++): adapt a copy of the weights to retrieved neighbours.

MbPA++ (de Masson d'Autume et al., 2019) predicts a test input x with weights adapted to its K
nearest memories {(x_k, y_k)}:

    W_x = argmin_W~  λ ||W~ − W||²  −  Σ_k α_k log p(y_k | x_k; W~),   α_k = 1/K,

approximated by L gradient steps from W (SGD with momentum, as EM-in-LLL takes them); the
base weights W are never modified. `lifelong.inner_loop.local_adapt` is that inner loop,
shared by every strategy that adapts; `lifelong.scopes` says which weights it changes.

`LocalAdapter` applies it at test time along two paths:

* ``reference``: the paper's procedure, one test example at a time (adapt, predict, reset);
* ``fast``: many test examples at once with ``vmap``, where the frozen bottom of the network
  (everything below ``adapt_scope``) is computed once per retrieved neighbour and cached for the
  whole evaluation phase. With ``adapt_scope="all"`` it computes what the reference path does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import torch
from torch import nn
from torch.func import vmap

from lifelong.batch import Batch
from lifelong.encoders.base import attention_implementation
from lifelong.encoders.hf import PackedLayout
from lifelong.heads import reads_pooled_only
from lifelong.inner_loop import Params, local_adapt
from lifelong.lowrank import (
    TokenOwners,
    init_lora,
    lora_forward,
    owner_losses,
    vmapped_lora_logits,
)
from lifelong.memory import EpisodicWriter
from lifelong.model import PADDING_SCORE, Classifier
from lifelong.options import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Range,
    option_group,
)
from lifelong.runtime import eager_call
from lifelong.scopes import All, Head, Lora, Scope, parse_scope
from lifelong.training import TaskTraining, evaluating

if TYPE_CHECKING:
    from lifelong.strategy import StrategyContext


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
    the head reads nothing else (a classification head; a span head reads every token).
    """
    if stage == 0:
        return (ids, mask) if token_type_ids is None else (ids, mask, token_type_ids)
    types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    with torch.no_grad():
        x = model.encoder.run_stages(ids, mask, 0, stage, packed=True, **types)  # (n, t, d)
    if stage == model.encoder.num_layers + 1 and reads_pooled_only(model.head):
        return x[:, :1], mask[:, :1]
    return x, mask


@option_group
class LocalAdaptationOptions:
    """Local adaptation on K neighbours (de Masson d'Autume et al., 2019, §3.3 and §4.2).

    K = 32 neighbours, L = 30 steps and λ = 1e-3 are the paper's (K = 32 and λ = 1e-3 are also
    EM-in-LLL's ``n_neighbors`` / ``adapt_lambda``; its ``adapt_steps`` default is 20, we keep
    the paper's L). The paper gives no optimiser for the L steps: the step size 2e-3 and the
    momentum 0.9 are EM-in-LLL's (Daikon-Sun/EM-in-LLL ``settings.py`` ``--adapt_lr 2e-3`` and
    ``test.py`` ``optim.SGD(..., lr=args.adapt_lr, momentum=0.9)``). λ enters as
    ``λ ||W~ − W||²``, a plain sum of squares without a ½, as in the paper's objective and in
    ``test.py`` (``adapt_lambda * torch.sum((org_params - params)**2)``), so λ = 1e-3 means the
    same in all three.
    """

    k: PositiveInt = 32  # K: neighbours retrieved per input
    steps: NonNegativeInt = 30  # L: gradient steps of local adaptation (paper; EM-in-LLL: 20)
    l2: NonNegativeFloat = 1e-3  # λ: pull of the adapted weights back to the base weights
    adapt_lr: PositiveFloat = 2e-3  # SGD step size of local adaptation (EM-in-LLL)
    momentum: Annotated[float, Range(0, 1, max_open=True)] = 0.9  # heavy-ball μ (EM-in-LLL)
    adapt_scope: Scope = "all"  # "all" (the paper), "top<N>" (top N layers + head), "head", "lora"
    adapt_rank: PositiveInt = 8  # r of "lora" (Hu et al., 2021, §7.2: a small r suffices)


@option_group
class AdaptationOptions(LocalAdaptationOptions):
    """Test-time local adaptation of the MbPA family: what to adapt, along which path."""

    # fast: batched/cached (on CUDA with scope all and fast_chunk 0: the reference, faster there);
    # reference: one example at a time, full forward passes
    adapt_path: Literal["fast", "reference"] = "fast"
    retrieval: Literal["nearest", "random"] = "nearest"  # key network + memory, or MbPA++-rand
    # test examples per call; 0 = 64 head, lora 16 on CUDA (1 on CPU: measured faster), else 1
    fast_chunk: NonNegativeInt = 0


WORD_EMBEDDINGS = "encoder.model.embeddings.word_embeddings.weight"


def _compact_vocabulary(
    params: Params, ids: Sequence[torch.Tensor], name: str
) -> tuple[Params, list[torch.Tensor]]:
    """Restrict the word-embedding matrix to the rows ``ids`` use, renumbering the ids.

    Rows of tokens that appear in no neighbour get no gradient from the loss, and the L2 pull
    keeps them at W, so adapting only the used rows is exact, and it spares L dense updates of
    a (vocab, d) matrix. Row 0 stays the padding id, so ``padding_idx`` keeps its meaning.
    """
    flat = [t.reshape(-1) for t in ids]
    like = {"dtype": ids[0].dtype, "device": ids[0].device}
    used = torch.unique(torch.cat([*flat, torch.zeros(1, **like)]))
    lookup = torch.zeros(int(used.max()) + 1, **like)
    lookup[used] = torch.arange(len(used), **like)  # used[0] == 0: padding stays 0
    compact = {**params, name: params[name][used]}  # (rows, d)
    return compact, [lookup[t] for t in ids]


LORA_BYTES = 126.0
"""Peak activation bytes of lora adaptation per (owner, neighbour, token, hidden unit, layer).

Measured on the CPU (fp32): 16 owners of K = 32 neighbours of up to 128 tokens through MiniLM
(hidden 384, 6 layers) peaked at 19 GB: 19e9 / (16 * 32 * 128 * 384 * 6) = 126. On a GPU in
bf16 the activations take about half: the estimate errs on the safe side."""


def lora_chunk(encoder: nn.Module, k: int, length: int, device: torch.device) -> int:
    """Test examples per lora step on a GPU: as many as half its free memory holds, 1 to 64.

    The owners' activations grow with K, the tokens per row and the encoder's width and depth
    (`LORA_BYTES` each); a fixed 16 was sized for MiniLM and is four times too many for
    BERT-base on a 16 GB GPU.
    """
    free, _ = torch.cuda.mem_get_info(device)
    hidden = getattr(encoder, "hidden_size", 768)
    layers = getattr(encoder, "num_layers", 12)
    per_owner = LORA_BYTES * k * max(length, 1) * hidden * layers
    return int(min(64, max(1, 0.5 * free // per_owner)))


@dataclass
class _Stored:
    """One memory example at the adaptation stage: its rows (unpadded) and their labels.

    ``types`` are the rows' token-type ids at stage 0, where the rows are still token ids
    (later stages hold them already); ``None`` when the rows have none.
    """

    rows: list[torch.Tensor]
    labels: torch.Tensor
    types: list[torch.Tensor] | None = None


class LocalAdapter:
    """Predicts with weights locally adapted to each test example's retrieved memories.

    A test example retrieves its K nearest memory *examples*; their rows (one per text,
    candidate pair or context window, as the task kind expands them) are the adaptation
    batch, and the loss is the task kind's. The adapted weights predict every row of the test
    example.

    Args:
        model: The trained model; its parameters are only read.
        writer: The episodic memory (and key network) to retrieve from.
        options: K, L, λ, step size, momentum, scope, path and retrieval.
        seed: Seed of random retrieval.
        loss_scale: The static loss scale of the adaptation steps (`local_adapt`): the
            trainer's ``inner_loss_scale`` (fp16's, or 1).

    """

    def __init__(
        self,
        model: Classifier,
        writer: EpisodicWriter,
        options: AdaptationOptions,
        seed: int = 0,
        loss_scale: float = 1.0,
    ) -> None:
        self.model = model
        self.loss_scale = loss_scale
        self.writer = writer
        self.options = options
        self.scope = parse_scope(options.adapt_scope, model.encoder, options.adapt_rank)
        self.rng = np.random.default_rng(seed)
        self._cache: dict[int, _Stored] = {}  # slot -> its rows at scope.stage
        self.adapted = 0  # test examples predicted with adapted weights (for tests and logs)
        self.lora_seed = seed  # the seed of the low-rank deltas' A (`lifelong.lowrank.init_lora`)

    def reset_cache(self) -> None:
        """Forget cached neighbour representations (call whenever the model has changed)."""
        self._cache.clear()

    def neighbours(self, batch: Batch) -> np.ndarray:
        """Memory slots retrieved for each test example, shape (examples, min(K, size))."""
        memory = self.writer.memory
        k = min(self.options.k, len(memory))
        if self.options.retrieval == "random":
            return np.stack(
                [self.rng.choice(len(memory), k, replace=False) for _ in range(batch.num_examples)]
            )
        return memory.nearest(self.writer.keys(batch.examples), k)[1]

    def logits(self, batch: Batch) -> torch.Tensor:
        """Adapted row scores (n, ...); plain scores while memory is empty."""
        with evaluating(self.model):  # no dropout: adaptation and prediction are deterministic
            if len(self.writer.memory) == 0 or self.options.steps == 0:
                with torch.no_grad():
                    return self.model(*batch.inputs())
            slots = self.neighbours(batch)
            out = self.path(batch.input_ids.device)(batch, slots)
            self.adapted += batch.num_examples
            return out

    def path(self, device: torch.device) -> Callable[[Batch, np.ndarray], torch.Tensor]:
        """The adaptation path for ``adapt_path``, the scope and the device.

        ``fast`` with ``adapt_scope: all`` and the default ``fast_chunk`` (0: one example at a
        time) on CUDA runs the reference path: both compute the same adaptation, and on an
        H100 the fast path's one-example packed steps ran at 0.64x the reference's padded batch
        of K neighbours (`docs/guide/devices.md`, the first GPU run); on a CPU the fast path is
        the faster one. A ``fast_chunk`` the user set is kept (the vmapped fast path, not
        measured on a GPU). ``lora`` has a path of its own.
        """
        if isinstance(self.scope, Lora):
            return self.lora_logits
        if self.options.adapt_path == "reference":
            return self.reference_logits
        if isinstance(self.scope, All) and device.type == "cuda" and not self.options.fast_chunk:
            return self.reference_logits
        return self.fast_logits

    def _adapt_kwargs(self) -> dict[str, Any]:
        o = self.options
        return {
            "steps": o.steps,
            "lr": o.adapt_lr,
            "l2": o.l2,
            "momentum": o.momentum,
            "loss_scale": self.loss_scale,
        }

    # -- the paper's procedure ---------------------------------------------------------------
    def reference_logits(self, batch: Batch, slots: np.ndarray) -> torch.Tensor:
        """Adapt, predict and reset for one test example at a time (full forward passes)."""
        out = []
        for i in range(batch.num_examples):
            neighbours = self.writer.batch(slots[i])

            def loss(p: Params, nb: Batch = neighbours) -> torch.Tensor:
                logits = eager_call(self.model, p, nb.inputs())
                return self.model.criterion(logits, nb)

            adapted = local_adapt(loss, self.scope.params(self.model), **self._adapt_kwargs())
            test = batch.select(batch.example_rows(i))  # its rows, trimmed to their length
            with torch.no_grad():
                logits = eager_call(self.model, adapted, test.inputs())
            if logits.dim() == 3:  # token scores: pad back to the batch's t
                pad = batch.input_ids.shape[1] - logits.shape[1]
                logits = nn.functional.pad(logits, (0, 0, 0, pad), value=PADDING_SCORE)
            out.append(logits)
        return torch.cat(out)  # (n, num_labels) or (n, t, 2), rows in batch order

    # -- batched over test examples ------------------------------------------------------------
    def fast_logits(self, batch: Batch, slots: np.ndarray) -> torch.Tensor:
        """Adapt many test examples, reusing cached prefixes (``vmap`` over one-row examples)."""
        stage = self.scope.stage
        with torch.no_grad():
            tests = self._prefix(batch)  # (n, t, ...), (n, t)[, (n, t) token types at stage 0]
        self._fill_cache(slots)
        chunk = self.options.fast_chunk or (64 if isinstance(self.scope, Head) else 1)
        if batch.groups is not None:  # several rows per example: shapes differ, no vmap
            chunk = 1
        # one example at a time runs the layers on real tokens only; vmap cannot (data-dependent)
        stage_kwargs = {"start": stage, "packed": chunk == 1}
        params = self.scope.params(self.model)
        adapt_kwargs = self._adapt_kwargs()
        model = self.model

        def one(p: Params, nb: Batch, test: tuple[torch.Tensor, ...]) -> torch.Tensor:
            def loss(q: Params) -> torch.Tensor:
                logits = eager_call(model, q, nb.inputs(), stage_kwargs)
                return model.criterion(logits, nb)

            adapted = local_adapt(loss, p, **adapt_kwargs)
            return eager_call(model, adapted, test, stage_kwargs)

        if chunk == 1:
            out = []
            for i in range(batch.num_examples):
                rows = torch.as_tensor(batch.example_rows(i), device=batch.input_ids.device)
                nb = self._neighbour_batch(slots[i])
                test, p = [t[rows] for t in tests], params  # its rows' inputs at the stage
                if stage == 0:  # adapt only the embedding rows these inputs use
                    p, (nb.input_ids, test[0]) = _compact_vocabulary(
                        params, [nb.input_ids, test[0]], WORD_EMBEDDINGS
                    )
                out.append(one(p, nb, tuple(test)))
            return torch.cat(out).detach()
        stacked, ny = self._stacked_neighbours(slots)  # (n, k, t', ...), (n, k, t')[...], (n, k)

        def vmapped(p: Params, nb: Any, ny: Any, test: Any) -> torch.Tensor:
            types = nb[2] if len(nb) > 2 else None  # (k, t') at stage 0, when rows have them
            neighbours = Batch(nb[0], nb[1], ny, token_type_ids=types)
            return one(p, neighbours, tuple(t[None] for t in test))[0]

        out = []
        for s in range(0, len(batch), chunk):
            part = slice(s, s + chunk)
            nb, test = [t[part] for t in stacked], [t[part] for t in tests]
            p = params
            if stage == 0:
                p, (nb[0], test[0]) = _compact_vocabulary(params, [nb[0], test[0]], WORD_EMBEDDINGS)
            with attention_implementation(self.model.encoder, "eager"):
                vmapped_one = vmap(vmapped, in_dims=(None, 0, 0, 0))
                out.append(vmapped_one(p, tuple(nb), ny[part], tuple(test)))
        return torch.cat(out).detach()  # (n, num_labels)

    # -- low-rank deltas, batched over test examples -------------------------------------------
    def lora_logits(
        self, batch: Batch, slots: np.ndarray, batching: Literal["packed", "vmap"] = "packed"
    ) -> torch.Tensor:
        """Adapt a rank-r delta per test example, ``fast_chunk`` examples per base matmul.

        See `lifelong.lowrank`. The ``reference`` path takes one example at a time.
        ``batching`` ``vmap`` batches owners with ``torch.func.vmap`` instead of packing
        their real tokens (`lifelong.lowrank.vmapped_lora_logits`; one-row examples only):
        measured against packing by the local-adaptation bench, not used by any strategy.
        """
        if batching == "vmap":
            return self._vmapped_lora_logits(batch, slots)
        with torch.no_grad():
            tests, mask = self._prefix(batch)[:2]  # (rows, t, d), (rows, t) at stage 1
        # one owner per chunk on a CPU: with 16, 512 neighbour rows' activations (19 GB peak on
        # MiniLM) made a step 2x slower per example than 16 one-owner chunks (README bench);
        # on a GPU as many as half its free memory holds (`lora_chunk`)
        batched = self.options.adapt_path == "fast" and tests.device.type == "cuda"
        chunk = self.options.fast_chunk or (
            lora_chunk(self.model.encoder, self.options.k, tests.shape[1], tests.device)
            if batched
            else 1
        )
        groups = batch.row_groups
        out = []
        for s in range(0, batch.num_examples, chunk):
            owners = range(s, min(s + chunk, batch.num_examples))
            rows = torch.nonzero((groups >= s) & (groups < owners.stop)).squeeze(1)
            bounds = [
                0,
                *torch.bincount(groups[rows] - s, minlength=len(owners)).cumsum(0).tolist(),
            ]
            adapted = self._adapt_lora(slots[s : owners.stop])
            with torch.no_grad():
                out.append(lora_forward(self.model, adapted, tests[rows], mask[rows], bounds))
        return torch.cat(out)  # (n, num_labels) or (n, t, 2), rows in batch order

    def _adapt_lora(self, slots: np.ndarray) -> Params:
        """The adapted deltas of test examples whose neighbours are ``slots`` (n, k)."""
        self._fill_cache(slots)
        neighbours, bounds = self._owner_rows(slots)
        parts = [
            neighbours.select(range(bounds[o], bounds[o + 1]), trim=False)
            for o in range(len(slots))
        ]
        for part in parts:  # each owner's examples numbered from 0
            part.groups = None if part.groups is None else part.groups - part.groups[0]
        model = self.model
        start = init_lora(model, self.scope.rank, len(slots), seed=self.lora_seed)

        x, mask = neighbours.input_ids, neighbours.attention_mask  # (R, t, d), (R, t)
        layout = PackedLayout.of(mask)  # the same rows at every step
        tokens = TokenOwners.of_bounds(mask, bounds)  # likewise: one host copy, not one a step

        def loss(p: Params) -> torch.Tensor:
            logits = lora_forward(model, p, x, mask, bounds, layout, tokens)
            return owner_losses(model, logits, parts, bounds)

        with torch.no_grad():  # torch.func.grad still differentiates inside
            return self._lora_adapt(loss, start)

    def _lora_adapt(self, loss: Callable[[Params], torch.Tensor], start: Params) -> Params:
        """`local_adapt` from the deltas ``start`` with the scope's exact λ||BA||² pull."""
        kwargs = self._adapt_kwargs()
        return local_adapt(loss, start, pull=self.scope.pull(start, kwargs["l2"]), **kwargs)

    def _vmapped_lora_logits(self, batch: Batch, slots: np.ndarray) -> torch.Tensor:
        if batch.groups is not None:
            raise ValueError("vmap batching of lora needs one-row examples")
        with torch.no_grad():
            tests, mask = self._prefix(batch)[:2]  # (n, t, d), (n, t) at stage 1
        self._fill_cache(slots)
        chunk = self.options.fast_chunk or 16
        out = []
        for s in range(0, len(batch), chunk):
            part = slice(s, s + chunk)
            (x, nmask), labels = self._stacked_neighbours(slots[part])  # (c, k, t', d) ...
            start = init_lora(self.model, self.scope.rank, len(x), seed=self.lora_seed)
            tested = (tests[part][:, None], mask[part][:, None])  # (c, 1, t, d), (c, 1, t)
            with torch.no_grad(), attention_implementation(self.model.encoder, "eager"):
                out.append(
                    vmapped_lora_logits(
                        self.model, start, (x, nmask, labels), tested, self._lora_adapt
                    )
                )
        return torch.cat(out)  # (n, num_labels)

    def _owner_rows(self, slots: np.ndarray) -> tuple[Batch, list[int]]:
        """The cached rows of every owner's neighbours as one batch, owners in order.

        Returns:
            The rows at the adaptation stage (their representation in ``input_ids``), with
            labels and, for multi-row examples, groups numbering the examples across owners;
            and the owners' row bounds (owner o: ``bounds[o]:bounds[o + 1]``).

        """
        stored = [[self._cache[int(s)] for s in row] for row in slots]
        rows = [r for owner in stored for item in owner for r in item.rows]
        x, mask = _pad_cached(rows)  # (R, t, d), (R, t)
        labels = torch.cat([item.labels for owner in stored for item in owner])
        sizes = [len(item.rows) for owner in stored for item in owner]
        groups = None
        if any(size > 1 for size in sizes):
            groups = torch.repeat_interleave(
                torch.arange(len(sizes), device=x.device), torch.tensor(sizes, device=x.device)
            )
        bounds = np.cumsum([0] + [sum(len(item.rows) for item in owner) for owner in stored])
        return Batch(x, mask, labels, groups), [int(b) for b in bounds]

    def _prefix(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        return frozen_prefix(self.model, self.scope.stage, *batch.inputs())

    def _fill_cache(self, slots: np.ndarray) -> None:
        """Compute the prefix of every retrieved memory example not cached yet, 64 at a time."""
        missing = np.array(sorted(set(slots.reshape(-1).tolist()) - set(self._cache)), np.int64)
        for s in range(0, len(missing), 64):
            part = missing[s : s + 64]
            nb = self.writer.batch(part)
            with torch.no_grad():
                x, mask, *types = self._prefix(nb)  # token types only at stage 0
            lengths = mask.sum(dim=1).tolist()
            for g, slot in enumerate(part.tolist()):
                rows = nb.example_rows(g).tolist()
                self._cache[slot] = _Stored(
                    [x[r, : lengths[r]].clone() for r in rows],
                    nb.labels[rows].clone(),
                    [types[0][r, : lengths[r]].clone() for r in rows] if types else None,
                )

    def _neighbour_batch(self, slots: np.ndarray) -> Batch:
        """The cached rows of some memory examples as one padded batch, grouped by example."""
        stored = [self._cache[int(s)] for s in slots]
        rows = [r for item in stored for r in item.rows]
        x, mask = _pad_cached(rows)
        groups = torch.cat(
            [
                torch.full((len(item.rows),), g, dtype=torch.long, device=x.device)
                for g, item in enumerate(stored)
            ]
        )
        types = [t for item in stored for t in item.types or ()]  # stage 0 only
        labels = torch.cat([item.labels for item in stored])
        return Batch(
            x, mask, labels, groups, token_type_ids=_pad_cached(types)[0] if types else None
        )

    def _stacked_neighbours(
        self, slots: np.ndarray
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """One-row memory examples stacked per test example.

        Returns:
            Their model inputs at the adaptation stage, (n, k, t', ...) and the mask (n, k, t')
            (and their token types (n, k, t') at stage 0 when the rows have them), and their
            labels (n, k, ...).

        """
        stored = [self._cache[int(s)] for s in slots.reshape(-1)]
        labels = torch.stack([item.labels[0] for item in stored])
        x, mask = _pad_cached([item.rows[0] for item in stored])
        inputs = [x.view(*slots.shape, *x.shape[1:]), mask.view(*slots.shape, x.shape[1])]
        types = [item.types[0] for item in stored if item.types]  # stage 0 only
        if types:
            inputs.append(_pad_cached(types)[0].view(*slots.shape, x.shape[1]))  # (n, k, t')
        return tuple(inputs), labels.view(*slots.shape, *labels.shape[1:])


def _pad_cached(rows: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad cached rows (t_i, ...) into (n, t, ...) and a mask (n, t)."""
    width = max(len(r) for r in rows)
    like = rows[0]
    x = like.new_zeros((len(rows), width, *like.shape[1:]))
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=like.device)
    for i, row in enumerate(rows):
        x[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return x, mask


class MemoryAdaptation:
    """What MbPA and MbPA++ share: train with `TaskTraining`, predict with local adaptation.

    Training is ordinary fine-tuning (EM-in-LLL's optional per-task optimiser and head
    dropout); every prediction adapts the weights to the test input's K memories in
    ``writer``'s episodic memory (`LocalAdapter`). Call `weights_changed` after every update,
    so that the adapter's cached neighbour prefixes are recomputed.

    Args:
        context: Model, learning rate, runtime and seed.
        options: The strategy's options (`AdaptationOptions`, `TaskOptimizerOptions`,
            `HeadDropoutOptions`, ``max_grad_norm``).
        writer: The episodic writer whose memory the adaptation reads.

    """

    def __init__(self, context: StrategyContext, options: Any, writer: EpisodicWriter) -> None:
        self.training = TaskTraining(context.model, context.lr, options, context.runtime)
        self.adapter = LocalAdapter(
            context.model,
            writer,
            options,
            seed=context.seed,
            loss_scale=self.training.trainer.inner_loss_scale,
        )

    def predict(self, batch: Batch) -> torch.Tensor:
        """The locally adapted row scores; the base weights stay untouched."""
        return self.adapter.logits(batch)

    def weights_changed(self) -> None:
        """Forget cached neighbour prefixes (stale once the weights have moved)."""
        self.adapter.reset_cache()

    def resumable_parts(self) -> dict[str, Any]:
        """Trainer, schedule counter (if any) and the random retrieval's generator."""
        return {**self.training.resumable_parts(), "retrieval": self.adapter.rng}
