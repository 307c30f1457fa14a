"""Local adaptation as de Masson d'Autume et al. (2019, §3.3) state it, one test input at a time.

For a test input x with K nearest memories {(x_k, y_k)} (retrieved by the key network), MbPA++
predicts with weights

    W_x = argmin_W~  λ ||W~ − W||²  −  Σ_k α_k log p(y_k | x_k; W~),   α_k = 1/K,

approximated by L gradient steps from W (`lifelong.mechanisms.inner_loop.local_adapt`: SGD
with momentum, as EM-in-LLL's ``test.py`` takes them); then it predicts x with W_x and starts
the next input from W again. The base weights W are never modified. This file is that
procedure and nothing else; `lifelong.mechanisms.fast` and `lifelong.mechanisms.lowrank`
compute the same adaptation faster (tested against this one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.mechanisms.inner_loop import Params, local_adapt
from lifelong.mechanisms.scopes import Scope
from lifelong.model import PADDING_SCORE, Classifier
from lifelong.runtime import eager_call


def reference_logits(
    model: Classifier,
    scope: Scope,
    neighbours: Callable[[np.ndarray], Batch],
    batch: Batch,
    slots: np.ndarray,
    adapt: Mapping[str, Any],
) -> torch.Tensor:
    """Adapt, predict and reset for one test input at a time (full forward passes).

    Args:
        model: The trained model; its weights W are only read.
        scope: Which weights W~ adapts (`Scope.params`; the paper: all).
        neighbours: The memory examples of some slots as one batch of rows (`EpisodicWriter.batch`).
        batch: The test inputs' rows.
        slots: Each test input's K retrieved memory slots, shape (inputs, K).
        adapt: L, the step size, λ, the momentum and the loss scale (`local_adapt`'s keywords).

    Returns:
        Row scores: (n, num_labels), or (n, t, 2) for QA spans, rows in batch order.

    """
    out = []
    for i in range(batch.num_examples):
        memories = neighbours(slots[i])  # the K nearest memories' rows

        def loss(p: Params, nb: Batch = memories) -> torch.Tensor:  # −Σ_k α_k log p(y_k | x_k; W~)
            logits = eager_call(model, p, nb.inputs())
            return model.criterion(logits, nb)

        adapted = local_adapt(loss, scope.params(model), **adapt)  # W_x, from W; W untouched
        test = batch.select(batch.example_rows(i))  # its rows, trimmed to their length
        with torch.no_grad():
            logits = eager_call(model, adapted, test.inputs())
        if logits.dim() == 3:  # token scores: pad back to the batch's t
            pad = batch.input_ids.shape[1] - logits.shape[1]
            logits = nn.functional.pad(logits, (0, 0, 0, pad), value=PADDING_SCORE)
        out.append(logits)
    return torch.cat(out)  # (n, num_labels) or (n, t, 2), rows in batch order
