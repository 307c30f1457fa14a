"""SEQ: plain fine-tuning on the stream (the Enc-Dec baseline of MbPA++)."""

from __future__ import annotations

from typing import Annotated, ClassVar

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.replay import ClipOptions
from lifelong.options import Range, option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks


@option_group
class SeqOptions(ClipOptions):
    """Fine-tuning settings: only the gradient clip (none, as Holla's ``cls_baseline.py``)."""

    max_grad_norm: Annotated[float, Range(min=0)] = 0.0


class Seq(StrategyHooks):
    """Fine-tune on every mini-batch as it arrives, with no memory: the lower bound.

    Args:
        context: Model, task kind and optimiser settings.
        options: The gradient clip.

    """

    name: ClassVar[str] = "seq"
    description: ClassVar[str] = "plain sequential fine-tuning, no memory (Enc-Dec baseline)"
    Options = SeqOptions

    def __init__(self, context: StrategyContext, options: SeqOptions | None = None) -> None:
        options = options or SeqOptions()
        self.trainer = context.build_trainer(options.max_grad_norm)
        self.resumable = ResumableParts(trainer=self.trainer)

    def observe(self, batch: Batch) -> dict[str, float]:
        """One optimiser step on the batch."""
        return {"loss": self.trainer.step(batch)}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)
