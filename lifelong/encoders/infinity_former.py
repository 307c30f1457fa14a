"""∞-former (Martins et al., 2022): a Transformer with an unbounded continuous long-term memory.

Every layer attends to the current segment together with a short-term memory (STM, a
Transformer-XL-style cache of the previous segments' detached layer inputs) and, in addition, to a
continuous long-term memory (LTM): a signal ``X̄(t) = Bᵀ ψ(t)`` over ``t ∈ [0, 1]`` written as
``N`` Gaussian radial basis functions ψ with coefficients ``B`` (N, d) fitted by ridge regression.
Each query reads the LTM with a Gaussian density ``N(t; μ, σ²)`` whose mean and variance come from
its scores against the LTM keys; the expectation of ψ under that density has a closed form.

The memory is unbounded: after each segment the old signal is contracted into ``[0, τ]`` (sampled
at ``M`` points, linearly spaced or, with *sticky memories*, where the previous step's attention
went), the vectors evicted from the STM are placed in ``(τ, 1]``, and ``B`` is refitted. ``B`` keeps
its shape (N, d); old content loses resolution geometrically.

Choices this implementation makes where the paper leaves them open (and, where the reference code
settles one, what it does):

* Positions (``positions``): Transformer-XL's relative attention over ``[STM; segment]``, as the
  reference builds its ∞-former (deep-spin/infinite-former, ``sorting/mem_transformer.py``);
  the LTM is read with the same projected query. ``positions="distance-bias"`` is what this
  module did before 2026-11-27: a learned per-head scalar per clipped distance and no other
  position signal, which left the ∞-former far behind Transformer-XL in `lifelong lm`
  (docs/guide/encoders.md, "The module table", gives the ablation).
* Update order: at the end of segment ``t`` the STM keeps the newest ``short_term_length`` real
  layer inputs; the real ones pushed out are stored as *pending* vectors. At the start of segment
  ``t + 1`` (before attending, as in the reference code) each layer refits its LTM from the detached
  old coefficients and the pending vectors, passed through the smoothing gate
  ``sigmoid(Conv1d_{k=3}(X)) ⊙ X``; that refit is inside the graph, so the gate is trained, and
  only its detached result is carried on. The STM and LTM therefore never hold the same token.
  The gate smooths the new vectors only (the contracted old signal is already smooth).
* Ridge design: the reference code's *padded-position trick* is used — the fit also sees zero
  targets at grid points extending the real positions to ``[-0.5, 1.5]``, which pulls the signal to
  zero outside ``[0, 1]`` (the closed-form read integrates over all of ℝ) and keeps the edge basis
  functions tame. Only the rows of ``G`` for the real positions are kept.
* Before the first eviction a row's LTM is empty (``B = 0``; keys, values and output projections
  have no bias, so it reads exactly zero) and the first pending vectors are fitted over all of
  ``[0, 1]``.
* Sticky memories sample at random in training; in evaluation they use the deterministic inverse
  CDF of the bin histogram at ``(m + 0.5) / M``, so evaluation is reproducible.
* The KL regulariser is, as the reference's ``kl_m * kl_reg.mean()`` with ``kl_reg`` summed over
  layers (``sorting/train.py``), averaged over heads and the real query tokens of rows whose
  LTM is non-empty, summed over layers, and scaled by ``kl_weight`` (1e-6, σ0 0.05: the
  reference's ``run_sort_inftyformer.sh``). Before 2026-11-27 it was summed over heads and
  tokens (128 times larger at 4 heads and 32 tokens).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least, check_positive
from lifelong.encoders.layers import (
    FeedForward,
    ModuleConfig,
    MultiHeadAttention,
    TokenEmbedding,
    attend,
    causal_mask,
    merge_heads,
    split_heads,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool, merge_rows
from lifelong.encoders.transformer_xl import (
    RelativeAttention,
    RelativePositions,
    relative_positions,
)

MIN_VARIANCE = 1e-4
POSITIONS = ("distance-bias", "relative")
"""How the attention over [STM; segment] knows distances (`InfinityLayer`'s ``positions``)."""
_MEMORY_KEYS = (
    "short_term",
    "short_term_mask",
    "coefficients",
    "filled",
    "pending",
    "pending_mask",
    "histogram",
)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------------------------------------
# Continuous signal: basis, ridge regression, reconstruction
# ---------------------------------------------------------------------------------------------


def rbf_basis(
    basis: int, widths: Sequence[float] = (0.01, 0.05)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Centres and widths of ``basis`` Gaussian RBFs on ``[0, 1]``.

    ``basis / len(widths)`` centres are linearly spaced in ``[0, 1]`` and each carries every width
    (the reference code's layout).

    Args:
        basis: Number of basis functions ``N``; must be a positive multiple of ``len(widths)``.
        widths: Standard deviations of the RBFs.

    Returns:
        Centres (N,) and standard deviations (N,), float64.

    Raises:
        ValueError: If ``widths`` is empty or not positive, or ``basis`` is not a multiple of it.

    """
    if len(widths) == 0 or any(w <= 0 for w in widths):
        raise ValueError(f"widths must be a non-empty sequence of positive floats, got {widths}")
    if basis < len(widths) or basis % len(widths):
        raise ValueError(
            f"basis must be a positive multiple of len(widths)={len(widths)}, got {basis}"
        )
    centres = torch.linspace(0.0, 1.0, basis // len(widths), dtype=torch.float64)  # (N / w,)
    sigmas = torch.tensor(list(widths), dtype=torch.float64)  # (w,)
    mu = centres[:, None].expand(-1, len(widths)).reshape(-1)  # (N,)
    sigma = sigmas[None, :].expand(len(centres), -1).reshape(-1)  # (N,)
    return mu, sigma


def evaluate_basis(
    positions: torch.Tensor, centres: torch.Tensor, widths: torch.Tensor
) -> torch.Tensor:
    """ψ(t): Gaussian densities ``N(t; μ_j, σ_j²)`` at ``positions`` (...,) -> (..., N)."""
    diff = positions[..., None] - centres  # (..., N)
    return torch.exp(-0.5 * (diff / widths) ** 2) / (widths * _SQRT_2PI)


def ridge_design(
    positions: torch.Tensor,
    centres: torch.Tensor,
    widths: torch.Tensor,
    ridge: float,
    *,
    pad: bool = True,
) -> torch.Tensor:
    """The ridge-regression design ``G = Fᵀ (F Fᵀ + λ I)⁻¹`` so that ``B = Gᵀ X``.

    Args:
        positions: Positions (L,) of the vectors to fit, in ``[0, 1]``.
        centres: RBF centres (N,).
        widths: RBF standard deviations (N,).
        ridge: The penalty λ (> 0).
        pad: Also fit zero targets at points extending the positions' mean spacing ``1 / L`` over
            ``[-0.5, 0)`` and ``(1, 1.5]`` (the reference code's padded-position trick); only the
            rows of ``G`` for the real positions are returned.

    Returns:
        ``G`` (L, N) in float64.

    Raises:
        ValueError: If ``ridge`` is not positive or ``positions`` is not a non-empty vector.

    """
    if ridge <= 0:
        raise ValueError(f"ridge must be positive, got {ridge}")
    if positions.dim() != 1 or positions.numel() == 0:
        raise ValueError(
            f"positions must be a non-empty vector, got shape {tuple(positions.shape)}"
        )
    like = {"dtype": torch.float64, "device": centres.device}  # every piece on one device
    real = positions.to(**like)  # (L,)
    grid = real
    if pad:
        step = 1.0 / real.numel()
        extra = int(round(0.5 / step))
        offsets = (torch.arange(extra, **like) + 0.5) * step  # (P,)
        grid = torch.cat([-offsets.flip(0), real, 1.0 + offsets])  # (P + L + P,)
    F_ = evaluate_basis(grid, centres.double(), widths.double()).T  # (N, L')
    gram = F_ @ F_.T + ridge * torch.eye(F_.shape[0], **like)  # (N, N)
    G = torch.linalg.solve(gram, F_).T  # (L', N): Fᵀ (F Fᵀ + λI)⁻¹, gram is symmetric
    if pad:
        G = G[extra : extra + real.numel()]  # (L, N)
    return G


def fit_signal(vectors: torch.Tensor, design: torch.Tensor) -> torch.Tensor:
    """Coefficients ``B = Gᵀ X``: vectors (..., L, e) and design (L, N) -> (..., N, e)."""
    return torch.matmul(design.T.to(vectors.dtype), vectors)


def reconstruct(
    coefficients: torch.Tensor, positions: torch.Tensor, centres: torch.Tensor, widths: torch.Tensor
) -> torch.Tensor:
    """The signal ``X̄(t) = Bᵀ ψ(t)``: coefficients (..., N, e), positions (..., P) -> (..., P, e).

    Args:
        coefficients: ``B`` (..., N, e).
        positions: Where to evaluate the signal (..., P).
        centres: RBF centres (N,).
        widths: RBF standard deviations (N,).

    """
    psi = evaluate_basis(positions, centres, widths).to(coefficients.dtype)  # (..., P, N)
    return torch.matmul(psi, coefficients)


def segment_positions(
    count: int, start: float = 0.0, stop: float = 1.0, device: torch.device | None = None
) -> torch.Tensor:
    """``count`` linearly spaced cell midpoints in ``[start, stop]``: (count,) float64."""
    cells = torch.arange(count, dtype=torch.float64, device=device)
    return start + (stop - start) * (cells + 0.5) / count


def update_design(
    samples: int,
    new_count: int,
    tau: float,
    centres: torch.Tensor,
    widths: torch.Tensor,
    ridge: float,
    *,
    pad: bool = True,
) -> torch.Tensor:
    """Design ``G'`` (M + L, N): ``samples`` old vectors in ``[0, τ]``, new ones in ``(τ, 1]``.

    With ``samples = 0`` the ``new_count`` vectors span all of ``[0, 1]`` (the first write).

    Args:
        samples: Number ``M`` of samples of the old signal (0 for an empty memory).
        new_count: Number ``L`` of new vectors.
        tau: Contraction factor τ.
        centres: RBF centres (N,).
        widths: RBF standard deviations (N,).
        ridge: Ridge penalty λ.
        pad: Use the padded-position trick (see `ridge_design`).

    """
    on = centres.device  # the design is made where the memory lives (a GPU's buffers too)
    if samples == 0:
        positions = segment_positions(new_count, device=on)
    else:
        positions = torch.cat(
            [
                segment_positions(samples, 0.0, tau, device=on),
                segment_positions(new_count, tau, 1.0, device=on),
            ]
        )  # (M + L,)
    return ridge_design(positions, centres, widths, ridge, pad=pad)


def unbounded_update(
    coefficients: torch.Tensor | None,
    new: torch.Tensor,
    design: torch.Tensor,
    centres: torch.Tensor,
    widths: torch.Tensor,
    *,
    sample_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """One unbounded-memory step: contract the old signal, append ``new`` and refit.

    Args:
        coefficients: Old coefficients (b, N, e), detached by the caller, or None for an empty
            memory (then ``design`` must come from ``update_design(0, L, ...)``).
        new: New vectors (b, L, e), placed linearly in ``(τ, 1]``.
        design: ``update_design(M, L, τ, ...)`` (M + L, N).
        centres: RBF centres (N,).
        widths: RBF standard deviations (N,).
        sample_positions: Where to sample the old signal (b, M) or (M,) in ``[0, 1]`` (sticky
            memories); linearly spaced midpoints by default. The samples are then treated as
            linearly spaced in ``[0, τ]``.

    Returns:
        The new coefficients (b, N, e).

    """
    if coefficients is None:
        return fit_signal(new, design)
    samples = design.shape[0] - new.shape[1]
    if sample_positions is None:
        sample_positions = segment_positions(samples, device=new.device)
    if sample_positions.shape[-1] != samples:
        raise ValueError(
            f"sample_positions must have {samples} points (design rows minus new vectors), "
            f"got {sample_positions.shape[-1]}"
        )
    past = reconstruct(coefficients, sample_positions.to(coefficients.dtype), centres, widths)
    past = past.expand(*new.shape[:-2], -1, -1)  # (b, M, e)
    return fit_signal(torch.cat([past, new], dim=1), design)  # (b, N, e)


# ---------------------------------------------------------------------------------------------
# Continuous attention pieces
# ---------------------------------------------------------------------------------------------


def gaussian_expectation(
    mu: torch.Tensor, variance: torch.Tensor, centres: torch.Tensor, widths: torch.Tensor
) -> torch.Tensor:
    """Closed-form ``E_{t~N(μ, σ²)}[ψ_j(t)] = N(μ; μ_j, σ² + σ_j²)``: (...,), (...,) -> (..., N)."""
    total = variance[..., None] + widths.to(mu.dtype) ** 2  # (..., N)
    diff = mu[..., None] - centres.to(mu.dtype)  # (..., N)
    return torch.exp(-0.5 * diff**2 / total) / torch.sqrt(2.0 * math.pi * total)


def kl_to_prior(variance: torch.Tensor, sigma0: float) -> torch.Tensor:
    """``KL(N(μ, σ²) || N(μ, σ0²)) = ½(σ²/σ0² − log(σ²/σ0²) − 1)``, element-wise."""
    ratio = variance / sigma0**2
    return 0.5 * (ratio - torch.log(ratio) - 1.0)


def bin_masses(mu: torch.Tensor, variance: torch.Tensor, bins: int) -> torch.Tensor:
    """Mass of ``N(μ, σ²)`` in each of ``bins`` equal bins of ``[0, 1]``: (...,) -> (..., D)."""
    edges = torch.linspace(0.0, 1.0, bins + 1, dtype=mu.dtype, device=mu.device)  # (D + 1,)
    scale = torch.sqrt(2.0 * variance)[..., None]  # (..., 1)
    cdf = 0.5 * torch.erf((edges - mu[..., None]) / scale)  # (..., D + 1)
    return cdf[..., 1:] - cdf[..., :-1]


def sticky_positions(
    histogram: torch.Tensor,
    samples: int,
    *,
    random: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Sample sorted positions in ``[0, 1]`` from a histogram over equal bins (sticky memories).

    Args:
        histogram: Non-negative bin weights (b, D); rows summing to zero are treated as uniform.
        samples: Number of positions ``M``.
        random: Draw ``M`` bins from the histogram with a uniform point inside each, sorted;
            otherwise use the deterministic inverse CDF at ``(m + 0.5) / M``.
        generator: Random generator for the draws.

    Returns:
        Sorted positions (b, M) in ``[0, 1]``.

    """
    b, bins = histogram.shape
    weights = histogram.double().clamp(min=0)  # (b, D)
    empty = weights.sum(1, keepdim=True) <= 0  # (b, 1)
    weights = torch.where(empty, torch.ones_like(weights), weights)
    weights = weights / weights.sum(1, keepdim=True)
    if random:
        on = generator.device if generator is not None else weights.device  # draws: its device
        chosen = torch.multinomial(weights.to(on), samples, replacement=True, generator=generator)
        chosen = chosen.to(histogram.device)  # (b, M)
        jitter = torch.rand(b, samples, dtype=torch.float64, generator=generator, device=on)
        jitter = jitter.to(histogram.device)
        return ((chosen.double() + jitter) / bins).sort(dim=1).values.to(histogram.dtype)
    cdf = torch.cumsum(weights, dim=1)  # (b, D)
    targets = segment_positions(samples, device=histogram.device).expand(b, -1).contiguous()
    chosen = torch.searchsorted(cdf, targets).clamp(max=bins - 1)  # (b, M)
    below = torch.gather(cdf, 1, chosen) - torch.gather(weights, 1, chosen)  # (b, M)
    inside = (targets - below) / torch.gather(weights, 1, chosen).clamp(min=1e-12)
    return ((chosen.double() + inside.clamp(0.0, 1.0)) / bins).to(histogram.dtype)


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------


class SmoothingGate(nn.Module):
    """``X̃ = sigmoid(Conv1d_{k=3}(X)) ⊙ X`` over a sequence of vectors (b, L, d)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d_model, d_model, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(b, L, d) -> (b, L, d)."""
        gate = torch.sigmoid(self.conv(x.transpose(1, 2)).transpose(1, 2))  # (b, L, d)
        return gate * x


class ContinuousSignal(nn.Module):
    """The fixed RBF basis of the LTM with a cache of ridge designs (no parameters).

    Args:
        basis: Number of basis functions ``N``.
        widths: RBF standard deviations.
        ridge: Ridge penalty λ.
        tau: Contraction factor τ ∈ (0, 1).
        samples: Points ``M`` at which the old signal is sampled.
        pad: Fit with the padded-position trick (see `ridge_design`).

    """

    def __init__(
        self,
        basis: int,
        widths: Sequence[float],
        ridge: float,
        tau: float,
        samples: int,
        *,
        pad: bool = True,
    ) -> None:
        super().__init__()
        self.pad = pad
        centres, sigmas = rbf_basis(basis, widths)
        self.register_buffer("centres", centres.float(), persistent=False)
        self.register_buffer("widths", sigmas.float(), persistent=False)
        self.ridge = ridge
        self.tau = tau
        self.samples = samples
        self._designs: dict[tuple[Any, ...], torch.Tensor] = {}

    def design(self, samples: int, new_count: int, like: torch.Tensor) -> torch.Tensor:
        """Cached ``update_design(samples, new_count, ...)`` on ``like``'s device and dtype."""
        key = (samples, new_count, like.device, like.dtype)
        if key not in self._designs:
            G = update_design(
                samples, new_count, self.tau, self.centres, self.widths, self.ridge, pad=self.pad
            )  # (M + L, N)
            self._designs[key] = G.to(device=like.device, dtype=like.dtype)
        return self._designs[key]


class InfinityLayer(nn.Module):
    """Post-LN layer: self-attention over [STM; segment] plus the continuous LTM read, then FFN.

    Args:
        config: Module sizes.
        basis: Number of basis functions ``N`` (the μ/σ networks read the ``N`` scores).
        max_distance: With ``positions="distance-bias"``, relative distances are clipped to
            ``±max_distance``.
        positions: ``"distance-bias"``, a learned per-head scalar per clipped distance, or
            ``"relative"``, Transformer-XL's relative attention (`RelativeAttention`).

    """

    def __init__(
        self,
        config: ModuleConfig,
        basis: int,
        max_distance: int,
        positions: str = "distance-bias",
    ) -> None:
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
        d, heads = config.d_model, config.heads
        self.heads = heads
        self.max_distance = max_distance
        self.positions = positions
        self.attention: nn.Module
        if positions == "relative":
            self.attention = RelativeAttention(config)
        else:
            self.attention = MultiHeadAttention(d, heads, config.dropout)
            self.relative = nn.Embedding(2 * max_distance + 1, heads)  # per-head distance bias
            nn.init.normal_(self.relative.weight, std=0.02)
        self.ltm_key = nn.Linear(d, d, bias=False)
        self.ltm_value = nn.Linear(d, d, bias=False)
        self.ltm_output = nn.Linear(d, d, bias=False)
        self.mu = nn.Linear(basis, 1, bias=False)  # shared across heads
        self.sigma = nn.Linear(basis, 1, bias=False)
        self.gate = SmoothingGate(d)
        self.dropout = nn.Dropout(config.dropout)
        self.norm1 = nn.LayerNorm(d)
        self.ffn = FeedForward(d, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(d)

    def refresh(
        self,
        signal: ContinuousSignal,
        coefficients: torch.Tensor,
        pending: torch.Tensor,
        histogram: torch.Tensor | None,
        groups: list[tuple[torch.Tensor, bool, int]],
    ) -> torch.Tensor:
        """Write the pending vectors into the LTM (the unbounded update, inside the graph).

        Args:
            signal: The basis and its designs.
            coefficients: Detached coefficients of the previous step (b, N, d).
            pending: Right-aligned pending vectors (b, P, d).
            histogram: The previous step's LTM attention per bin (b, D), or None for linearly
                spaced samples.
            groups: ``(rows, has_past, count)`` for every group of rows with pending vectors.

        Returns:
            The refreshed coefficients (b, N, d).

        """
        out = coefficients
        for rows, has_past, count in groups:
            new = self.gate(pending[rows, pending.shape[1] - count :])  # (g, L, d)
            if not has_past:
                fitted = fit_signal(new, signal.design(0, count, new))  # (g, N, d)
            else:
                positions = None
                if histogram is not None:
                    positions = sticky_positions(
                        histogram[rows], signal.samples, random=self.training
                    )  # (g, M)
                fitted = unbounded_update(
                    coefficients[rows],
                    new,
                    signal.design(signal.samples, count, new),
                    signal.centres,
                    signal.widths,
                    sample_positions=positions,
                )  # (g, N, d)
            # under CUDA autocast the fit's matmul is low precision while the LTM's
            # coefficients stay fp32, and CUDA's index_copy does not promote (CPU autocast's does)
            out = out.index_copy(0, rows, fitted.to(out.dtype))
        return out

    def forward(
        self,
        x: torch.Tensor,
        short_term: torch.Tensor,
        key_mask: torch.Tensor,
        causal: bool,
        signal: ContinuousSignal,
        coefficients: torch.Tensor,
        filled: torch.Tensor,
        relative: RelativePositions | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encode one segment.

        Args:
            x: Layer input (b, t, d).
            short_term: The STM, right-aligned (b, S, d).
            key_mask: Real keys of [STM; segment] (b, S + t), 1 = real.
            causal: Mask future tokens of the segment.
            signal: The LTM basis.
            coefficients: The LTM coefficients to read (b, N, d).
            filled: (b,) True for rows with a non-empty LTM.
            relative: With ``positions="relative"``, the segment's `relative_positions`.

        Returns:
            The layer output (b, t, d), and the LTM density's μ and σ² (b, h, t).

        """
        # the LTM is read with the self-attention's projected query (the reference's
        # sorting/long_term_attention.py reads with mem_transformer.py's w_head_q)
        q = split_heads(self.attention.query(x), self.heads)  # (b, h, t, d_h)
        if self.positions == "relative":
            if relative is None:
                raise ValueError("positions='relative' needs the segment's relative positions")
            context = self.attention.read(q, x, short_term, relative)  # (b, t, d)
        else:
            context = self._biased_attention(x, q, short_term, key_mask, causal)  # (b, t, d)
        long_term, mu, variance = self._read_long_term(q, coefficients, signal)
        long_term = long_term * filled[:, None, None].to(long_term.dtype)  # empty LTM reads 0
        x = self.norm1(x + context + self.dropout(long_term))
        return self.norm2(x + self.ffn(x)), mu, variance

    def _biased_attention(
        self,
        x: torch.Tensor,
        q: torch.Tensor,
        short_term: torch.Tensor,
        key_mask: torch.Tensor,
        causal: bool,
    ) -> torch.Tensor:
        """Attention over [STM; segment] with the learned distance bias, projected: (b, t, d)."""
        t, s = x.shape[1], short_term.shape[1]
        keys = torch.cat([short_term, x], dim=1)  # (b, S + t, d)
        k = split_heads(self.attention.key(keys), self.heads)  # (b, h, S + t, d_h)
        v = split_heads(self.attention.value(keys), self.heads)  # (b, h, S + t, d_h)
        mask = key_mask.bool()[:, None, None, :]  # (b, 1, 1, S + t)
        if causal:
            mask = mask & causal_mask(t, s + t, x.device)[None, None]  # (b, 1, t, S + t)
        context, _ = attend(q, k, v, mask, bias=self._distance_bias(t, s, x.device))
        return self.attention.dropout(self.attention.output(merge_heads(context)))

    def _distance_bias(self, t: int, s: int, device: torch.device) -> torch.Tensor:
        queries = torch.arange(t, device=device)[:, None] + s  # (t, 1)
        keys = torch.arange(s + t, device=device)[None, :]  # (1, S + t)
        distance = (queries - keys).clamp(-self.max_distance, self.max_distance)  # (t, S + t)
        return self.relative(distance + self.max_distance).permute(2, 0, 1)[None]  # (1, h, t, S+t)

    def _read_long_term(
        self, q: torch.Tensor, coefficients: torch.Tensor, signal: ContinuousSignal
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        keys = split_heads(self.ltm_key(coefficients), self.heads)  # (b, h, N, d_h)
        values = split_heads(self.ltm_value(coefficients), self.heads)  # (b, h, N, d_h)
        scores = torch.matmul(q, keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (b, h, t, N)
        mu = torch.sigmoid(self.mu(scores).squeeze(-1))  # (b, h, t)
        variance = F.softplus(self.sigma(scores).squeeze(-1)).clamp(min=MIN_VARIANCE)  # (b, h, t)
        expectation = gaussian_expectation(mu, variance, signal.centres, signal.widths)
        z = torch.matmul(expectation, values)  # (b, h, t, d_h)
        return self.ltm_output(merge_heads(z)), mu, variance  # (b, t, d)


class InfinityFormer(SegmentEncoder):
    """∞-former encoder: STM (Transformer-XL cache) + continuous unbounded LTM in every layer.

    The memory is a dict of batch-first tensors (layers stacked on dim 1):
    ``short_term`` (b, layers, S, d) and ``short_term_mask`` (b, S), right-aligned;
    ``coefficients`` (b, layers, N, d) and ``filled`` (b,) for the LTM;
    ``pending`` (b, layers, P, d) and ``pending_mask`` (b, P), the real vectors evicted from the
    STM and not yet written; ``histogram`` (b, layers, D), the last LTM attention per bin (for
    sticky memories). All of it is detached: no gradient crosses segments.

    Args:
        config: Module sizes.
        short_term_length: STM length ``S`` per layer (0 = LTM only, every token goes to the LTM).
        basis: Number of basis functions ``N`` (a multiple of ``len(widths)``).
        widths: RBF standard deviations.
        ridge: Ridge penalty λ.
        tau: Contraction factor τ ∈ (0, 1).
        samples: Points ``M`` at which the old signal is sampled (``basis`` by default).
        sticky: Sample where the previous attention went (sticky memories) instead of linearly.
        bins: Histogram bins ``D`` for sticky memories.
        kl_weight: λ_KL of the regulariser returned by `auxiliary_loss`.
        sigma0: Standard deviation of the KL prior.
        padded_fit: Fit the LTM with the reference code's padded-position trick (zero targets
            over ``[-0.5, 0)`` and ``(1, 1.5]``); it keeps the signal near zero outside
            ``[0, 1]`` at the price of a small pull towards zero of the newest vectors near 1.
        positions: How the attention over [STM; segment] knows distances: ``"relative"``,
            Transformer-XL's relative attention, as the reference's ∞-former is built
            (deep-spin/infinite-former, ``sorting/mem_transformer.py``:
            ``RelPartialLearnableMultiHeadAttn`` over ``[mems[-mem_len:]; segment]``), or
            ``"distance-bias"``, a learned per-head scalar per clipped distance (this module's
            design before 2026-11-27; see the module docstring).
        max_distance: With ``"distance-bias"``, relative distances are clipped to ``±max_distance``
            (``config.max_positions + short_term_length`` by default).

    """

    def __init__(
        self,
        config: ModuleConfig,
        short_term_length: int,
        basis: int,
        *,
        widths: Sequence[float] = (0.01, 0.05),
        ridge: float = 1.0,
        tau: float = 0.75,
        samples: int | None = None,
        sticky: bool = True,
        bins: int = 128,
        kl_weight: float = 1e-6,
        sigma0: float = 0.05,
        padded_fit: bool = True,
        positions: str = "relative",
        max_distance: int | None = None,
    ) -> None:
        super().__init__(config)
        samples = basis if samples is None else samples
        max_distance = (
            config.max_positions + short_term_length if max_distance is None else max_distance
        )
        _check_arguments(
            short_term_length, ridge, tau, samples, bins, kl_weight, sigma0, max_distance
        )
        self.short_term_length = short_term_length
        self.basis = basis
        self.sticky = sticky
        self.bins = bins
        self.kl_weight = kl_weight
        self.sigma0 = sigma0
        self.signal = ContinuousSignal(basis, widths, ridge, tau, samples, pad=padded_fit)
        self.embed = TokenEmbedding(config, positions=False)
        self.positions = positions
        self.layers = nn.ModuleList(
            InfinityLayer(config, basis, max_distance, positions) for _ in range(config.layers)
        )
        self._kl: torch.Tensor | None = None

    def initial_memory(self, batch: int, device: torch.device) -> dict[str, torch.Tensor]:
        """An empty memory for ``batch`` rows (start of a document)."""
        n_layers, d = self.config.layers, self.config.d_model
        return {
            "short_term": torch.zeros(batch, n_layers, self.short_term_length, d, device=device),
            "short_term_mask": torch.zeros(batch, self.short_term_length, device=device),
            "coefficients": torch.zeros(batch, n_layers, self.basis, d, device=device),
            "filled": torch.zeros(batch, dtype=torch.bool, device=device),
            "pending": torch.zeros(batch, n_layers, 0, d, device=device),
            "pending_mask": torch.zeros(batch, 0, device=device),
            "histogram": torch.zeros(batch, n_layers, self.bins, device=device),
        }

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) given the memory of the previous segments.

        Args:
            input_ids: Token ids (b, t).
            attention_mask: 1 for real tokens, 0 for padding (b, t).
            memory: The previous segment's memory, or None at the start of a document.

        Returns:
            Hidden states (b, t, d), their masked mean, and the updated (detached) memory.

        Raises:
            ValueError: On mismatched shapes or a memory of the wrong structure.

        """
        if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
            raise ValueError(
                "input_ids and attention_mask must both be (batch, tokens), got "
                f"{tuple(input_ids.shape)} and {tuple(attention_mask.shape)}"
            )
        b, t = input_ids.shape
        memory = self.initial_memory(b, input_ids.device) if memory is None else memory
        self._check_memory(memory, b)
        token_mask = attention_mask.to(memory["short_term_mask"].dtype)  # (b, t)
        key_mask = torch.cat([memory["short_term_mask"], token_mask], dim=1)  # (b, S + t)
        groups = _write_groups(memory["filled"], memory["pending_mask"])
        filled = memory["filled"] | memory["pending_mask"].bool().any(1)  # (b,)
        x = self.embed(input_ids)  # (b, t, d)
        relative = None
        if self.positions == "relative":
            relative = relative_positions(key_mask.bool(), t, self.config, x.dtype)
        inputs, coefficients, histograms, kl = [], [], [], x.new_zeros(())
        for i, layer in enumerate(self.layers):
            inputs.append(x.detach())
            histogram = memory["histogram"][:, i] if self.sticky else None
            current = layer.refresh(
                self.signal,
                memory["coefficients"][:, i],
                memory["pending"][:, i],
                histogram,
                groups,
            )  # (b, N, d)
            x, mu, variance = layer(
                x,
                memory["short_term"][:, i],
                key_mask,
                self.config.causal,
                self.signal,
                current,
                filled,
                relative,
            )
            reads = (token_mask * filled.to(token_mask.dtype)[:, None])[:, None, :]  # (b, 1, t)
            count = (reads.sum() * variance.shape[1]).clamp(min=1.0)  # real reads x heads
            kl = kl + (kl_to_prior(variance, self.sigma0) * reads).sum() / count
            coefficients.append(current.detach())
            histograms.append(self._histogram(mu, variance, reads))
        if bool(filled.any()):
            self._accumulate(self.kl_weight * kl)
        memory = self._advance(memory, inputs, token_mask, coefficients, histograms, filled)
        return EncoderOutput(hidden=x, pooled=mean_pool(x, attention_mask), memory=memory)

    def merge_memory(self, updated: Any, previous: Any, rows: torch.Tensor) -> Any:
        """Row-wise merge; the pending buffers are zero-padded on the left to a common length."""
        updated, previous = dict(updated), dict(previous)
        length = max(updated["pending_mask"].shape[1], previous["pending_mask"].shape[1])
        for memory in (updated, previous):
            memory["pending"] = _left_pad(memory["pending"], length, dim=2)
            memory["pending_mask"] = _left_pad(memory["pending_mask"], length, dim=1)
        return merge_rows(updated, previous, rows)

    def auxiliary_loss(self) -> torch.Tensor | None:
        """λ_KL · KL(N(μ, σ²) || N(μ, σ0²)) summed since the last call (then reset), or None."""
        loss, self._kl = self._kl, None
        return loss

    def _accumulate(self, loss: torch.Tensor) -> None:
        self._kl = loss if self._kl is None else self._kl + loss

    @torch.no_grad()
    def _histogram(
        self, mu: torch.Tensor, variance: torch.Tensor, reads: torch.Tensor
    ) -> torch.Tensor:
        if not self.sticky:
            return mu.new_zeros(mu.shape[0], self.bins)
        masses = bin_masses(mu, variance, self.bins)  # (b, h, t, D)
        return (masses * reads[..., None]).sum(dim=(1, 2))  # (b, D)

    def _advance(
        self,
        memory: dict[str, torch.Tensor],
        inputs: list[torch.Tensor],
        token_mask: torch.Tensor,
        coefficients: list[torch.Tensor],
        histograms: list[torch.Tensor],
        filled: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Push the segment's real layer inputs into the STM; the overflow becomes pending."""
        s = self.short_term_length
        stacked = torch.stack(inputs, dim=1)  # (b, layers, t, d)
        candidates = torch.cat([memory["short_term"], stacked], dim=2)  # (b, layers, S + t, d)
        mask = torch.cat([memory["short_term_mask"], token_mask], dim=1)  # (b, S + t)
        order = torch.argsort(mask, dim=1, stable=True)  # padding first, real tokens in order
        mask = torch.gather(mask, 1, order)  # (b, S + t)
        index = order[:, None, :, None].expand(-1, candidates.shape[1], -1, candidates.shape[3])
        candidates = torch.gather(candidates, 2, index)  # (b, layers, S + t, d)
        split = candidates.shape[2] - s
        return {
            "short_term": candidates[:, :, split:],
            "short_term_mask": mask[:, split:],
            "coefficients": torch.stack(coefficients, dim=1),
            "filled": filled,
            "pending": candidates[:, :, :split],
            "pending_mask": mask[:, :split],
            "histogram": torch.stack(histograms, dim=1).detach(),
        }

    def _check_memory(self, memory: Any, batch: int) -> None:
        expected = set(_MEMORY_KEYS)
        if not isinstance(memory, dict) or set(memory) != expected:
            raise ValueError(f"memory must be a dict with keys {sorted(expected)} or None")
        if memory["filled"].shape != (batch,):
            raise ValueError(
                f"memory is for {memory['filled'].shape[0]} rows but the batch has {batch}"
            )


def _write_groups(
    filled: torch.Tensor, pending_mask: torch.Tensor
) -> list[tuple[torch.Tensor, bool, int]]:
    """Rows with pending vectors grouped by (has a past signal, number of pending vectors)."""
    counts = pending_mask.bool().sum(1).tolist()
    has_past = filled.tolist()
    keys: dict[tuple[bool, int], list[int]] = {}
    for row, (past, count) in enumerate(zip(has_past, counts)):
        if count > 0:
            keys.setdefault((bool(past), int(count)), []).append(row)
    return [
        (torch.tensor(rows, device=filled.device), past, count)
        for (past, count), rows in keys.items()
    ]


def _left_pad(x: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    missing = length - x.shape[dim]
    if missing == 0:
        return x
    shape = list(x.shape)
    shape[dim] = missing
    return torch.cat([x.new_zeros(shape), x], dim=dim)


def _check_arguments(
    short_term_length: int,
    ridge: float,
    tau: float,
    samples: int,
    bins: int,
    kl_weight: float,
    sigma0: float,
    max_distance: int,
) -> None:
    check_at_least(1, samples=samples, bins=bins)
    check_at_least(0, short_term_length=short_term_length, kl_weight=kl_weight)
    check_at_least(0, max_distance=max_distance)
    check_positive(ridge=ridge, sigma0=sigma0)
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau must lie in (0, 1), got {tau}")


__all__ = [
    "ContinuousSignal",
    "InfinityFormer",
    "InfinityLayer",
    "SmoothingGate",
    "bin_masses",
    "evaluate_basis",
    "fit_signal",
    "gaussian_expectation",
    "kl_to_prior",
    "rbf_basis",
    "reconstruct",
    "ridge_design",
    "segment_positions",
    "sticky_positions",
    "unbounded_update",
    "update_design",
]
