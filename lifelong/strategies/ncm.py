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
from lifelong.mechanisms.warmup import FirstTaskWarmup, WarmupOptions
from lifelong.options import option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.streams.core import TaskStream


@option_group
class NCMOptions(WarmupOptions):
    """NCM's one option: a first-task warm-up of the encoder before it is frozen.

    None by default (the pre-trained encoder's class means); SEQ*'s is 0.375
    (`lifelong.mechanisms.warmup`).
    """


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
        options = options or NCMOptions()
        self.warmup = FirstTaskWarmup(context, options.warmup_fraction)
        self.resumable = ResumableParts(means=self.means, warmup=self.warmup)

    def on_stream_start(self, stream: TaskStream) -> None:
        """Size the warm-up, if any, on the first task."""
        self.warmup.on_stream_start(stream)

    def observe(self, batch: Batch) -> dict[str, float]:
        """Add the batch's features to their classes' sums (no weight is updated).

        During a warm-up the batch trains the model instead and is kept; when the warm-up ends
        the kept batches' features (by the now frozen encoder) are added.
        """
        return self.warmup.feed(batch, self.add)

    def add(self, batch: Batch) -> None:
        """Add a batch's features to their classes' sums."""
        self.means.add(frozen_features(self.model, batch), one_label_per_row(batch))

    def predict(self, batch: Batch) -> torch.Tensor:
        """Cosine of each row's feature to each seen class mean (`ClassMeans.cosine_scores`)."""
        return self.means.cosine_scores(frozen_features(self.model, batch))

    def report(self) -> dict[str, float]:
        """Classes with a mean."""
        return {"classes": int((self.means.counts > 0).sum())}
