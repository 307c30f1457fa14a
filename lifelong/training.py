"""Building blocks strategies compose: optimiser, one gradient step, evaluation mode, seeding.

Also EM-in-LLL's per-task optimiser and schedule (`TaskSchedule`, `TaskOptimizerOptions`) and
its head dropout (`HeadDropoutOptions`), which MbPA and MbPA++ share.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.model import Classifier
from lifelong.options import NonNegativeInt, Probability, option_group
from lifelong.runtime import CPU, Runtime
from lifelong.training_options import TrainingOptions as TrainingOptions  # the section


def make_optimizer(model: nn.Module, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters, without weight decay by default.

    Both reference implementations decay no weight: Holla et al.'s ``cls_baseline.py`` uses
    transformers' ``AdamW(params, lr)`` (weight decay 0) and EM-in-LLL's ``train.py``
    ``weight_decay=0``; torch's own AdamW default would be 0.01. MbPA++ trains BERT with Adam at
    lr 3e-5 (de Masson d'Autume et al., 2019, §4.2).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def accumulate(
    model: Classifier,
    batches: Batch | Sequence[Batch],
    *,
    scale: float = 1.0,
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """Back-propagate the loss of chunks of one large batch; return its mean.

    Each chunk's mean loss is weighted by its share of the loss's units, so the gradients equal
    those of a single batch holding every chunk; ``scale`` multiplies the loss that is
    back-propagated (e.g. a sum over mini-batches), not the mean returned. With an active
    ``scaler`` (fp16) the gradients are left multiplied by its scale, for ``scaler.unscale_``.
    """
    chunks = [batches] if isinstance(batches, Batch) else list(batches)
    sizes = [model.loss_units(c) for c in chunks]
    total = sum(sizes)
    loss_sum = 0.0
    for chunk, size in zip(chunks, sizes):
        loss = model.loss(chunk) * (size / total)
        scaled = loss * scale
        (scaler.scale(scaled) if scaler is not None else scaled).backward()
        loss_sum += float(loss.detach())
    return loss_sum


def clip(parameters: nn.Module, max_grad_norm: float | None) -> None:
    """Clip the gradient norm of a module's parameters (``None`` or 0: no clipping)."""
    if max_grad_norm:
        nn.utils.clip_grad_norm_(parameters.parameters(), max_grad_norm)


def apply_update(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float | None,
    scaler: torch.amp.GradScaler | None = None,
) -> None:
    """Clip the gradients in ``.grad`` and step: through ``scaler`` when one is given.

    An active scaler (fp16) unscales the gradients before the clip, skips the step when one
    overflowed and updates its scale; a disabled one steps plainly.
    """
    if scaler is None:
        clip(model, max_grad_norm)
        optimizer.step()
        return
    scaler.unscale_(optimizer)
    clip(model, max_grad_norm)
    scaler.step(optimizer)
    scaler.update()


