"""RanPAC: random projection and an incremental ridge classifier on the frozen encoder.

McDonald, Gong, Zhang, Abbasnejad and van den Hengel, "RanPAC: Random Projections and
Pre-trained Models for Continual Learning" (NeurIPS 2023): each example's frozen feature f is
projected by a fixed random matrix W (d × M, standard normal) through a ReLU, h = ReLU(f·W)
(§3.2, Eq. 4); the Gram matrix G = Σ h hᵀ and C = Σ h yᵀ (y one-hot) grow with every example,
and the classifier is the ridge regression W_o = (G + λI)⁻¹ C (§3.3, Eq. 5-6), the same as if
it were fitted on everything seen at once: nothing is forgotten by the classifier. λ is chosen
at each task's end from the grid 10^-8 ... 10^8 on an 80/20 split of that task's features, as
the reference ``RanPAC.py`` (``replace_fc``, ``optimise_ridge_parameter``) does; its logits are
h·W_o (``inc_net.py`` ``CosineLinear`` with ``use_RP``), among the classes seen.

Defaults: M = 10,000, the paper's (§4, "we use M = 10000"), whose 10,000 × 10,000 solve is the
cost of a task's end on a CPU (seconds to minutes); the first-session adaptation of the
encoder (the paper's Phase 1, PETL on the first task) is not done: this is RanPAC on the
frozen pre-trained encoder (Phase 2 alone). Classification only. No text result of RanPAC
has been published.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.prototypes import (
    UNSEEN,
    HeldFeatures,
    RandomProjection,
    RidgeStatistics,
    frozen_features,
    label_count,
    one_label_per_row,
    select_ridge,
)
from lifelong.mechanisms.warmup import FirstTaskWarmup, WarmupOptions
from lifelong.options import Range, option_group
from lifelong.state import Counters, ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.streams.core import TaskStream


@option_group
class RanPACOptions(WarmupOptions):
    """The random projection's width (RanPAC §4) and a first-task warm-up (none by default).

    Attributes:
        projection: M, the width of h = ReLU(f·W) (the paper's 10,000; 0 keeps f itself,
            the reference's ``M = 0``: decorrelation without projection).
        warmup_fraction: The first task's mini-batches that train the whole model before the
            encoder is frozen (`lifelong.mechanisms.warmup`; 0, the default: none; SEQ*'s
            0.375 stands in for the paper's Phase 1, §3.4).

    """

    projection: Annotated[int, Range(min=0)] = 10_000  # RanPAC §4: M = 10000


class RanPAC(StrategyHooks):
    """Random projection, then an incrementally updated ridge classifier, on frozen features.

    Args:
        context: Model (its encoder is only read), task kind, seed and device.
        options: The projection's width.

    Raises:
        ValueError: The task kind is not classification.

    """

    name: ClassVar[str] = "ranpac"
    description: ClassVar[str] = (
        "RanPAC: frozen features, a random ReLU projection, an incremental ridge classifier"
    )
    kinds: ClassVar[tuple[str, ...]] = ("classification",)
    Options = RanPACOptions

    def __init__(self, context: StrategyContext, options: RanPACOptions | None = None) -> None:
        if context.kind.name != "classification":
            raise ValueError(f"ranpac classifies by class: not a {context.kind.name} stream")
        self.options = options or RanPACOptions()
        self.model = context.model
        width, labels = self.model.encoder.hidden_size, label_count(self.model)
        device = context.runtime.device
        size = self.options.projection or width
        self.projection = (
            RandomProjection(width, size, seed=context.seed).to(device)
            if self.options.projection
            else None
        )
        self.ridge = RidgeStatistics(size, labels).to(device)
        self.held = HeldFeatures().to(device)  # the task's features, to choose λ at its end
        self.solution = torch.zeros(size, labels, dtype=torch.float64, device=device)
        self.chosen = Counters(ridge_exponent=0, solved=0)
        self.warmup = FirstTaskWarmup(context, self.options.warmup_fraction)  # Phase 1, if any
        parts = {"ridge": self.ridge, "held": self.held, "chosen": self.chosen}
        parts["warmup"] = self.warmup
        if self.projection is not None:
            parts["projection"] = self.projection
        self.resumable = ResumableParts(**parts)

    def project(self, features: torch.Tensor) -> torch.Tensor:
        """The projection of frozen features f: ReLU(f·W), or f itself without one, (n, M)."""
        return features if self.projection is None else self.projection(features)

    def on_stream_start(self, stream: TaskStream) -> None:
        """Size the warm-up, if any, on the first task."""
        self.warmup.on_stream_start(stream)

    def observe(self, batch: Batch) -> dict[str, float]:
        """Add the batch's h hᵀ and h yᵀ to G and C (no weight is updated).

        During a warm-up (RanPAC's Phase 1, SEQ*'s length) the batch trains the model instead
        and is kept; when it ends the kept batches are added with the frozen encoder.
        """
        return self.warmup.feed(batch, self.add)

    def add(self, batch: Batch) -> None:
        """Add a batch's projected features to G and C, and keep them for λ."""
        features, labels = frozen_features(self.model, batch), one_label_per_row(batch)
        self.ridge.add(self.project(features), labels)
        self.held.add(features, labels)

    def on_task_end(self, task: int) -> None:
        """Choose λ on the task's features and solve W_o = (G + λI)⁻¹ C."""
        held = self.held.take()
        labels = self.ridge.targets.shape[1]
        ridge = 1.0 if held is None else select_ridge(self.project(held[0]), held[1], labels)
        self.chosen.ridge_exponent = round(float(torch.tensor(ridge).log10()))
        self.chosen.solved += 1
        self._solve()

    def _solve(self) -> None:
        self.solution = self.ridge.solve(10.0**self.chosen.ridge_exponent)

    def load_state_dict(self, state: dict) -> None:
        """Restore G, C, λ and W; W_o is solved again from them (it is not stored)."""
        super().load_state_dict(state)
        if self.chosen.solved:
            self._solve()

    def predict(self, batch: Batch) -> torch.Tensor:
        """h·W_o among the classes seen (`UNSEEN` for the others), (n, L)."""
        projected = self.project(frozen_features(self.model, batch))
        scores = (projected.to(self.solution.dtype) @ self.solution).float()
        if not self.chosen.solved:
            return torch.full_like(scores, UNSEEN)
        return scores.masked_fill(self.ridge.seen[None, :] == 0, UNSEEN)

    def report(self) -> dict[str, float]:
        """The projection's width, the last λ chosen and the classes seen."""
        return {
            "projection": float(self.solution.shape[0]),
            "ridge": 10.0**self.chosen.ridge_exponent,
            "classes": int((self.ridge.seen > 0).sum()),
        }
