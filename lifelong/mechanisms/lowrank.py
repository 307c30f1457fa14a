"""Low-rank local adaptation: a rank-r delta per test example on every layer (adapt_scope lora).

MbPA++'s local adaptation (de Masson d'Autume et al., 2019, §3.3) fits a copy of the whole
network to each test example's K neighbours. Batched over test examples, every example carries
its own copy of every weight matrix, so the heavy matmuls become per-example batched matmuls and
a GPU holds one model copy per example. Here each test example i adapts a low-rank delta
instead, as LoRA parametrises fine-tuning (Hu et al., 2021, §4.1): for every linear projection
W (d_out, d_in) of every encoder layer (attention query, key, value and output, feed-forward in
and out; `lifelong.encoders.hf.PROJECTIONS`),

    W̃_i = W + B_i A_i,    A_i (r, d_in),  B_i (d_out, r),

and the head is adapted in full, as in the other scopes. The objective is MbPA++'s, on the
deltas: the mean neighbour loss (α_k = 1/K) plus λ‖W̃_i − W‖² = λ‖B_i A_i‖² summed over the
projections (computed exactly, not ‖A‖² + ‖B‖²) plus λ‖H̃_i − H‖² for the head, minimised with
the same L steps (SGD with momentum, `lifelong.mechanisms.inner_loop.local_adapt`).

The base weights are never copied: the neighbours of all test examples in a chunk go through
each base projection as one matmul over their real tokens (`HFEncoder.run_stages` with
``packed=True``), and only x·A_iᵀ·B_iᵀ is per example (two matmuls of width r on the run of
example i's tokens, `TokenOwners`). The embeddings are not adapted, so the
neighbours' embedding outputs are computed once per distinct neighbour and cached.

Initialisation: B = 0 as in LoRA, so step 0 is the base model exactly. LoRA draws A from
Kaiming-uniform and scales BA by α/r; we draw A with orthonormal rows (A Aᵀ = I_r) and no scale,
so that a step on B moves W̃ by −lr·G·AᵀA, the full gradient step's −lr·G projected onto r input
directions: with the same ``adapt_lr`` the low-rank steps are on `all`'s scale, and at full rank
(r = d_in, AᵀA = I) the first step is exactly `all`'s on these weights. The rank is capped at
each projection's input width, where B A can express any update of W.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from lifelong.batch import Batch
from lifelong.encoders.base import EncoderOutput, attention_implementation
from lifelong.encoders.hf import PROJECTIONS, PackedLayout, packed_layer
from lifelong.mechanisms.inner_loop import local_adapt
from lifelong.mechanisms.neighbours import Adapting, in_batch_order, trimmed, width_chunks
from lifelong.model import Classifier

Params = dict[str, torch.Tensor]

LORA_A = ".lora_a"
LORA_B = ".lora_b"
HEAD = "head."


def lora_modules(model: Classifier) -> list[str]:
    """Paths (in ``model``) of the projections that get low-rank deltas, bottom layer first.

    Raises:
        ValueError: The encoder has no stage-wise BERT-style layers (``num_layers == 0``).

    """
    layers = model.encoder.num_layers
    if layers == 0:
        raise ValueError(
            "adapt_scope 'lora' needs a BERT-style encoder with stage-wise layers; "
            "memory-augmented encoders support adapt_scope 'head' only"
        )
    prefixes = [f"encoder.{model.encoder.layer_prefix(i)}" for i in range(layers)]
    return [prefix + name for prefix in prefixes for name in PROJECTIONS]


def init_lora(model: Classifier, rank: int, owners: int, seed: int = 0) -> Params:
    """Step-0 deltas of ``owners`` test examples: orthonormal A, zero B, the base head.

    Every owner starts from the same A (drawn from ``seed``, one per projection in
    `lora_modules` order), so an example's prediction does not depend on which others share
    its chunk.

    Args:
        model: The model whose projections and head are adapted.
        rank: r, capped at each projection's input width.
        owners: Test examples adapted together (the leading dimension of every tensor).
        seed: Seed of A.

    Returns:
        ``{path + ".lora_a": (owners, r, d_in), path + ".lora_b": (owners, d_out, r)}`` for
        every projection, and ``{"head.<name>": (owners, *shape)}`` for the head's parameters.

    """
    generator = torch.Generator().manual_seed(seed)
    params: Params = {}
    for path in lora_modules(model):
        weight = model.get_submodule(path).weight  # (d_out, d_in)
        d_out, d_in = weight.shape
        r = min(rank, d_in)
        gaussian = torch.randn(d_in, r, generator=generator, dtype=torch.float64)
        rows = torch.linalg.qr(gaussian).Q.T.to(weight)  # (r, d_in), orthonormal rows
        params[path + LORA_A] = rows.expand(owners, r, d_in).clone()
        params[path + LORA_B] = weight.new_zeros(owners, d_out, r)
    for name, p in model.head.named_parameters():
        params[HEAD + name] = p.detach().expand(owners, *p.shape).clone()
    return params


def lora_pull(params: Params, anchor: Params, l2: float) -> Params:
    """The gradient of λ(Σ‖B A‖² + ‖H̃ − H‖²), per owner, in closed form.

    With M = B A: d‖M‖²/dA = 2 BᵀB A and d‖M‖²/dB = 2 B A Aᵀ (r × r products, never the
    (d_out, d_in) matrix M); the head's term is 2λ(H̃ − H) against ``anchor``. The leading
    owner dimension may be absent (one owner, e.g. under ``vmap``).
    """
    pull: Params = {}
    for name, value in params.items():
        if name.endswith(LORA_A):
            b = params[name[: -len(LORA_A)] + LORA_B]  # (n, d_out, r)
            pull[name] = 2 * l2 * (b.mT @ b) @ value  # (n, r, d_in)
        elif name.endswith(LORA_B):
            a = params[name[: -len(LORA_B)] + LORA_A]  # (n, r, d_in)
            pull[name] = 2 * l2 * value @ (a @ a.mT)  # (n, d_out, r)
        else:
            pull[name] = 2 * l2 * (value - anchor[name])
    return pull


def lora_penalty(params: Params, anchor: Params) -> torch.Tensor:
    """Σ‖B A‖² + ‖H̃ − H‖² per owner, shape (n,): the pull's value (for tests and logs)."""
    total = 0
    for name, value in params.items():
        if name.endswith(LORA_A):
            b = params[name[: -len(LORA_A)] + LORA_B]
            total = total + (b @ value).square().sum(dim=(1, 2))
        elif not name.endswith(LORA_B):
            total = total + (value - anchor[name]).square().flatten(1).sum(dim=1)
    return total


