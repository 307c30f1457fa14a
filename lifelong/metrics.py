"""Continual-learning metrics as pure functions of the accuracy matrix.

``R[i, j]`` is the accuracy on task ``j``'s test set after training on tasks ``0..i``;
``b[j]`` is the accuracy on task ``j`` before any training. Metrics keep R's unit (percent here).
Definitions follow Lopez-Paz & Ranzato (2017) for BWT/FWT and Chaudhry et al. (2018) for
forgetting.
"""

from __future__ import annotations

import numpy as np


def _check(R: np.ndarray) -> np.ndarray:
    R = np.asarray(R, dtype=np.float64)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] == 0:
        raise ValueError(f"accuracy matrix must be square and non-empty, got shape {R.shape}")
    return R


def average_accuracy(R: np.ndarray) -> float:
    """Mean accuracy over all tasks after the last task: (1/T) Σ_j R[T-1, j]."""
    R = _check(R)
    return float(R[-1].mean())


def backward_transfer(R: np.ndarray) -> float | None:
    """BWT = 1/(T-1) Σ_{j<T-1} (R[T-1, j] − R[j, j]); negative means forgetting.

    ``None`` if T = 1: with one task there is nothing to transfer to (not "no forgetting").
    """
    R = _check(R)
    T = R.shape[0]
    if T == 1:
        return None
    return float(np.mean([R[-1, j] - R[j, j] for j in range(T - 1)]))


def forward_transfer(R: np.ndarray, b: np.ndarray) -> float | None:
    """FWT = 1/(T-1) Σ_{j>0} (R[j-1, j] − b[j]); ``None`` if T = 1.

    What training on earlier tasks gives a task before it is trained, over the untrained model.
    """
    R = _check(R)
    b = np.asarray(b, dtype=np.float64)
    T = R.shape[0]
    if b.shape != (T,):
        raise ValueError(f"b must have shape ({T},), got {b.shape}")
    if T == 1:
        return None
    return float(np.mean([R[j - 1, j] - b[j] for j in range(1, T)]))


def forgetting(R: np.ndarray) -> float | None:
    """Average forgetting: 1/(T-1) Σ_{j<T-1} max_{j<=l<T-1} (R[l, j]) − R[T-1, j].

    The maximum runs over the rows after task ``j`` was trained and before the last one (the
    best the model ever was on ``j``), so forgetting is >= 0 unless the final row improves on
    every earlier one. ``None`` if T = 1.
    """
    R = _check(R)
    T = R.shape[0]
    if T == 1:
        return None
    return float(np.mean([R[j : T - 1, j].max() - R[-1, j] for j in range(T - 1)]))


def summary(R: np.ndarray, b: np.ndarray) -> dict[str, float | None]:
    """All four metrics in one dict: ``average_accuracy``, ``bwt``, ``fwt``, ``forgetting``.

    BWT, FWT and forgetting are ``None`` (null in ``metrics.json``, "n/a" when printed) for a
    single-task stream.
    """
    return {
        "average_accuracy": average_accuracy(R),
        "bwt": backward_transfer(R),
        "fwt": forward_transfer(R, b),
        "forgetting": forgetting(R),
    }
