"""A run's printed report: its matrices and metrics as text (`format_report`).

What ``lifelong run`` prints, `RunOutcome.summary` and `RunRecord.summary` return: each
stream's metric by its name (accuracy; F1 and exact match for QA; FewRel's pooled accuracy, its
headline in Holla et al. 2020), counts as integers, and a line for every task that caused no
update (a task too small for one of a meta-learner's outer updates) or moved no score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lifelong.learner import StreamResult

METRIC_LABELS = {"accuracy": "Accuracy", "f1": "F1", "exact_match": "Exact match"}
"""How each metric is named in a report."""

POOLED_STREAMS = ("fewrel",)
"""Streams whose headline is the pooled accuracy (Holla et al. 2020 report FewRel's so)."""


def format_report(result: StreamResult, metrics: dict[str, Any], *, stream: str = "") -> str:
    """The matrices (accuracy, or F1 and exact match for QA) and the metrics table as text.

    Args:
        result: The run's matrices.
        metrics: Its ``metrics.json``.
        stream: The stream's name (``text``, ``qa``, ``fewrel``): FewRel's report leads with
            the pooled accuracy, which elsewhere only repeats the average.

    """
    matrices = [(result.metric, result.to_frame())] + [
        (name, result.to_frame(name)) for name in result.secondary
    ]
    text = "\n\n".join(
        f"{METRIC_LABELS.get(name, name)} matrix (%; row = after training, column = task):\n"
        + frame.to_string(float_format=lambda x: f"{x:6.1f}")
        for name, frame in matrices
    )
    label = METRIC_LABELS.get(result.metric, result.metric)
    names = {
        **({"pooled_accuracy": "pooled accuracy"} if stream in POOLED_STREAMS else {}),
        "average_accuracy": "average accuracy"
        if result.metric == "accuracy"
        else f"average {label}",
        "bwt": "BWT",
        "fwt": "FWT",
        "forgetting": "forgetting",
    }
    table = "\n".join(f"  {name:<17}{_points(metrics[key])}" for key, name in names.items())
    for key, value in dict(metrics.get("strategy", {})).items():
        table += f"\n  {key:<17}{_plain_number(value)}"
    if result.metric != "accuracy":
        table = f"  (from the {label} matrix)\n" + table
    if len(result.task_names) < 2:
        table += "\n  (BWT, FWT and forgetting need two tasks or more)"
    elif metrics.get("joint_training"):
        table += "\n  (joint training: every row has seen every task, so no BWT, FWT or forgetting)"
    for line in quiet_tasks(result):
        table += f"\n  ({line})"
    return f"{text}\n\nMetrics (points):\n{table}"


def quiet_tasks(result: StreamResult) -> list[str]:
    """A line for each task that caused no update, or after which no score moved.

    A meta-learner updates once per episode (OML-ER: b·m = 96 examples), so a FewRel cluster
    of fewer training sentences takes no update and its row repeats the row before.
    """
    rows = np.vstack([result.before[None, :], result.accuracy])
    updates = result.updates or (None,) * len(result.accuracy)
    if len(updates) > 1 and all(count == 0 for count in updates):  # NCM, RanPAC: by design
        return ["no task caused an update: no weight was trained"]
    lines = []
    for i, (name, count) in enumerate(zip(result.task_names, updates)):
        same = np.array_equal(rows[i + 1], rows[i])
        if count == 0:
            lines.append(
                f"{name} caused no update" + (": every score is as before" if same else "")
            )
        elif same:
            lines.append(f"after {name}, every score is as in the row before")
    return lines


def _plain_number(value: Any) -> str:
    """A count as a count (``2500``, not ``2.5e+03``), a rate with 4 significant digits."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        return f"{value!s:>7}"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):7d}"
    return f"{float(value):7.4g}"


def _points(value: float | None) -> str:
    return f"{'n/a':>7}" if value is None else f"{value:7.1f}"
