"""kNN-LM (Khandelwal et al., ICLR 2020): a trained LM plus a datastore of (context, next token).

The datastore holds one entry per training position: the key is the LM's context vector there,
the value the character that followed (section 2). At test time the k nearest keys of the
query's context vector (L2 distance) give a distribution over the vocabulary,

    p_kNN(y | x) ∝ Σ_{(k_i, v_i) ∈ N} 1[y = v_i] · exp(−d(k_i, q) / T),

interpolated with the LM's own: p(y | x) = λ · p_kNN(y | x) + (1 − λ) · p_LM(y | x).
The key is the input of the last layer's feed-forward block, after its layer norm — the paper's
best key (section 6, "Key function", Table 5). Distances are squared L2, as FAISS returns them
and the reference (urvashik/knnlm, ``knnlm.py``) uses them; the temperature T (1 in the paper)
is a parameter. λ and k are chosen on validation text (`tune`).

The datastore is the project's episodic memory (`lifelong.memory.EpisodicMemory`: keys, one
int32 field ``"token"``, the shared search with ``index: auto``), not a store of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lifelong.encoders.checks import check_at_least, check_positive
from lifelong.encoders.layers import FeedForward
from lifelong.lm.text import CausalLM, whole_windows
from lifelong.memory import EpisodicMemory
from lifelong.memory.records import ExampleRecords

TOKEN = "token"
"""The datastore's value field: the next character's id."""


def key_block(model: CausalLM) -> nn.Module:
    """The feed-forward block whose input is the kNN key: the last one of the module.

    Raises:
        ValueError: The module has no `FeedForward` block (e.g. PKM in every layer).

    """
    blocks = [m for m in model.module.modules() if isinstance(m, FeedForward)]
    if not blocks:
        raise ValueError(f"{type(model.module).__name__} has no feed-forward block for kNN keys")
    return blocks[-1]


@contextmanager
def context_vectors(model: CausalLM) -> Iterator[list[torch.Tensor]]:
    """Inside the block, each forward pass appends the key vectors (b, T, d) it computed."""
    captured: list[torch.Tensor] = []

    def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        captured.append(inputs[0].detach())

    handle = key_block(model).register_forward_pre_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


def keys_and_logits(model: CausalLM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Context vectors (b, T, d) and next-character logits (b, T, V) of a window batch."""
    with context_vectors(model) as captured:
        logits = model(x)
    keys = torch.cat(captured, dim=1) if len(captured) > 1 else captured[0]  # segments
    return keys, logits


@torch.no_grad()
def build_datastore(
    model: CausalLM,
    data: np.ndarray,
    window: int,
    *,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    index: str = "auto",
) -> EpisodicMemory:
    """A datastore over every whole window of ``data``: one entry per position.

    Args:
        model: The trained LM (evaluation mode is set here).
        data: Training ids.
        window: Characters per window (each position sees the context the LM trained with).
        batch_size: Windows per forward pass.
        device: Where the LM runs (and the search, see `EpisodicMemory`).
        index: The memory's index (``auto``: exact while small, IVF checked for recall).

    """
    model.to(device).eval()
    memory = EpisodicMemory(model.module.hidden_size, index=index, device=device)
    for x, y, _ in whole_windows(data, window, batch_size):
        keys, _ = keys_and_logits(model, x.to(device))
        tokens = y.reshape(-1, 1).numpy().astype(np.int32)
        memory.write(
            ExampleRecords.build(token=tokens),
            keys.reshape(-1, keys.shape[-1]).float().cpu().numpy(),
        )
    return memory


@dataclass(frozen=True)
class Neighbours:
    """The datastore's answer for a batch of queries: (n, k) squared distances and tokens."""

    distances: torch.Tensor
    tokens: torch.Tensor


def neighbours(memory: EpisodicMemory, queries: torch.Tensor, k: int) -> Neighbours:
    """The ``k`` nearest entries of each query (n, d), nearest first.

    An approximate index may find fewer than ``k`` (slot -1, distance ``inf``): those keep
    distance ``inf``, so they weigh nothing in `knn_distribution`.
    """
    distances, slots = memory.nearest(queries.float().cpu().numpy(), k)
    missing = slots < 0
    tokens = memory.get_array(TOKEN, np.where(missing, 0, slots))[..., 0]  # (n, k)
    distances = np.where(missing, np.inf, distances).astype(np.float32)
    device = queries.device
    return Neighbours(
        torch.from_numpy(distances).to(device), torch.from_numpy(tokens.astype(np.int64)).to(device)
    )


