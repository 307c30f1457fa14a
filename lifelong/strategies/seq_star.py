"""SEQ*: sequential fine-tuning done right, the strong memory-free baseline (Zheng et al., 2024).

Zheng et al. ("Learn or Recall? Revisiting Incremental Learning with Pre-trained Language
Models", ACL 2024) show that plain sequential fine-tuning (SEQ) forgets mostly in its
classifier, not in the pre-trained encoder, and add four tricks to SEQ (their reference
configuration ``SEQ_pre_warm_fix.yaml`` of ``zzz47zzz/codebase-for-incremental-learning-with-
llm``; the code is ``models/SEQ.py``):

* **W, warm-up, then FixB**: on the first task the whole model trains for a while (3 epochs),
  then the encoder is frozen for the rest of the stream (``SEQ_warmup_epoch_before_fix_encoder``,
  ``SEQ_fix_encoder``; ``models/SEQ.py`` L152–155, L179–184);
* **FixC**: the classifier rows of earlier tasks' classes are frozen (learning rate 0;
  ``SEQ_fix_old_classifier``, L114–116); their logits stay in the softmax as fixed negatives;
* **P**: every class's logit is in the loss from the start, the future ones pushed down as
  negatives (``SEQ_preallocated_classifier``, L226–227); predictions are the argmax over the
  classes seen so far (``utils/evaluation.py`` L99–101);
* **Cos**: a cosine classifier (``CosineLinear``; the paper's best without stored examples).

Single pass: the reference trains 3 + 5 epochs on the first task and 5 on each later one; here
the learner makes one pass, so the warm-up is the first ``warmup_fraction`` (3/8, the
reference's 3 of 8 epochs) of the first task's mini-batches. The merged label space of the five
text datasets shares Yelp's and Amazon's rating classes: a class of an earlier task that the
current task also has is trained again (the paper's tasks share no class). On relation
extraction and QA (pair and span heads, no classes to freeze) SEQ* is W + FixB only.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

import torch

from lifelong.batch import Batch
from lifelong.heads import CosineHead
from lifelong.mechanisms.replay import ClipOptions
from lifelong.options import PositiveFloat, Probability, Range, option_group
from lifelong.state import Counters
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.streams.core import TaskStream
from lifelong.training import evaluating


@option_group
class SeqStarOptions(ClipOptions):
    """The four tricks of SEQ* and their learning rates (reference defaults, see the module)."""

    max_grad_norm: Annotated[float, Range(min=0)] = 0.0  # models/SEQ.py: no clip
    # the first task's mini-batches trained with the encoder before it is frozen: 3 warm-up
    # epochs of the reference's 3 + 5 (SEQ_warmup_epoch_before_fix_encoder: 3)
    warmup_fraction: Probability = 0.375
    freeze_old_classes: bool = True  # FixC: earlier tasks' classifier rows frozen
    preallocated: bool = True  # P: every class's logit in the loss from the start
    classifier: Literal["cosine", "linear"] = "cosine"  # Cos (paper Table 7) or a linear head
    cosine_scale: PositiveFloat = 16.0  # ours: the reference's CosineLinear is unscaled
    classifier_lr: PositiveFloat = 1e-3  # utils/config.py classifier_lr (encoder: the run's lr)
    encoder_weight_decay: Annotated[float, Range(min=0)] = 5e-4  # utils/optimizer.py
    classifier_weight_decay: Annotated[float, Range(min=0)] = 0.01  # AdamW's default there


class SeqStar(StrategyHooks):
    """SEQ*: warm up, freeze the encoder, freeze old classes' rows, cosine head, all logits.

    Args:
        context: Model, task kind and optimiser settings.
        options: The tricks and learning rates.

    """

    name: ClassVar[str] = "seq-star"
    description: ClassVar[str] = (
        "SEQ* (Zheng et al., 2024): warm-up, frozen encoder, frozen old classes, cosine head"
    )
    Options = SeqStarOptions

    def __init__(self, context: StrategyContext, options: SeqStarOptions | None = None) -> None:
        self.options = options = options or SeqStarOptions()
        self.model = context.model
        self.batch_size = context.batch_size
        # the tricks on classes apply to text classification; pair and span heads keep theirs
        self.classes = context.kind.name == "classification"
        if self.classes and options.classifier == "cosine":
            old = self.model.head.linear
            head = CosineHead(old.in_features, old.out_features, options.cosine_scale)
            self.model.head = head.to(old.weight.device)
        optimizer = torch.optim.AdamW(
            [
                {
                    "params": list(self.model.encoder.parameters()),
                    "lr": context.lr,
                    "weight_decay": options.encoder_weight_decay,
                },
                {
                    "params": list(self.model.head.parameters()),
                    "lr": options.classifier_lr,
                    "weight_decay": options.classifier_weight_decay,
                },
            ]
        )
        self.trainer = context.build_trainer(options.max_grad_norm, optimizer=optimizer)
        self.counts = Counters(steps=0, warmup_steps=0, encoder_frozen=0)
        self.seen: list[set[int]] = []  # classes of each task so far (from its batches)
        self.frozen_rows: dict[str, torch.Tensor] = {}  # head parameter -> rows at task start

    # -- the stream --------------------------------------------------------------------------
    def on_stream_start(self, stream: TaskStream) -> None:
        """Size the warm-up: a fraction of the first task's mini-batches (on a resume too)."""
        first = -(-len(stream.tasks[0].train) // self.batch_size)
        self.counts.warmup_steps = max(1, math.ceil(self.options.warmup_fraction * first))

    def on_task_start(self, task: int) -> None:
        """A new task: its classes are collected from its batches; earlier ones' rows frozen."""
        self.seen.append(set())
        if self.classes and self.options.freeze_old_classes:
            self.frozen_rows = {
                n: p.detach().clone() for n, p in self.model.head.named_parameters()
            }

    def observe(self, batch: Batch) -> dict[str, float]:
        """One update on all logits (P) or the seen ones, then freeze what is due."""
        if not self.seen:  # a learner without on_task_start: one task
            self.on_task_start(0)
        if self.classes:
            self.seen[-1].update(int(y) for y in batch.labels.tolist())
        self.model.train()  # dropout stays on in the frozen encoder, as models/SEQ.py L280
        self.trainer.optimizer.zero_grad(set_to_none=True)
        logits = self.model(*batch.inputs())
        if self.classes and not self.options.preallocated:
            logits = self._mask_unseen(logits)
        loss = self.model.criterion(logits, batch)
        self.trainer.backward(loss)
        self.trainer.apply()
        self._restore_old_rows()
        self.counts.steps += 1
        if not self.counts.encoder_frozen and self.counts.steps >= self.counts.warmup_steps:
            self._freeze_encoder()
        return {"loss": float(loss.detach())}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Scores, the classes not seen yet out of the argmax (the reference's evaluation)."""
        with torch.no_grad(), evaluating(self.model):
            logits = self.model(*batch.inputs())
        return self._mask_unseen(logits) if self.classes else logits

    # -- the tricks --------------------------------------------------------------------------
    def _freeze_encoder(self) -> None:
        for p in self.model.encoder.parameters():
            p.requires_grad_(False)
        self.counts.encoder_frozen = 1

    def _old_classes(self) -> list[int]:
        earlier = set().union(*self.seen[:-1]) if len(self.seen) > 1 else set()
        return sorted(earlier - self.seen[-1])

    def _restore_old_rows(self) -> None:
        """Put back the rows of earlier tasks' classes after an update.

        AdamW's momentum and weight decay move rows even where their gradient is zero, so a
        zeroed gradient would not freeze them.
        """
        old = self._old_classes() if self.frozen_rows else []
        if not old:
            return
        with torch.no_grad():
            for name, param in self.model.head.named_parameters():
                param[old] = self.frozen_rows[name][old].to(param.dtype)

    def _mask_unseen(self, logits: torch.Tensor) -> torch.Tensor:
        seen = set().union(*self.seen) if self.seen else set()
        if not seen:
            return logits  # nothing trained yet: every class competes
        keep = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
        keep[sorted(seen)] = True
        return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Weights, optimiser, counters, the classes per task and the frozen rows."""
        return {
            "trainer": self.trainer.state_dict(),
            "counts": self.counts.state_dict(),
            "seen": [sorted(s) for s in self.seen],
            "frozen_rows": self.frozen_rows,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (the encoder frozen again if it was)."""
        self.trainer.load_state_dict(state["trainer"])
        self.counts.load_state_dict(state["counts"])
        self.seen = [set(s) for s in state["seen"]]
        where = {n: p.device for n, p in self.model.head.named_parameters()}
        self.frozen_rows = {k: v.to(where[k]) for k, v in state["frozen_rows"].items()}
        if self.counts.encoder_frozen:
            self._freeze_encoder()
