"""Local adaptation (MbPA / MbPA++): adapt a copy of the weights to retrieved neighbours.

MbPA++ (de Masson d'Autume et al., 2019) predicts a test input x with weights adapted to its K
nearest memories {(x_k, y_k)}:

    W_x = argmin_W~  λ ||W~ − W||²  −  Σ_k α_k log p(y_k | x_k; W~),   α_k = 1/K,

approximated by L gradient steps from W (SGD with momentum, as EM-in-LLL takes them); the
base weights W are never modified. `lifelong.mechanisms.inner_loop.local_adapt` is that inner
loop, shared by every strategy that adapts; `lifelong.mechanisms.scopes` says which weights it
changes.

`LocalAdapter` retrieves the neighbours and applies it along one of three paths, each in a file
of its own:

* ``reference`` (`lifelong.mechanisms.reference`): the paper's procedure, one test input at a
  time (adapt, predict, reset), to be read against the paper;
* ``fast`` (`lifelong.mechanisms.fast`): many test inputs at once with ``vmap``, where the
  frozen bottom of the network (everything below ``adapt_scope``) is computed once per
  retrieved neighbour and cached for the whole evaluation phase
  (`lifelong.mechanisms.neighbours`). With ``adapt_scope="all"`` it computes what the
  reference path does;
* ``lora`` (`lifelong.mechanisms.lowrank`): a rank-r delta per test input instead of the weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import torch

from lifelong import cost
from lifelong.batch import Batch
from lifelong.mechanisms.fast import fast_logits
from lifelong.mechanisms.lowrank import lora_logits
from lifelong.mechanisms.neighbours import NeighbourCache
from lifelong.mechanisms.reference import reference_logits
from lifelong.mechanisms.scopes import All, Lora, Scope, parse_scope
from lifelong.memory import EpisodicWriter
from lifelong.model import Classifier
from lifelong.options import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Range,
    option_group,
)
from lifelong.training import TaskOptimizerOptions, TaskTraining, evaluating

if TYPE_CHECKING:
    from lifelong.strategy import StrategyContext


@option_group
class LocalAdaptationOptions:
    """Local adaptation on K neighbours (de Masson d'Autume et al., 2019, §3.3 and §4.2).

    K = 32 neighbours, L = 30 steps and λ = 1e-3 are the paper's (K = 32 and λ = 1e-3 are also
    EM-in-LLL's ``n_neighbors`` / ``adapt_lambda``; its ``adapt_steps`` default is 20, we keep
    the paper's L). The paper gives no optimiser for the L steps: the step size 2e-3 and the
    momentum 0.9 are EM-in-LLL's (Daikon-Sun/EM-in-LLL ``settings.py`` ``--adapt_lr 2e-3`` and
    ``test.py`` ``optim.SGD(..., lr=args.adapt_lr, momentum=0.9)``). λ enters as
    ``λ ||W~ − W||²``, a plain sum of squares without a ½, as in the paper's objective and in
    ``test.py`` (``adapt_lambda * torch.sum((org_params - params)**2)``), so λ = 1e-3 means the
    same in all three.
    """

    k: PositiveInt = 32  # K: neighbours retrieved per input
    steps: NonNegativeInt = 30  # L: gradient steps of local adaptation (paper; EM-in-LLL: 20)
    l2: NonNegativeFloat = 1e-3  # λ: pull of the adapted weights back to the base weights
    adapt_lr: PositiveFloat = 2e-3  # SGD step size of local adaptation (EM-in-LLL)
    momentum: Annotated[float, Range(0, 1, max_open=True)] = 0.9  # heavy-ball μ (EM-in-LLL)
    adapt_scope: Scope = "all"  # "all" (the paper), "top<N>" (top N layers + head), "head", "lora"
    adapt_rank: PositiveInt = 8  # r of "lora" (Hu et al., 2021, §7.2: a small r suffices)


@option_group
class AdaptationOptions(LocalAdaptationOptions):
    """Test-time local adaptation of the MbPA family: what to adapt, along which path."""

    # fast: batched/cached (on CUDA with scope all and fast_chunk 0: the reference, faster there);
    # reference: one example at a time, full forward passes
    adapt_path: Literal["fast", "reference"] = "fast"
    retrieval: Literal["nearest", "random"] = "nearest"  # key network + memory, or MbPA++-rand
    # test examples per call; 0 = 64 head, lora 16 on CUDA (1 on CPU: measured faster), else 1
    fast_chunk: NonNegativeInt = 0


class LocalAdapter:
    """Predicts with weights locally adapted to each test example's retrieved memories.

    A test example retrieves its K nearest memory *examples*; their rows (one per text,
    candidate pair or context window, as the task kind expands them) are the adaptation
    batch, and the loss is the task kind's. The adapted weights predict every row of the test
    example.

    Args:
        model: The trained model; its parameters are only read.
        writer: The episodic memory (and key network) to retrieve from.
        options: K, L, λ, step size, momentum, scope, path and retrieval.
        seed: Seed of random retrieval.
        loss_scale: The static loss scale of the adaptation steps (`local_adapt`): the
            trainer's ``inner_loss_scale`` (fp16's, or 1).

    """

    def __init__(
        self,
        model: Classifier,
        writer: EpisodicWriter,
        options: AdaptationOptions,
        seed: int = 0,
        loss_scale: float = 1.0,
    ) -> None:
        self.model = model
        self.loss_scale = loss_scale
        self.writer = writer
        self.options = options
        self.scope = parse_scope(options.adapt_scope, model.encoder, options.adapt_rank)
        self.rng = np.random.default_rng(seed)
        self.cache = NeighbourCache(model, writer, self.scope.stage)  # rows at scope.stage
        self.adapted = 0  # test examples predicted with adapted weights (for tests and logs)
        self.lora_seed = (
            seed  # the seed of the low-rank deltas' A (`lifelong.mechanisms.lowrank.init_lora`)
        )

    def reset_cache(self) -> None:
        """Forget cached neighbour representations (call whenever the model has changed)."""
        self.cache.clear()

    def neighbours(self, batch: Batch) -> np.ndarray:
        """Memory slots retrieved for each test example, shape (examples, min(K, size))."""
        memory = self.writer.memory
        k = min(self.options.k, len(memory))
        if self.options.retrieval == "random":
            return np.stack(
                [self.rng.choice(len(memory), k, replace=False) for _ in range(batch.num_examples)]
            )
        return memory.nearest(self.writer.query_keys(batch.examples), k)[1]

    def logits(self, batch: Batch) -> torch.Tensor:
        """Adapted row scores (n, ...); plain scores while memory is empty."""
        with evaluating(self.model):  # no dropout: adaptation and prediction are deterministic
            if len(self.writer.memory) == 0 or self.options.steps == 0:
                with torch.no_grad():
                    return self.model(*batch.inputs())
            with cost.phase("adapt"):  # retrieval and adaptation: test-time training
                slots = self.neighbours(batch)
                out = self.path(batch.input_ids.device)(batch, slots)
            self.adapted += batch.num_examples
            return out

    def path(self, device: torch.device) -> Callable[[Batch, np.ndarray], torch.Tensor]:
        """The adaptation path for ``adapt_path``, the scope and the device.

        ``fast`` with ``adapt_scope: all`` and the default ``fast_chunk`` (0: one example at a
        time) on CUDA runs the reference path: both compute the same adaptation, and on an
        H100 the fast path's one-example packed steps ran at 0.64x the reference's padded batch
        of K neighbours (`docs/guide/devices.md`, the first GPU run); on a CPU the fast path is
        the faster one. A ``fast_chunk`` the user set is kept (the vmapped fast path, not
        measured on a GPU). ``lora`` has a path of its own.
        """
        if isinstance(self.scope, Lora):
            return self.lora_logits
        if self.options.adapt_path == "reference":
            return self.reference_logits
        if isinstance(self.scope, All) and device.type == "cuda" and not self.options.fast_chunk:
            return self.reference_logits
        return self.fast_logits

    def adapt_kwargs(self) -> dict[str, Any]:
        """`local_adapt`'s keywords: L, the step size, λ, the momentum, the loss scale."""
        o = self.options
        return {
            "steps": o.steps,
            "lr": o.adapt_lr,
            "l2": o.l2,
            "momentum": o.momentum,
            "loss_scale": self.loss_scale,
        }

    def reference_logits(self, batch: Batch, slots: np.ndarray) -> torch.Tensor:
        """The paper's procedure, one test input at a time (`lifelong.mechanisms.reference`)."""
        return reference_logits(
            self.model, self.scope, self.writer.batch, batch, slots, self.adapt_kwargs()
        )

    def fast_logits(self, batch: Batch, slots: np.ndarray) -> torch.Tensor:
        """Many test inputs at once over cached prefixes (`lifelong.mechanisms.fast`)."""
        return fast_logits(self, batch, slots)

    def lora_logits(
        self, batch: Batch, slots: np.ndarray, batching: Literal["packed", "vmap"] = "packed"
    ) -> torch.Tensor:
        """A rank-r delta per test input (`lifelong.mechanisms.lowrank.lora_logits`)."""
        return lora_logits(self, batch, slots, batching)