def knn_distribution(found: Neighbours, vocab: int, temperature: float = 1.0) -> torch.Tensor:
    """p_kNN over the vocabulary (n, V): softmax(−d / T) over the neighbours, summed per token."""
    weights = torch.softmax(-found.distances.double() / temperature, dim=-1)  # (n, k)
    p = torch.zeros(found.tokens.shape[0], vocab, dtype=torch.float64, device=weights.device)
    return p.scatter_add_(1, found.tokens, weights)


def interpolate(log_p_lm: torch.Tensor, p_knn: torch.Tensor, lam: float) -> torch.Tensor:
    """log(λ · p_kNN + (1 − λ) · p_LM), computed in log space: (n, V) each."""
    if lam <= 0.0:
        return log_p_lm.double()
    with torch.no_grad():
        log_knn = torch.log(p_knn.clamp(min=0.0))  # -inf where no neighbour has the token
    return torch.logaddexp(log_knn + np.log(lam), log_p_lm.double() + np.log1p(-lam))


LAMBDA_LIMIT = 0.9
"""The largest λ `KNNLM.tune` tries (λ < 1: the LM's distribution must keep some weight)."""

K_LIMIT = 8_192
"""The largest k `KNNLM.tune` tries: a search keeps (queries x k) distances, slots and tokens,
20 bytes each, so an evaluation batch of 8,192 contexts at k = 8,192 holds 1.3 GB (a rerun
that widened further held 13.6 GB and was stopped). Khandelwal et al. use 1,024 (§5)."""

GAIN_TOLERANCE = 1e-4
"""Nats per character within which two (k, λ) pairs count as equally good (`KNNLM.tune` picks
the smallest k, then λ, within it of the best). A character LM's far neighbours weigh almost
nothing under softmax(−d), so the loss keeps falling by ever smaller amounts as k doubles: a
gain under this is the flat edge of the curve, not an optimum beyond the grid."""


class KNNLM:
    """A trained `CausalLM` and its datastore, mixed as the paper does.

    Args:
        model: The LM.
        memory: Its datastore (`build_datastore`).
        k: Neighbours per query (the paper: 1,024 on Wikitext-103).
        lam: λ, the weight of p_kNN (the paper: 0.25 on Wikitext-103).
        temperature: T of the softmax over −distances (the paper: 1).

    """

    def __init__(
        self,
        model: CausalLM,
        memory: EpisodicMemory,
        *,
        k: int = 1024,
        lam: float = 0.25,
        temperature: float = 1.0,
    ) -> None:
        if not 0.0 <= lam < 1.0:
            raise ValueError(f"lam must be in [0, 1), got {lam}")
        check_at_least(1, k=k)
        check_positive(temperature=temperature)
        self.model, self.memory = model, memory
        self.k, self.lam, self.temperature = k, lam, temperature
        self.grid: dict[str, list[float]] = {}  # what `tune` searched

    @torch.no_grad()
    def log_probs(
        self, model: CausalLM, x: torch.Tensor, starts: np.ndarray | None = None
    ) -> torch.Tensor:
        """The mixture's log p(y | x) for a window batch (b, T) -> (b, T, V), float64."""
        keys, logits = keys_and_logits(model, x)
        b, t, vocab = logits.shape
        found = neighbours(self.memory, keys.reshape(b * t, -1), self.k)
        p_knn = knn_distribution(found, vocab, self.temperature)
        log_p_lm = torch.log_softmax(logits.float(), -1).reshape(b * t, vocab)
        return interpolate(log_p_lm, p_knn, self.lam).reshape(b, t, vocab)

    @torch.no_grad()
    def tune(
        self,
        data: np.ndarray,
        window: int,
        *,
        ks: Sequence[int] = (8, 32, 128, 512),
        lams: Sequence[float] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5),
        batch_size: int = 64,
    ) -> dict[tuple[int, float], float]:
        """Choose k and λ by nats per character on ``data``, widening the grid past its edge.

        Khandelwal et al. (2020, §5: k up to 1,024, λ 0.25 on Wikitext-103) tune both on held
        out text. The pair chosen is the smallest k, then λ, within `GAIN_TOLERANCE` of the
        best loss (`chosen_pair`); chosen on the grid's largest k or λ, it says the optimum may
        lie beyond, so the grid grows (k doubled while the memory holds that many, up to
        `K_LIMIT`; λ by 0.1 up to `LAMBDA_LIMIT`) until the chosen pair is inside it or a
        limit is reached. Sets ``self.k``, ``self.lam`` and ``self.grid`` (the k and λ
        searched) and returns every pair's loss.
        """
        ks, lams = sorted(set(ks)), sorted(set(lams))
        losses: dict[tuple[int, float], float] = {}
        while True:
            losses = self._grid_losses(data, window, ks, lams, batch_size)
            k, lam = chosen_pair(losses)
            wider_k = k == ks[-1] and 2 * ks[-1] <= min(len(self.memory), K_LIMIT)
            wider_lam = lam == lams[-1] and lams[-1] + 0.1 <= LAMBDA_LIMIT + 1e-9
            if not (wider_k or wider_lam):
                break
            if wider_k:
                ks.append(2 * ks[-1])
            if wider_lam:
                lams.append(round(lams[-1] + 0.1, 2))
        self.k, self.lam = chosen_pair(losses)
        self.grid = {"k": list(ks), "lambda": list(lams)}
        return losses

    def _grid_losses(
        self,
        data: np.ndarray,
        window: int,
        ks: Sequence[int],
        lams: Sequence[float],
        batch_size: int,
    ) -> dict[tuple[int, float], float]:
        """Nats per character on ``data`` of every (k, λ) (one search, at the largest k)."""
        self.model.eval()
        k_max = min(max(ks), len(self.memory))
        totals = {(k, lam): 0.0 for k in ks for lam in lams}
        count = 0
        for x, y, _ in whole_windows(data, window, batch_size):
            keys, logits = keys_and_logits(self.model, x)
            b, t, vocab = logits.shape
            found = neighbours(self.memory, keys.reshape(b * t, -1), k_max)
            log_p_lm = torch.log_softmax(logits.float(), -1).reshape(b * t, vocab)
            target = y.reshape(-1, 1)
            for k in ks:
                top = Neighbours(found.distances[:, :k], found.tokens[:, :k])
                p_knn = knn_distribution(top, vocab, self.temperature)
                for lam in lams:
                    mixed = interpolate(log_p_lm, p_knn, lam)
                    totals[(k, lam)] -= float(mixed.gather(1, target).sum())
            count += target.numel()
        return {pair: total / count for pair, total in totals.items()}


