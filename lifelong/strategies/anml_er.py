"""ANML-ER (Holla et al., 2020): a neuromodulated prediction network with experience replay.

A neuromodulatory network h_φ (a frozen copy of the pre-trained encoder, then Linear–ReLU–
Linear–sigmoid of width d = hidden size) gates the prediction network's representation element
by element:

    f(x) = g_W2(e_W1(x) ⊙ h_φ(x)),

with e_W1 the trainable encoder and g_W2 the linear head. Episodes and replay queries are OML-ER's
(see `strategies.oml_er`); the inner loop adapts the whole prediction network (encoder and head:
one functional SGD step per support batch, the gate fixed), and the outer loop updates the
prediction network and the gate with first-order gradients. The meta-test runs that same inner
loop on m random memory batches, so it too adapts the whole prediction network with the gate
fixed (Holla's ``cls_anml.py`` ``evaluate()``), not only the head as OML-ER does. The frozen
encoder of h_φ is kept out of every optimiser.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.encoders.base import EncoderOutput
from lifelong.mechanisms.episodes import adapt_per_batch
from lifelong.mechanisms.inner_loop import Params
from lifelong.model import Classifier
from lifelong.options import option_group
from lifelong.strategies.oml_er import OMLER, OMLEROptions
from lifelong.strategy import StrategyContext


class Neuromodulator(nn.Module):
    """h_φ: a frozen encoder copy and a trainable sigmoid gate of the encoder's width.

    Args:
        encoder: The pre-trained encoder; it is copied (before any training) and frozen.

    """

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = copy.deepcopy(encoder).requires_grad_(False)
        d = encoder.hidden_size
        self.gate = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.Sigmoid())

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """The gate (b, d) in [0, 1]; no gradient reaches the frozen encoder.

        Args:
            *inputs: A batch's model inputs (`Batch.inputs`): token ids and attention mask
                (b, t), and token-type ids (b, t) when the rows have them.

        """
        self.encoder.eval()  # frozen: no dropout either
        with torch.no_grad():
            context = self.encoder(*inputs).pooled  # (b, d)
        return self.gate(context)


class GatedClassifier(nn.Module):
    """f(x) = head(encoder(x).pooled ⊙ h_φ(x)).

    Args:
        classifier: The prediction network (encoder e_W1 + head g_W2).
        neuromodulator: h_φ.

    """

    def __init__(self, classifier: Classifier, neuromodulator: Neuromodulator) -> None:
        super().__init__()
        self.classifier = classifier
        self.neuromodulator = neuromodulator

    def features(self, *inputs: torch.Tensor) -> EncoderOutput:
        """The gated encoder output the head reads: every vector ⊙ the gate (b, d).

        Args:
            *inputs: Token ids and attention mask (b, t), and token-type ids (b, t) when the
                rows have them (`Batch.inputs`); both networks read the same inputs.

        """
        encoded = self.classifier.encoder(*inputs)  # hidden (b, t, d)
        return encoded.scaled(self.neuromodulator(*inputs))

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Row scores (n, num_labels), or (n, t, 2) with a span head: ``net(*batch.inputs())``."""
        return self.classifier.head(self.features(*inputs))


@option_group
class ANMLEROptions(OMLEROptions):
    """OML-ER's options (the paper truncates ANML-ER's inputs to 300 tokens, not 448)."""


class ANMLER(OMLER):
    """ANML with experience replay: a gated prediction network adapted in the inner loop.

    Args:
        context: Model, task kind, outer learning rate and batch size.
        options: As OML-ER's.

    """

    name: ClassVar[str] = "anml-er"
    description: ClassVar[str] = "ANML + experience replay: neuromodulated (gated) OML-ER"
    Options = ANMLEROptions
    head_prefix: ClassVar[str] = "classifier.head."

    def _build_net(self, context: StrategyContext) -> nn.Module:
        gated = GatedClassifier(context.model, Neuromodulator(context.model.encoder))
        return gated.to(context.runtime.device)

    def inner_loop(self, support: Sequence[Batch]) -> Params:
        """Prediction-network weights after one SGD step per support batch (gate fixed)."""
        params = {
            name: p
            for name, p in self.net.named_parameters()
            if name.startswith("classifier.") and p.requires_grad
        }
        criterion = self.model.criterion
        return adapt_per_batch(
            self.net,
            params,
            support,
            self.options.inner_lr,
            criterion,
            loss_scale=self.trainer.inner_loss_scale,
        )