@dataclass(frozen=True)
class TokenOwners:
    """How many real tokens of a packed batch each test example owns.

    Rows are grouped by owner (owner 0's rows first), so the real tokens, taken in row-major
    order, are too: owner o's tokens are one contiguous run, and its x·A_oᵀ·B_oᵀ is two small
    matmuls on a view of that run. (An earlier version scattered the tokens into an (owners,
    most tokens) grid for two batched matmuls; filling and copying that padded grid for every
    projection cost more than the matmuls, see the README's local-adaptation bench.)

    Attributes:
        counts: Real tokens of each owner, in owner order; empty: one owner holds every token
            (`ONE_OWNER`, which needs no count, so no copy from the device).

    """

    counts: tuple[int, ...]

    @classmethod
    def of(cls, row_owner: torch.Tensor, mask: torch.Tensor, owners: int) -> TokenOwners:
        """From each row's owner (R,), non-decreasing, and the rows' mask (R, t)."""
        if len(row_owner) > 1 and bool((row_owner[1:] < row_owner[:-1]).any()):
            raise ValueError("rows must be grouped by owner, owner 0 first")
        per_row = mask.bool().sum(dim=1)  # (R,)
        counts = torch.zeros(owners, dtype=per_row.dtype, device=mask.device)
        counts = counts.index_add(0, row_owner, per_row)  # (owners,)
        return cls(tuple(counts.tolist()))

    @classmethod
    def of_bounds(cls, mask: torch.Tensor, bounds: Sequence[int]) -> TokenOwners:
        """From the rows' mask (R, t) and the owners' row bounds (owner o: ``bounds[o]:[o+1]``).

        One device-to-host copy of the rows' lengths; a caller that runs many steps on the
        same rows makes it once and passes it to `lora_forward`.
        """
        per_row = mask.bool().sum(dim=1).tolist()  # (R,) on the host
        return cls(tuple(sum(per_row[bounds[o] : bounds[o + 1]]) for o in range(len(bounds) - 1)))

    def lowrank(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Each token's x·A_oᵀ·B_oᵀ with its owner o's delta.

        Args:
            x: Token vectors (N, d_in), in the order `of` was given.
            a: A per owner (n, r, d_in).
            b: B per owner (n, d_out, r).

        Returns:
            (N, d_out).

        """
        if not self.counts:  # one owner: every token
            return (x @ a[0].mT) @ b[0].mT
        runs = x.split(self.counts)  # owner o's tokens (N_o, d_in), views
        return torch.cat([(run @ a[o].mT) @ b[o].mT for o, run in enumerate(runs)])


ONE_OWNER = TokenOwners(())
"""All tokens belong to one owner (a meta-step's or one example's deltas)."""


def lora_forward(
    model: Classifier,
    params: Params,
    x: torch.Tensor,
    mask: torch.Tensor,
    bounds: Sequence[int],
    layout: PackedLayout | None = None,
    tokens: TokenOwners | None = None,
) -> torch.Tensor:
    """Logits of rows given at stage 1 (embedding outputs), each owner with its own deltas.

    Args:
        model: The model; its base weights are read, never changed.
        params: Per-owner deltas and heads (`init_lora`'s layout, n = ``len(bounds) − 1``).
        x: Embedding outputs of the rows (R, t, d), rows grouped by owner.
        mask: Their attention mask (R, t).
        bounds: Owner o's rows are ``bounds[o]:bounds[o + 1]``.
        layout: ``PackedLayout.of(mask)``, kept by a caller that runs many steps on the
            same rows.
        tokens: ``TokenOwners.of_bounds(mask, bounds)``, likewise (made here if not given).

    Returns:
        Row logits, (R, num_labels) or (R, t, 2), in row order.

    """
    owners = len(bounds) - 1
    if tokens is None:
        tokens = ONE_OWNER if owners == 1 else TokenOwners.of_bounds(mask, bounds)
    deltas = {
        model.get_submodule(path): (params[path + LORA_A], params[path + LORA_B])
        for path in lora_modules(model)
    }

    def project(name: str, module: nn.Module, h: torch.Tensor) -> torch.Tensor:
        return module(h) + tokens.lowrank(h, *deltas[module])

    encoded = model.encoder.resume(x, mask, 1, packed=True, project=project, layout=layout)
    heads = {k[len(HEAD) :]: v for k, v in params.items() if k.startswith(HEAD)}
    return torch.cat(
        [
            functional_call(
                model.head,
                {k: v[o] for k, v in heads.items()},
                (encoded.rows(slice(bounds[o], bounds[o + 1])),),
            )
            for o in range(owners)
        ]
    )


def owner_losses(
    model: Classifier, logits: torch.Tensor, batches: Sequence[Batch], bounds: Sequence[int]
) -> torch.Tensor:
    """Each owner's task loss on its rows, summed over owners (their gradients stay apart)."""
    return sum(
        model.criterion(logits[bounds[o] : bounds[o + 1]], batch) for o, batch in enumerate(batches)
    )


def lora_forward_padded(
    model: Classifier, params: Params, x: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """`lora_forward` for one owner with unbatched deltas, on every (padded) position.

    The form ``torch.func.vmap`` can batch over owners (`vmapped_lora_logits`): no
    data-dependent packing, plain x·Aᵀ·Bᵀ for the deltas.

    Args:
        model: The model.
        params: One owner's deltas (A (r, d_in), B (d_out, r)) and head.
        x: Embedding outputs (R, t, d).
        mask: Their attention mask (R, t).

    """
    deltas = {
        model.get_submodule(path): (params[path + LORA_A], params[path + LORA_B])
        for path in lora_modules(model)
    }

    def project(name: str, module: nn.Module, h: torch.Tensor) -> torch.Tensor:
        a, b = deltas[module]
        return module(h) + (h @ a.mT) @ b.mT

    encoder = model.encoder
    layers = encoder.model.encoder.layer
    layout = PackedLayout.dense(mask)  # every position, one block: vmap-safe
    tokens = x.reshape(-1, x.shape[-1])  # (R·t, d)
    for layer in layers:
        tokens = packed_layer(layer, tokens, layout, project)
    encoded = EncoderOutput(tokens.view(x.shape), encoder.pool(tokens.view(x.shape)))
    heads = {k[len(HEAD) :]: v for k, v in params.items() if k.startswith(HEAD)}
    return functional_call(model.head, heads, (encoded,))


def vmapped_lora_logits(
    model: Classifier,
    start: Params,
    neighbours: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    tests: tuple[torch.Tensor, torch.Tensor],
    adapt: Callable[..., Params],
) -> torch.Tensor:
    """Low-rank adaptation batched with ``torch.func.vmap`` over owners instead of packing.

    The alternative to `lora_forward`'s explicit batching that the issue asked to measure
    (`experiments/bench/local_adaptation.py`, row ``lora r=8 (vmap)``): each owner's K
    neighbours are padded to a common width, so every owner has the same shapes (one-row
    examples only; owners of similar widths share a chunk, `width_chunks`); the base weights
    are unbatched, so their matmuls are still one call.

    Args:
        model: The model (eager attention: vmap has no rule for the CPU SDPA backward).
        start: Step-0 parameters of every owner (`init_lora`).
        neighbours: Embedding outputs (n, k, t, d), mask (n, k, t) and labels (n, k).
        tests: Each owner's test row: embedding outputs (n, 1, t', d) and mask (n, 1, t').
        adapt: `local_adapt` with every option but the loss and the parameters bound.

    Returns:
        Logits of the test rows, (n, num_labels).

    """

    def one(p: Params, x, mask, labels, tx, tmask) -> torch.Tensor:  # noqa: ANN001
        def loss(q: Params) -> torch.Tensor:
            logits = lora_forward_padded(model, q, x, mask)
            return model.criterion(logits, Batch(x, mask, labels))

        return lora_forward_padded(model, adapt(loss, p), tx, tmask)[0]

    return vmap(one)(start, *neighbours, *tests)


# ---------------------------------------------------------------------------------------------
# The low-rank path of local adaptation (``adapt_scope: lora``)
# ---------------------------------------------------------------------------------------------


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


def lora_logits(
    adapter: Adapting,
    batch: Batch,
    slots: np.ndarray,
    batching: Literal["packed", "vmap"] = "packed",
) -> torch.Tensor:
    """Adapt a rank-r delta per test example, ``fast_chunk`` examples per base matmul.

    See `lifelong.mechanisms.lowrank`. The ``reference`` path takes one example at a time.
    ``batching`` ``vmap`` batches owners with ``torch.func.vmap`` instead of packing
    their real tokens (`lifelong.mechanisms.lowrank.vmapped_lora_logits`; one-row examples only):
    measured against packing by the local-adaptation bench, not used by any strategy.
    """
    if batching == "vmap":
        return _vmapped_lora_logits(adapter, batch, slots)
    with torch.no_grad():
        tests, mask = adapter.cache.prefix(batch)[:2]  # (rows, t, d), (rows, t) at stage 1
    # one owner per chunk on a CPU: with 16, 512 neighbour rows' activations (19 GB peak on
    # MiniLM) made a step 2x slower per example than 16 one-owner chunks (README bench);
    # on a GPU as many as half its free memory holds (`lora_chunk`)
    batched = adapter.options.adapt_path == "fast" and tests.device.type == "cuda"
    chunk = adapter.options.fast_chunk or (
        lora_chunk(adapter.model.encoder, adapter.options.k, tests.shape[1], tests.device)
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
        adapted = adapt_lora(adapter, slots[s : owners.stop])
        with torch.no_grad():
            out.append(lora_forward(adapter.model, adapted, tests[rows], mask[rows], bounds))
    return torch.cat(out)  # (n, num_labels) or (n, t, 2), rows in batch order


def adapt_lora(adapter: Adapting, slots: np.ndarray) -> Params:
    """The adapted deltas of test examples whose neighbours are ``slots`` (n, k)."""
    adapter.cache.fill(slots)
    neighbours, bounds = adapter.cache.owner_rows(slots)
    parts = [
        neighbours.select(range(bounds[o], bounds[o + 1]), trim=False) for o in range(len(slots))
    ]
    for part in parts:  # each owner's examples numbered from 0
        part.groups = None if part.groups is None else part.groups - part.groups[0]
    model = adapter.model
    start = init_lora(model, adapter.scope.rank, len(slots), seed=adapter.lora_seed)

    x, mask = neighbours.input_ids, neighbours.attention_mask  # (R, t, d), (R, t)
    layout = PackedLayout.of(mask)  # the same rows at every step
    tokens = TokenOwners.of_bounds(mask, bounds)  # likewise: one host copy, not one a step

    def loss(p: Params) -> torch.Tensor:
        logits = lora_forward(model, p, x, mask, bounds, layout, tokens)
        return owner_losses(model, logits, parts, bounds)

    with torch.no_grad():  # torch.func.grad still differentiates inside
        return partial(lora_adapt, adapter)(loss, start)


def lora_adapt(adapter: Adapting, loss: Callable[[Params], torch.Tensor], start: Params) -> Params:
    """`local_adapt` from the deltas ``start`` with the scope's exact λ||BA||² pull."""
    kwargs = adapter.adapt_kwargs()
    return local_adapt(loss, start, pull=adapter.scope.pull(start, kwargs["l2"]), **kwargs)


def _vmapped_lora_logits(adapter: Adapting, batch: Batch, slots: np.ndarray) -> torch.Tensor:
    if batch.groups is not None:
        raise ValueError("vmap batching of lora needs one-row examples")
    with torch.no_grad():
        tests, mask = adapter.cache.prefix(batch)[:2]  # (n, t, d), (n, t) at stage 1
    adapter.cache.fill(slots)
    chunk = adapter.options.fast_chunk or 16
    out = []
    chunks = width_chunks(adapter.cache.widths(slots), chunk)  # similar widths together
    for part in chunks:
        (x, nmask), labels = adapter.cache.stacked(slots[part])  # (c, k, t', d) ...
        start = init_lora(adapter.model, adapter.scope.rank, len(x), seed=adapter.lora_seed)
        picked = torch.as_tensor(part, device=tests.device)
        tx, tmask = trimmed([tests[picked], mask[picked]], mask[picked])  # (c, t, d), (c, t)
        tested = (tx[:, None], tmask[:, None])  # (c, 1, t, d), (c, 1, t)
        with torch.no_grad(), attention_implementation(adapter.model.encoder, "eager"):
            out.append(
                vmapped_lora_logits(
                    adapter.model, start, (x, nmask, labels), tested, partial(lora_adapt, adapter)
                )
            )
    return in_batch_order(out, chunks)  # (n, num_labels)
