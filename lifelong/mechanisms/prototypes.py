"""Training-free classifiers on a frozen encoder's features: class means and ridge regression.

What NCM (`lifelong.strategies.ncm`) and RanPAC (`lifelong.strategies.ranpac`) are built from:

* `frozen_features`: the encoder's pooled vector of each example, in evaluation mode, no grad;
* `ClassMeans`: per-class running sums and counts, so the prototypes are the class means of
  everything seen, whatever the batches (Rebuffi et al.'s nearest-class-mean rule, iCaRL §2.2);
* `RandomProjection`: RanPAC's fixed random projection and nonlinearity, h = ReLU(f·W)
  (McDonald et al., NeurIPS 2023, §3.2 and Eq. 4; W's entries standard normal, as the reference
  ``RanPAC.py`` draws them, ``torch.randn``);
* `RidgeStatistics`: the Gram matrix G = Σ h hᵀ and C = Σ h yᵀ, updated by each batch, whose
  ridge solution (G + λI)⁻¹ C equals the batch solution over everything seen (§3.3, Eq. 5-6);
  `select_ridge` chooses λ at each task's end on `HeldFeatures`, as the reference
  ``RanPAC.py`` does (``optimise_ridge_parameter``: the grid 10^-8 ... 10^8, fitted on the
  first 80% of that task's features and scored by mean squared error on the other 20%; solved
  in the dual form, the same predictions, where the task has fewer rows than M, see
  `holdout_errors`). G and C are kept in float64
  (the reference: float32), so that the incremental solution equals the batch one to rounding.

Scores of classes never seen are `UNSEEN` (a cosine or ridge score cannot reach it), finite so
that the evaluation's divergence check passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.cost import add_flops, tensor_bytes
from lifelong.training import evaluating

UNSEEN = -1e4
"""The score of a class no example has shown (below every cosine and ridge score)."""

RIDGE_GRID = tuple(10.0**k for k in range(-8, 9))
"""λ candidates, the reference's ``10.0 ** np.arange(-8, 9)`` (``RanPAC.py``)."""


