"""MbPA: memory-based parameter adaptation at test time only (Sprechmann et al., 2018).

Training is plain fine-tuning that also writes every example to episodic memory (keyed by the
frozen key network); at test time each input is predicted with weights locally adapted to its
K nearest memories (`lifelong.adaptation`). No replay: this is the "MbPA" row of MbPA++'s
tables (fixed key network variant, de Masson d'Autume et al., 2019, §4.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from lifelong.adaptation import AdaptationOptions, LocalAdapter
from lifelong.model import Batch
from lifelong.options import NonNegativeInt, Probability, option_group
from lifelong.replay import ClipOptions, EpisodicWriter, WriteOptions
from lifelong.state import Components, delegated
from lifelong.strategy import StrategyContext
from lifelong.training import Trainer


@option_group
class TaskOptimizerOptions:
    """EM-in-LLL's optimiser, rebuilt at every task start (off by default).

    Daikon-Sun/EM-in-LLL ``train.py`` (``train_task``) builds, for every task, a fresh
    ``AdamW(lr, eps=1e-8, weight_decay=0)`` and a ``WarmupLinearSchedule(warmup_steps=0,
    t_total=len(train_dataset) // 10)``: Adam's moments and the learning rate restart at each
    task, the rate rises linearly over the warm-up and then falls linearly to 0 at ``t_total``
    scheduler steps (one per update, replay updates included). This is an implementation choice
    of that reimplementation, not the paper's: de Masson d'Autume et al. (2019, §4.2) give Adam
    with lr 3e-5 and no schedule, which stays our default (one AdamW for the whole stream).

    The reference knows each task's size ahead; a strategy does not, so the decay length is an
    option in updates. Its default 11,500 is the reference's ``t_total`` for its (and the
    paper's) text-classification tasks of 115,000 training examples (``settings.py``
    ``--n_train 115000``): 115,000 // 10.
    """

    optimizer_per_task: bool = False  # fresh AdamW + schedule at every task start (EM-in-LLL)
    warmup_steps: NonNegativeInt = 0  # updates of linear warm-up (EM-in-LLL --warmup_steps 0)
    schedule_steps: NonNegativeInt = 11_500  # updates to reach lr 0 (EM-in-LLL t_total); 0: none


@option_group
class HeadDropoutOptions:
    """Dropout on the pooled vector before the classifier while training (EM-in-LLL's model).

    EM-in-LLL trains pytorch_transformers' ``BertForSequenceClassification`` (``settings.py``),
    whose classifier reads ``dropout(pooled)`` with ``hidden_dropout_prob`` 0.1 (BERT-base's
    config) while training; at test time it is off (``test.py``), as in our local adaptation,
    which runs in evaluation mode.
    """

    head_dropout: Probability = 0.1  # on the pooled vector, training only (BERT's 0.1)


def set_head_dropout(model: Any, p: float) -> None:
    """Set the dropout of a classification head's pooled input (heads without one: no-op)."""
    dropout = getattr(model.head, "dropout", None)
    if isinstance(dropout, torch.nn.Dropout):
        dropout.p = p


class TaskSchedule:
    """A fresh AdamW at every task start and EM-in-LLL's linear warm-up/decay within a task.

    The rate of the u-th update of a task (u = 1, 2, ...) is ``lr · factor(u)``, set before the
    update as the reference's ``scheduler.step()`` before ``optimizer.step()`` does.

    Args:
        trainer: The trainer whose optimiser is replaced at each task start.
        lr: The peak learning rate.
        options: Warm-up and decay lengths.

    """

    def __init__(self, trainer: Trainer, lr: float, options: TaskOptimizerOptions) -> None:
        self.trainer, self.lr = trainer, lr
        self.warmup, self.total = options.warmup_steps, options.schedule_steps
        self.updates = 0  # updates taken in the current task
        self.start_task()  # the first task's optimiser, even before any on_task_start

    @classmethod
    def maybe(
        cls, trainer: Trainer, lr: float, options: TaskOptimizerOptions
    ) -> TaskSchedule | None:
        """A schedule if ``options.optimizer_per_task``, else None (one optimiser throughout)."""
        return cls(trainer, lr, options) if options.optimizer_per_task else None

    @staticmethod
    def parts(schedule: TaskSchedule | None) -> dict[str, TaskSchedule]:
        """The strategy-state part of a schedule: its counter, only when there is one."""
        return {} if schedule is None else {"schedule": schedule}

    def factor(self, u: int) -> float:
        """``WarmupLinearSchedule``'s multiplier of the u-th update (pytorch_transformers 1.x)."""
        if u < self.warmup:
            return u / max(1, self.warmup)
        if not self.total:  # no decay: constant after the warm-up
            return 1.0
        return max(0.0, (self.total - u) / max(1.0, self.total - self.warmup))

    def start_task(self) -> None:
        """Replace the optimiser by a fresh one (Adam state and rate restart)."""
        params = [p for p in self.trainer.model.parameters() if p.requires_grad]
        # EM-in-LLL train.py: AdamW(lr, eps=adam_epsilon=1e-8), weight_decay 0 (settings.py)
        self.trainer.optimizer = torch.optim.AdamW(params, lr=self.lr, eps=1e-8, weight_decay=0)
        self.updates = 0

    def advance(self) -> None:
        """Count one more update and set the optimiser's rate for it."""
        self.updates += 1
        for group in self.trainer.optimizer.param_groups:
            group["lr"] = self.lr * self.factor(self.updates)

    def step(self, batches: Batch | Sequence[Batch]) -> float:
        """One update of the trainer at the scheduled rate; returns its loss."""
        self.advance()
        return self.trainer.step(batches)

    def state_dict(self) -> dict[str, Any]:
        """Updates taken in the current task (the optimiser is saved with the trainer)."""
        return {"updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the count of updates of the current task."""
        self.updates = int(state["updates"])


@option_group
class MbPAOptions(
    AdaptationOptions, WriteOptions, ClipOptions, TaskOptimizerOptions, HeadDropoutOptions
):
    """Local adaptation (K, L, λ, step, momentum, scope, path, retrieval), writes, clip, optimiser.

    ``optimizer_per_task`` (off by default) uses the task boundaries of training (the learner's
    ``on_task_start``), as EM-in-LLL does; see `TaskOptimizerOptions`.
    """


class MbPA:
    """Fine-tune and memorise while training; adapt locally to nearest memories at test time.

    Args:
        context: Model, task kind and optimiser settings.
        options: K, L, λ, adaptation step size, scope and path; writes; clipping; the
            optional per-task optimiser.

    """

    name: ClassVar[str] = "mbpa"
    description: ClassVar[str] = "local adaptation on K nearest memories at test time, no replay"
    Options = MbPAOptions

    def __init__(self, context: StrategyContext, options: MbPAOptions | None = None) -> None:
        options = options or MbPAOptions()
        set_head_dropout(context.model, options.head_dropout)
        self.trainer = Trainer(
            context.model, context.lr, options.max_grad_norm, runtime=context.runtime
        )
        self.schedule = TaskSchedule.maybe(self.trainer, context.lr, options)
        keyed = options.retrieval == "nearest"  # random retrieval never searches
        self.writer = EpisodicWriter(context, options.write_prob, keyed=keyed)
        self.adapter = LocalAdapter(
            context.model,
            self.writer,
            options,
            seed=context.seed,
            loss_scale=self.trainer.inner_loss_scale,
        )
        self.parts = Components(
            trainer=self.trainer,
            writer=self.writer,
            retrieval=self.adapter.rng,
            **TaskSchedule.parts(self.schedule),
        )

    def on_task_start(self, task: int) -> None:
        """With ``optimizer_per_task``: a fresh optimiser and schedule (EM-in-LLL)."""
        if self.schedule is not None:
            self.schedule.start_task()

    def update(self, batches: Batch | Sequence[Batch]) -> float:
        """One optimiser update (at the scheduled rate with ``optimizer_per_task``)."""
        return (self.schedule or self.trainer).step(batches)

    def observe(self, batch: Batch) -> dict[str, float]:
        """One update on the batch, then write it to memory."""
        stats = {"loss": self.update(batch)}
        self.writer.write(batch)
        self.adapter.reset_cache()  # the weights changed: cached neighbour prefixes are stale
        return stats

    def predict(self, batch: Batch) -> torch.Tensor:
        """The locally adapted row scores; the base weights stay untouched."""
        return self.adapter.logits(batch)

    def report(self) -> dict[str, float]:
        """Examples in memory and write rate."""
        return self.writer.report()

    state_dict = delegated("state_dict")  # weights, optimiser, memory, counters, generators
    load_state_dict = delegated("load_state_dict")
