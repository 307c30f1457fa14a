"""NCM: nearest class mean on the frozen pre-trained encoder, no training at all.

Each class is its mean encoder feature over every training example seen; a test example takes
the class whose mean is nearest in cosine (Rebuffi et al., iCaRL, CVPR 2017, §2.2's
nearest-mean-of-exemplars rule over all examples; the ``ncm`` baseline of McDonald et al.'s
RanPAC reference, ``RanPAC.py`` ``replace_fc``, whose head scores the cosine of the normalised
feature and the normalised class mean, ``inc_net.py`` ``CosineLinear``). The encoder is never
updated, so nothing learnt can be forgotten: what it scores is how well the pre-trained
features alone separate the classes. Classification only (one label per row).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.prototypes import (
    ClassMeans,
    frozen_features,
    label_count,
    one_label_per_row,
)
from lifelong.options import option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks


@option_group
class NCMOptions:
    """NCM has no options: the class means of the frozen encoder's features decide."""


class NCM(StrategyHooks):
    """Nearest class mean (cosine) on the frozen encoder's pooled features.

    Args:
        context: Model (its encoder is only read), task kind and device.
        options: None to set.

    Raises:
        ValueError: The task kind is not classification.

    """

    name: ClassVar[str] = "ncm"
    description: ClassVar[str] = "nearest class mean (cosine) on the frozen encoder: no training"
    kinds: ClassVar[tuple[str, ...]] = ("classification",)
    Options = NCMOptions

    def __init__(self, context: StrategyContext, options: NCMOptions | None = None) -> None:
        if context.kind.name != "classification":
            raise ValueError(f"ncm classifies by class means: not a {context.kind.name} stream")
        self.model = context.model
        width, labels = self.model.encoder.hidden_size, label_count(self.model)
        self.means = ClassMeans(labels, width).to(context.runtime.device)
        self.resumable = ResumableParts(means=self.means)

    def observe(self, batch: Batch) -> dict[str, float]:
        """Add the batch's features to their classes' sums (no update of any weight)."""
        self.means.add(frozen_features(self.model, batch), one_label_per_row(batch))
        return {}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Cosine of each row's feature to each seen class mean (`ClassMeans.cosine_scores`)."""
        return self.means.cosine_scores(frozen_features(self.model, batch))

    def report(self) -> dict[str, float]:
        """Classes with a mean."""
        return {"classes": int((self.means.counts > 0).sum())}