def train_step(
    model: Classifier,
    optimizer: torch.optim.Optimizer,
    batches: Batch | Sequence[Batch],
    *,
    max_grad_norm: float | None = 1.0,
    scale: float = 1.0,
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """One optimiser update on one batch, or on several accumulated as a single batch.

    Args:
        model: The model to update (put in training mode).
        optimizer: Its optimiser.
        batches: A batch, or chunks of one large batch; their gradients are averaged over all
            loss units, so the update equals that of a single batch holding them all.
        max_grad_norm: Gradient-norm clip (``None`` or 0 to disable).
        scale: Factor on the back-propagated loss (see `accumulate`).
        scaler: The loss scaler of fp16 training (`Runtime.grad_scaler`), if any.

    Returns:
        The mean loss.

    """
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = accumulate(model, batches, scale=scale, scaler=scaler)
    apply_update(model, optimizer, max_grad_norm, scaler)
    return loss


class Trainer:
    """A model, its optimiser and the clipped update: what every training strategy composes.

    Args:
        model: The model to train.
        lr: Learning rate of a new AdamW optimiser (`make_optimizer`).
        max_grad_norm: Gradient-norm clip of every update (``None`` or 0: none).
        optimizer: An optimiser of one's own instead (e.g. OML-ER's outer Adam).
        runtime: The run's precision: in fp16 every update is loss-scaled by the trainer's own
            dynamic ``GradScaler`` (`Runtime.grad_scaler`), and inner loops scale their losses
            by `inner_loss_scale`.

    """

    def __init__(
        self,
        model: Classifier,
        lr: float,
        max_grad_norm: float | None = 1.0,
        optimizer: torch.optim.Optimizer | None = None,
        runtime: Runtime = CPU,
    ) -> None:
        self.model = model
        self.optimizer = optimizer or make_optimizer(model, lr)
        self.max_grad_norm = max_grad_norm
        self.scaler = runtime.grad_scaler()
        self.inner_loss_scale = runtime.inner_loss_scale

    def step(self, batches: Batch | Sequence[Batch]) -> float:
        """One clipped update on a batch (or chunks of one); returns the mean loss."""
        return train_step(
            self.model,
            self.optimizer,
            batches,
            max_grad_norm=self.max_grad_norm,
            scaler=self.scaler,
        )

    def backward(self, loss: torch.Tensor) -> None:
        """Back-propagate ``loss`` into ``.grad`` (multiplied by the loss scale in fp16)."""
        self.scaler.scale(loss).backward()

    def apply(self) -> None:
        """Clip the gradients already in ``.grad`` (from `backward`) and take the step."""
        apply_update(self.model, self.optimizer, self.max_grad_norm, self.scaler)

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the model in evaluation mode (`predict_scores`)."""
        return predict_scores(self.model, batch)

    def state_dict(self) -> dict[str, dict]:
        """Weights, optimiser state and (in fp16) the loss scaler's state."""
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.scaler.is_enabled():
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, dict]) -> None:
        """Restore what `state_dict` returned (a scaler state only matters in fp16)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler.is_enabled() and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])


@contextmanager
def evaluating(*modules: nn.Module) -> Iterator[None]:
    """Put modules in evaluation mode (no dropout) and restore their modes afterwards.

    Prediction and test-time adaptation run inside it, so evaluating leaves the training state
    (modes, weights) as it was.
    """
    modes = [m.training for m in modules]
    for m in modules:
        m.eval()
    try:
        yield
    finally:
        for m, mode in zip(modules, modes):
            m.train(mode)


@torch.no_grad()
def predict_scores(model: Classifier, batch: Batch) -> torch.Tensor:
    """Row scores (logits) under the model in evaluation mode."""
    with evaluating(model):
        return model(*batch.inputs())


CUBLAS_WORKSPACE = ":4096:8"
"""cuBLAS's workspace setting for deterministic results (CUDA's "Reproducibility" notes: cuBLAS
matmuls are deterministic only with ``CUBLAS_WORKSPACE_CONFIG`` ``:4096:8`` or ``:16:8``)."""


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch, and ask torch for deterministic kernels.

    On a GPU deterministic kernels need ``CUBLAS_WORKSPACE_CONFIG``; it is set here (to
    `CUBLAS_WORKSPACE`) unless the environment sets it, before CUDA starts cuBLAS.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


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
    def resumable_parts(schedule: TaskSchedule | None) -> dict[str, TaskSchedule]:
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


class TaskTraining:
    """A strategy's `Trainer` with EM-in-LLL's optional per-task optimiser, and head dropout.

    What MbPA and MbPA++ train with: the clipped update of `Trainer`, a fresh AdamW and a
    linear schedule at every task start when ``optimizer_per_task`` is on (`TaskSchedule`),
    and dropout on the head's pooled input (`HeadDropoutOptions`).

    Args:
        model: The model (its head's dropout is set here).
        lr: The learning rate (the schedule's peak).
        schedule: The per-task optimiser's options (`TaskOptimizerOptions`).
        max_grad_norm: The clip of every update (0: none).
        head_dropout: Dropout on the head's pooled input while training (`HeadDropoutOptions`).
        runtime: The run's device and precision.

    """

    def __init__(
        self,
        model: Classifier,
        lr: float,
        schedule: TaskOptimizerOptions,
        *,
        max_grad_norm: float,
        head_dropout: float,
        runtime: Runtime = CPU,
    ) -> None:
        set_head_dropout(model, head_dropout)
        self.trainer = Trainer(model, lr, max_grad_norm, runtime=runtime)
        self.schedule = TaskSchedule.maybe(self.trainer, lr, schedule)

    def start_task(self) -> None:
        """With a schedule: a fresh optimiser and schedule (the learner's ``on_task_start``)."""
        if self.schedule is not None:
            self.schedule.start_task()

    def step(self, batches: Batch | Sequence[Batch]) -> float:
        """One update (at the scheduled rate with a schedule); returns its loss."""
        return (self.schedule or self.trainer).step(batches)

    def advance(self) -> None:
        """Count an update taken outside `step` (a replay update) in the schedule, if any."""
        if self.schedule is not None:
            self.schedule.advance()

    def resumable_parts(self) -> dict[str, Any]:
        """The resumable parts: the trainer, and the schedule's counter when there is one."""
        return {"trainer": self.trainer, **TaskSchedule.resumable_parts(self.schedule)}