@torch.no_grad()
def frozen_features(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The encoder's pooled vector of each row, in evaluation mode, (n, d) float32."""
    with evaluating(model):
        return model.encoder(*batch.inputs()).pooled.float()


def label_count(model: nn.Module) -> int:
    """The label space's size: the classification head's outputs."""
    return int(model.head.linear.out_features)


def one_label_per_row(batch: Batch) -> torch.Tensor:
    """The batch's labels, one per row (a classification batch), (n,).

    Raises:
        ValueError: Rows carry no single label each (QA spans, FewRel candidates).

    """
    labels = batch.labels
    if labels is None or labels.dim() != 1 or labels.shape[0] != batch.num_rows:
        raise ValueError("a prototype classifier needs one class label per row (classification)")
    return labels


class ClassMeans(nn.Module):
    """Running per-class sums and counts of feature vectors: the class means of all seen.

    Args:
        num_labels: The label space's size.
        dim: The feature width.

    """

    def __init__(self, num_labels: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("sums", torch.zeros(num_labels, dim, dtype=torch.float64))
        self.register_buffer("counts", torch.zeros(num_labels, dtype=torch.float64))

    def add(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """Add ``features`` (n, d) of classes ``labels`` (n,)."""
        self.sums.index_add_(0, labels, features.to(self.sums.dtype))
        self.counts.index_add_(0, labels, torch.ones_like(labels, dtype=self.counts.dtype))

    def held_bytes(self) -> int:
        """Bytes of the class sums and counts."""
        return tensor_bytes(self.sums, self.counts)

    def means(self) -> torch.Tensor:
        """Each class's mean feature, (L, d) (zeros for a class not seen)."""
        return self.sums / self.counts.clamp(min=1)[:, None]

    def cosine_scores(self, features: torch.Tensor) -> torch.Tensor:
        """Cosine similarity of each feature to each seen class mean, `UNSEEN` elsewhere, (n, L)."""
        means = nn.functional.normalize(self.means().to(features.dtype), dim=1)
        scores = nn.functional.normalize(features, dim=1) @ means.T
        return scores.masked_fill(self.counts[None, :].to(scores.device) == 0, UNSEEN)


class RandomProjection(nn.Module):
    """h = ReLU(f·W), W (d, M) fixed standard normal (RanPAC §3.2, reference ``RanPAC.py``).

    Args:
        dim: The feature width d.
        size: The projection's width M (the paper's 10,000).
        seed: Seeds W.

    """

    def __init__(self, dim: int, size: int, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.register_buffer("weight", torch.randn(dim, size, generator=generator))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(n, d) -> (n, M)."""
        add_flops(2 * features.shape[0] * self.weight.numel())  # a buffer: not counted as N
        return torch.relu(features @ self.weight.to(features.dtype))

    def held_bytes(self) -> int:
        """Bytes of W."""
        return tensor_bytes(self.weight)


class RidgeStatistics(nn.Module):
    """G = Σ h hᵀ and C = Σ h yᵀ of everything seen, RanPAC's ridge regression (§3.3).

    Args:
        size: M, the projected width.
        num_labels: The label space's size.

    """

    def __init__(self, size: int, num_labels: int) -> None:
        super().__init__()
        self.register_buffer("gram", torch.zeros(size, size, dtype=torch.float64))
        self.register_buffer("targets", torch.zeros(size, num_labels, dtype=torch.float64))
        self.register_buffer("seen", torch.zeros(num_labels, dtype=torch.float64))

    def add(self, projected: torch.Tensor, labels: torch.Tensor) -> None:
        """Add projected features h (n, M) of classes ``labels`` (n,)."""
        h = projected.to(self.gram.dtype)
        y = nn.functional.one_hot(labels, self.targets.shape[1]).to(h.dtype)
        add_flops(2 * h.shape[0] * h.shape[1] * (h.shape[1] + y.shape[1]))  # hᵀh and hᵀy
        self.gram += h.T @ h
        self.targets += h.T @ y
        self.seen += y.sum(0)

    def solve(self, ridge: float) -> torch.Tensor:
        """W_o = (G + λI)⁻¹ C, (M, L): the ridge regression of everything seen."""
        eye = torch.eye(self.gram.shape[0], dtype=self.gram.dtype, device=self.gram.device)
        add_flops(solve_flops(*self.targets.shape))
        return torch.linalg.solve(self.gram + ridge * eye, self.targets)

    def held_bytes(self) -> int:
        """Bytes of G, C and the class counts."""
        return tensor_bytes(self.gram, self.targets, self.seen)


def solve_flops(size: int, columns: int) -> float:
    """FLOPs of solving an M x M system for ``columns`` right-hand sides: LU's 2/3·M³ + 2·M²·c."""
    return 2 / 3 * size**3 + 2 * size**2 * columns


def select_ridge(
    projected: torch.Tensor, labels: torch.Tensor, num_labels: int, grid: tuple = RIDGE_GRID
) -> float:
    """λ of ``grid`` with the least hold-out error (the reference's ``optimise_ridge_parameter``).

    Fitted on the first 80% of one task's projected features, scored by the mean squared error
    of the one-hot targets on the other 20% (`holdout_errors`); the grid's middle value where
    either part is empty.
    """
    errors = holdout_errors(projected, labels, num_labels, grid)
    return grid[len(grid) // 2] if errors is None else grid[int(np.argmin(errors))]


def holdout_errors(
    projected: torch.Tensor, labels: torch.Tensor, num_labels: int, grid: tuple = RIDGE_GRID
) -> list[float] | None:
    """Each λ's mean squared hold-out error, or None where the 80/20 split leaves a part empty.

    Each λ's hold-out predictions are the reference's, H_t (HᵀH + λI)⁻¹ HᵀY. Where the fitted
    part has fewer rows n than the projection's width M they are computed in the dual form
    H_t Hᵀ (HHᵀ + λI)⁻¹ Y, the same matrix (Hᵀ(HHᵀ + λI)⁻¹ = (HᵀH + λI)⁻¹Hᵀ for λ > 0): an
    n x n system per λ instead of an M x M one (a task of 2,000 rows against M = 10,000:
    1,600 x 1,600, about 250x fewer FLOPs a solve). Below λ ≈ 1e-6 the M x M system of a
    rank-n Gram matrix is singular to float64 and its answer is rounding; the dual's is not.
    """
    h = projected.to(torch.float64)
    y = nn.functional.one_hot(labels, num_labels).to(h.dtype)
    cut = int(0.8 * len(h))
    if cut == 0 or cut == len(h):
        return None
    fit, held, targets = h[:cut], h[cut:], y[:cut]
    size, tested = h.shape[1], len(h) - cut
    if cut < size:  # dual: K = HHᵀ (n, n), read out by H_t Hᵀ (t, n)
        system, right, readout = fit @ fit.T, targets, held @ fit.T
        add_flops(2 * cut * size * (cut + tested))
    else:  # primal: G = HᵀH (M, M), C = HᵀY (M, L), read out by H_t (t, M)
        system, right, readout = fit.T @ fit, fit.T @ targets, held
        add_flops(2 * cut * size * (size + num_labels))
    width = system.shape[0]
    eye = torch.eye(width, dtype=system.dtype, device=system.device)
    add_flops(len(grid) * (solve_flops(width, num_labels) + 2 * tested * width * num_labels))
    return [
        float(((readout @ torch.linalg.solve(system + r * eye, right) - y[cut:]) ** 2).mean())
        for r in grid
    ]


class HeldFeatures(nn.Module):
    """The current task's frozen features and labels, kept on the run's device until its end.

    RanPAC chooses λ on them (`select_ridge`); a checkpoint holds them (extra state), so a
    resumed task ends as an uninterrupted one would.
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("anchor", torch.zeros(0))  # where they live (moved with the module)
        self.features: list[torch.Tensor] = []
        self.labels: list[torch.Tensor] = []

    def add(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """Keep a batch's features (n, d) and labels (n,)."""
        self.features.append(features.detach())
        self.labels.append(labels.detach())

    def held_bytes(self) -> int:
        """Bytes of the features and labels kept until the task's end."""
        return tensor_bytes(self.features, self.labels)

    def take(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Every kept feature and label, in order, then forget them (None if none)."""
        if not self.features:
            return None
        out = torch.cat(self.features), torch.cat(self.labels)
        self.features, self.labels = [], []
        return out

    def get_extra_state(self) -> Any:
        """The kept features and labels."""
        return {"features": list(self.features), "labels": list(self.labels)}

    def set_extra_state(self, state: Any) -> None:
        """Restore them, on this module's device."""
        device = self.anchor.device
        self.features = [t.to(device) for t in state["features"]]
        self.labels = [t.to(device) for t in state["labels"]]
