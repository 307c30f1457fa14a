"""Linear probes on the encoder: how much of each task its representation still holds.

Tao et al. ("Can BERT Refrain from Forgetting on Sequential Tasks? A Probing Study", ICLR 2023,
§3-4) separate what a continual learner forgets in its representation from what it forgets in
its classifier: after each task, a linear classifier is fitted on the frozen encoder's features
of a task's training examples and scored on its test examples. If the probe still scores a task
well while the model does not, the task was forgotten in the head (or the decision rule), not
in the encoder.

`LinearProbe` does this for a run (``--probe``): before training, on every task (what the
pre-trained encoder alone separates), and after each task, on every task seen so far. The
probe is scikit-learn's ``LogisticRegression`` (L2, C = 1, lbfgs: its defaults; ``max_iter``
1,000 so that it converges) on the encoder's pooled vectors of the task's rows, predicting the
task's own labels. It reads the model and changes nothing; its forward passes are not counted
in the run's cost (`lifelong.cost`), being a measurement, not part of the method.

`probe_metrics` turns the probing matrix P into the report's split of forgetting: the probe's
own forgetting (representation forgetting, `lifelong.metrics.forgetting` of P) and the rest of
the model's forgetting (head and decision drift).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from lifelong.mechanisms.prototypes import frozen_features, one_label_per_row
from lifelong.metrics import forgetting
from lifelong.streams.core import Example, batches
from lifelong.training import evaluating

if TYPE_CHECKING:
    from lifelong.model import Classifier
    from lifelong.streams.core import TaskStream
    from lifelong.tasks import TaskKind

MAX_ITER = 1_000
"""Iterations of the probe's lbfgs (scikit-learn's default, 100, stops short on 384-wide
features of 2,000 rows)."""


class LinearProbe:
    """Fits and scores a linear probe per task on the model's current encoder.

    Args:
        model: The run's model (its encoder's pooled vectors are the features).
        kind: The stream's task kind (classification: one label per row).
        stream: The tasks.
        batch_size: Rows per encoder pass.

    Raises:
        ValueError: The task kind is not classification.

    """

    def __init__(
        self, model: Classifier, kind: TaskKind, stream: TaskStream, batch_size: int = 64
    ) -> None:
        if kind.name != "classification":
            raise ValueError(f"--probe fits a classifier per task: not on a {kind.name} stream")
        self.model, self.kind, self.stream, self.batch_size = model, kind, stream, batch_size

    def features(self, examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
        """The encoder's pooled vectors (n, d) and the labels (n,) of ``examples``."""
        vectors, labels = [], []
        for chunk in batches(examples, self.batch_size):
            batch = self.kind(list(chunk))
            with torch.no_grad():
                vectors.append(frozen_features(self.model, batch).float().cpu().numpy())
            labels.append(one_label_per_row(batch).cpu().numpy())
        return np.concatenate(vectors), np.concatenate(labels)

    def score(self, task: int) -> float:
        """The probe's test accuracy (percent) on task ``task``, fitted on its training rows."""
        from sklearn.linear_model import LogisticRegression

        spec = self.stream.tasks[task]
        x, y = self.features(spec.train)
        x_test, y_test = self.features(spec.test)
        if len(np.unique(y)) < 2:  # one class: the probe predicts it
            return 100.0 * float(np.mean(y_test == y[0]))
        probe = LogisticRegression(max_iter=MAX_ITER).fit(x, y)
        return 100.0 * float(np.mean(probe.predict(x_test) == y_test))

    def row(self, trained: int) -> np.ndarray:
        """One row of P, (T,): every task before training (``trained`` 0), else the seen ones.

        Tasks not yet seen are NaN in the rows after training.
        """
        seen = len(self.stream) if trained == 0 else trained
        out = np.full(len(self.stream), np.nan)
        with evaluating(self.model):
            for j in range(seen):
                out[j] = self.score(j)
        return out


def probe_metrics(probing: np.ndarray, forgot: float | None) -> dict[str, float | None]:
    """The probing matrix's summary, for ``metrics.json``.

    Args:
        probing: P, (T + 1, T): the untrained row, then one row per trained task.
        forgot: The run's forgetting (`lifelong.metrics.forgetting` of R), or None.

    Returns:
        ``probe_before`` (the pre-trained encoder's probe accuracy, mean over tasks),
        ``probe_average_accuracy`` (the final row's mean), ``probe_forgetting`` (representation
        forgetting: the forgetting of P) and ``head_forgetting`` (the model's forgetting minus
        the probe's: what the head and decision rule lost); None where undefined.

    """
    after = probing[1:]
    complete = len(after) == after.shape[1] and not np.isnan(after[-1]).any()
    represented = forgetting(after) if complete else None
    rest = None if represented is None or forgot is None else forgot - represented
    return {
        "probe_before": _rounded(np.nanmean(probing[0])),
        "probe_average_accuracy": _rounded(np.nanmean(after[-1])) if complete else None,
        "probe_forgetting": _rounded(represented),
        "head_forgetting": _rounded(rest),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 4)
