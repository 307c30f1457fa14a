"""Online EWC: elastic weight consolidation with a running Fisher (Schwarz et al., 2018).

The loss adds (λ/2) Σ_i F_i (θ_i − θ*_i)², where θ* are the weights at the end of the previous
task and F the diagonal Fisher information, accumulated online: F ← γ F + F_task.

**EWC needs task boundaries**, which the papers' setting does not give the learner. It uses the
learner loop's optional hooks: ``on_task_end`` computes F_task (the empirical Fisher: mean
squared per-example gradients of the log-likelihood of the true labels, over a reservoir sample
of the task's training examples) and moves the anchor θ*. Without those hooks it is plain
fine-tuning.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.mechanisms.replay import ClipOptions
from lifelong.memory import EpisodicMemory, ReservoirWrite
from lifelong.options import NonNegativeFloat, PositiveInt, Probability, option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks

Params = dict[str, torch.Tensor]


@option_group
class EWCOptions(ClipOptions):
    """Online EWC settings (Schwarz et al., 2018; not in the MbPA++ paper: untuned defaults)."""

    ewc_lambda: NonNegativeFloat = 1_000.0  # λ: weight of the quadratic penalty
    gamma: Probability = 1.0  # γ: decay of the accumulated Fisher (1 = keep all of it)
    fisher_samples: PositiveInt = 200  # training examples per task behind its Fisher (reservoir)


def ewc_penalty(params: Params, anchor: Params, fisher: Params) -> torch.Tensor:
    """Σ_i F_i (θ_i − θ*_i)² over the named parameters (without the λ/2 factor)."""
    terms = [(fisher[k] * (params[k] - anchor[k]) ** 2).sum() for k in fisher]
    if not terms:
        return next(iter(params.values())).new_zeros(()) if params else torch.zeros(())
    return torch.stack(terms).sum()


class FisherState:
    """The running Fisher F and the anchor θ*, with a ``state_dict``.

    Args:
        model: The model whose parameters F and θ* are kept for (restored next to them).

    Attributes:
        fisher: The running diagonal Fisher F, by parameter name (empty before a task ends).
        anchor: θ*, the weights at the end of the previous task.

    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.fisher: Params = {}
        self.anchor: Params = {}

    def penalty(self, params: Params) -> torch.Tensor:
        """Σ_i F_i (θ_i − θ*_i)² at ``params`` (`ewc_penalty`; zero before a task ends)."""
        return ewc_penalty(params, self.anchor, self.fisher)

    def held_bytes(self) -> int:
        """Bytes of F and θ* (a copy of every weight each)."""
        from lifelong.cost import tensor_bytes

        return tensor_bytes(self.fisher, self.anchor)

    def state_dict(self) -> dict[str, Params]:
        """F and θ*."""
        return {"fisher": self.fisher, "anchor": self.anchor}

    def load_state_dict(self, state: dict[str, Params]) -> None:
        """Restore F and θ*, each on its parameter's device (checkpoints load on the CPU)."""
        where = {name: p.device for name, p in self.model.named_parameters()}
        self.fisher = {k: v.to(where[k]) for k, v in state["fisher"].items()}
        self.anchor = {k: v.to(where[k]) for k, v in state["anchor"].items()}


class EWC(StrategyHooks):
    """Fine-tuning with an online-EWC penalty that anchors the weights of earlier tasks.

    Args:
        context: Model, task kind and optimiser settings.
        options: λ, γ, the Fisher sample size and the gradient clip.

    """

    name: ClassVar[str] = "ewc"
    description: ClassVar[str] = "online EWC penalty (uses the loop's task-boundary hooks)"
    Options = EWCOptions

    def __init__(self, context: StrategyContext, options: EWCOptions | None = None) -> None:
        self.options = options or EWCOptions()
        self.model, self.kind = context.model, context.kind
        self.trainer = context.build_trainer(self.options.max_grad_norm)
        self.state = FisherState(context.model)
        # a reservoir of this task's examples; only read back in full, so it stores no keys
        self.sample = EpisodicMemory(
            0, policy=ReservoirWrite(self.options.fisher_samples), seed=context.seed
        )
        self.resumable = ResumableParts(trainer=self.trainer, ewc=self.state, sample=self.sample)

    def _named(self) -> Params:
        return {n: p for n, p in self.model.named_parameters() if p.requires_grad}

    def penalty(self) -> torch.Tensor:
        """(λ/2) Σ F (θ − θ*)²; zero before the first task ends and at the anchor."""
        return 0.5 * self.options.ewc_lambda * self.state.penalty(self._named())

    def observe(self, batch: Batch) -> dict[str, float]:
        """One update on the task loss plus the EWC penalty."""
        self.model.train()
        self.trainer.optimizer.zero_grad(set_to_none=True)
        ce = self.model.loss(batch)
        penalty = self.penalty()
        self.trainer.backward(ce + penalty)
        self.trainer.apply()
        examples = batch.examples.only(self.kind.stored_fields)
        self.sample.write(examples)
        return {"loss": float(ce.detach()), "ewc": float(penalty.detach())}

    def fisher_information(self) -> Params:
        """The empirical diagonal Fisher over this task's sampled examples."""
        fisher = {n: torch.zeros_like(p) for n, p in self._named().items()}
        self.model.eval()  # no dropout noise in the curvature estimate
        for slot in range(len(self.sample)):
            example = self.kind.rows(self.sample.get(np.array([slot])).examples)
            self.model.zero_grad(set_to_none=True)
            s = self.trainer.inner_loss_scale  # 1, or fp16's static scale against underflow
            (self.model.loss(example) * s).backward()
            for n, p in self._named().items():
                if p.grad is not None:
                    fisher[n] += (p.grad.detach() / s) ** 2
        self.model.zero_grad(set_to_none=True)
        return {n: f / max(1, len(self.sample)) for n, f in fisher.items()}

    def on_task_end(self, task_index: int) -> None:
        """Fold this task's Fisher into the running one and move the anchor here."""
        new = self.fisher_information()
        gamma = self.options.gamma
        old = self.state.fisher
        self.state.fisher = {n: gamma * old[n] + f if n in old else f for n, f in new.items()}
        self.state.anchor = {n: p.detach().clone() for n, p in self._named().items()}
        self.sample.clear()

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)
