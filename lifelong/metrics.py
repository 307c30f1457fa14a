"""Continual-learning metrics as pure functions of the accuracy matrix.

``R[i, j]`` is the accuracy on task ``j``'s test set after training on tasks ``0..i``;
``b[j]`` is the accuracy on task ``j`` before any training. Metrics keep R's unit (percent here).
Definitions follow Lopez-Paz & Ranzato (2017) for BWT/FWT. Forgetting comes in two variants (see
`forgetting`): ours by default, the best accuracy since the task was trained, and Chaudhry et al.'s
(2018), the best accuracy in any earlier row.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Since = Literal["trained", "any"]
"""Which earlier rows `forgetting` takes the best accuracy from."""

SEQUENTIAL_METRICS = ("bwt", "fwt", "forgetting", "forgetting_any")
"""The `summary` keys that read R as a sequence of tasks: undefined for a joint learner (MTL),
whose rows have all seen every task."""


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


def forgetting(R: np.ndarray, since: Since = "trained") -> float | None:
    """Average forgetting of the tasks before the last: 1/(T-1) Σ_{j<T-1} f_j.

    ``f_j = max_l R[l, j] − R[T-1, j]``: the best accuracy on task ``j`` in an earlier row minus
    its final accuracy. The two variants differ only in the rows ``l`` the maximum runs over:

    - ``since="trained"`` (the default, this library's definition): ``j <= l < T-1``, the rows
      after task ``j`` was trained, so a task is measured against what training on it achieved.
    - ``since="any"``: ``0 <= l < T-1``, every earlier row, including those before ``j`` was
      trained, as in Chaudhry et al. (2018), "Riemannian Walk for Incremental Learning", §4,
      average forgetting ``F_k`` with ``f_j^k = max_{l in 1..k-1} a_{l,j} − a_{k,j}``.

    They differ only where a task scores higher before it is trained than in any row since, e.g.
    Amazon after Yelp, which share the rating labels. Both are >= 0 unless the final row
    improves on every earlier one. ``None`` if T = 1.

    Args:
        R: The T x T accuracy matrix.
        since: ``"trained"`` or ``"any"``, the rows the best earlier accuracy is taken from.

    Returns:
        The average forgetting, in R's unit, or ``None`` for a single task.

    Raises:
        ValueError: ``R`` is not square and non-empty, or ``since`` is neither variant.

    """
    R = _check(R)
    if since not in ("trained", "any"):
        raise ValueError(f"since must be 'trained' or 'any', got {since!r}")
    T = R.shape[0]
    if T == 1:
        return None
    gaps = [R[_first_row(j, since) : T - 1, j].max() - R[-1, j] for j in range(T - 1)]
    return float(np.mean(gaps))


def _first_row(j: int, since: Since) -> int:
    # the first row forgetting looks back to for task j: its own (trained) or the first (any)
    return j if since == "trained" else 0


def pooled_accuracy(R: np.ndarray, test_sizes: np.ndarray | None, row: int = -1) -> float | None:
    """The accuracy over the union of all test sets after row ``row``: sizes weight the tasks.

    Holla et al. (2020) score lifelong FewRel on one test set of every relation
    (``train_rel.py``), which is this for the last row; with equal test sets (text
    classification: 7,600 each) it equals the average accuracy. ``None`` without sizes.
    """
    R = _check(R)
    if test_sizes is None:
        return None
    weights = np.asarray(test_sizes, dtype=float)
    if weights.shape != (R.shape[1],) or not weights.sum() > 0:
        raise ValueError(f"need {R.shape[1]} positive test-set sizes, got {test_sizes}")
    return float(np.dot(R[row], weights) / weights.sum())


def summary(
    R: np.ndarray, b: np.ndarray, test_sizes: np.ndarray | None = None
) -> dict[str, float | None]:
    """The metrics in one dict: pooled and average accuracy, BWT, FWT, both forgettings.

    ``pooled_accuracy`` (`pooled_accuracy`, ``None`` without ``test_sizes``) is FewRel's
    headline number. ``forgetting`` is the default variant (best accuracy since the task was
    trained), ``forgetting_any`` Chaudhry et al.'s (2018, best accuracy in any earlier row); see
    `forgetting`. BWT, FWT and both forgettings are ``None`` (null in ``metrics.json``, "n/a"
    when printed) for a single-task stream.
    """
    return {
        "pooled_accuracy": pooled_accuracy(R, test_sizes),
        "average_accuracy": average_accuracy(R),
        "bwt": backward_transfer(R),
        "fwt": forward_transfer(R, b),
        "forgetting": forgetting(R),
        "forgetting_any": forgetting(R, since="any"),
    }