class MemoryAdaptation:
    """What MbPA and MbPA++ share: train with `TaskTraining`, predict with local adaptation.

    Training is ordinary fine-tuning (EM-in-LLL's optional per-task optimiser and head
    dropout); every prediction adapts the weights to the test input's K memories in
    ``writer``'s episodic memory (`LocalAdapter`). Call `weights_changed` after every update,
    so that the adapter's cached neighbour prefixes are recomputed.

    Args:
        context: Model, learning rate, runtime and seed.
        writer: The episodic writer whose memory the adaptation reads.
        adaptation: K, L, λ, step size, momentum, scope, path and retrieval.
        schedule: The per-task optimiser's options (`TaskOptimizerOptions`).
        max_grad_norm: The clip of every training update (0: none).
        head_dropout: Dropout on the head's pooled input while training.

    """

    def __init__(
        self,
        context: StrategyContext,
        writer: EpisodicWriter,
        *,
        adaptation: AdaptationOptions,
        schedule: TaskOptimizerOptions,
        max_grad_norm: float,
        head_dropout: float,
    ) -> None:
        self.training = TaskTraining(
            context.model,
            context.lr,
            schedule,
            max_grad_norm=max_grad_norm,
            head_dropout=head_dropout,
            runtime=context.runtime,
        )
        self.adapter = LocalAdapter(
            context.model,
            writer,
            adaptation,
            seed=context.seed,
            loss_scale=self.training.trainer.inner_loss_scale,
        )

    def predict(self, batch: Batch) -> torch.Tensor:
        """The locally adapted row scores; the base weights stay untouched."""
        return self.adapter.logits(batch)

    def weights_changed(self) -> None:
        """Forget cached neighbour prefixes (stale once the weights have moved)."""
        self.adapter.reset_cache()

    def resumable_parts(self) -> dict[str, Any]:
        """Trainer, schedule counter (if any) and the random retrieval's generator."""
        return {**self.training.resumable_parts(), "retrieval": self.adapter.rng}