def chosen_pair(losses: dict[tuple[int, float], float]) -> tuple[int, float]:
    """The smallest (k, λ) whose loss is within `GAIN_TOLERANCE` of the best one."""
    best = min(losses.values())
    return min(pair for pair, loss in losses.items() if loss <= best + GAIN_TOLERANCE)


RECALL_QUERIES = 512
"""Held-out positions whose neighbours `held_out_recall` checks (sampled, seeded)."""


@torch.no_grad()
def held_out_recall(
    knn: KNNLM, data: np.ndarray, window: int, *, batch_size: int = 64, seed: int = 0
) -> dict[str, float | int]:
    """Recall@k of the datastore's search on contexts it does not hold, at the chosen k.

    The queries are the context vectors of `RECALL_QUERIES` positions of ``data`` (text not in
    the datastore: the held-out half), drawn with ``seed``; each query's exact ``knn.k``
    nearest are compared with what the search in use returns
    (`lifelong.memory.EpisodicMemory.recall`). The index's own check (`index: auto`) runs at
    k = 32 on stored keys; this is the search as kNN-LM uses it.

    Returns:
        ``{"k", "queries", "recall", "se"}``.

    """
    knn.model.eval()
    vectors = [
        keys_and_logits(knn.model, x)[0].reshape(-1, knn.memory.key_dim)
        for x, _, _ in whole_windows(data, window, batch_size)
    ]
    contexts = torch.cat(vectors).float().cpu().numpy()  # (positions, d)
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(contexts), min(RECALL_QUERIES, len(contexts)), replace=False)
    recall, error = knn.memory.recall(contexts[np.sort(picked)], knn.k)
    return {"k": knn.k, "queries": len(picked), "recall": recall, "se": error}


__all__ = [
    "GAIN_TOLERANCE",
    "KNNLM",
    "K_LIMIT",
    "RECALL_QUERIES",
    "held_out_recall",
    "Neighbours",
    "build_datastore",
    "chosen_pair",
    "context_vectors",
    "interpolate",
    "keys_and_logits",
    "key_block",
    "knn_distribution",
    "neighbours",
]
