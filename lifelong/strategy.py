"""The `Strategy` protocol and what a strategy is built from.

A strategy is a class with a ``name``, a one-line ``description``, an ``Options`` dataclass
(`lifelong.options`) and a constructor ``(context, options)``. The learner calls ``observe``
for every training mini-batch (no task identifier) and ``predict`` (row scores, e.g. logits)
for every evaluation batch. The learner also calls eight hooks, declared on the protocol
and given do-nothing defaults by `StrategyHooks`, which every strategy class inherits (as
Avalanche's templates declare every callback): a strategy overrides the ones it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from lifelong._deprecated import deprecated_alias
from lifelong.runtime import CPU, Runtime
from lifelong.state import ResumableParts
from lifelong.training import Trainer

if TYPE_CHECKING:
    import torch

    from lifelong.batch import Batch
    from lifelong.model import Classifier
    from lifelong.streams.core import Example, TaskStream
    from lifelong.tasks import TaskKind


@dataclass
class StrategyContext:
    """Everything a strategy is built from.

    Attributes:
        model: The trainable model (pre-trained encoder + fresh head), not yet trained.
        kind: The task kind: makes rows from examples (``kind(examples)``) and from stored
            records (``kind.rows``), keys memory, scores predictions (``task`` is its
            deprecated name).
        lr: Learning rate of the main optimiser.
        batch_size: Training mini-batch size of the stream, in examples.
        seed: Run seed (strategies derive their own generators from it).
        runtime: The run's device and precision. The model is already there and the task
            kind's batches land there; a strategy that builds a module of its own (ANML-ER's
            neuromodulator) moves it to ``runtime.device``; tensors it makes go next to the
            tensors they meet.
        memory_index: The nearest-neighbour search of keyed episodic memories: the run
            config's ``memory_index`` (``auto``, ``torch``, ``Flat`` or a FAISS factory
            string; see `lifelong.memory.EpisodicMemory`), passed on by
            `lifelong.mechanisms.replay.episodic_writer`.

    """

    model: Classifier
    kind: TaskKind
    lr: float = 3e-5
    batch_size: int = 16
    seed: int = 0
    runtime: Runtime = CPU
    memory_index: str = "auto"

    @property
    def task(self) -> TaskKind:
        """Deprecated alias of `kind` ("task" names a stream's task; this is its kind)."""
        deprecated_alias("StrategyContext.task", "StrategyContext.kind")
        return self.kind

    def build_trainer(
        self,
        max_grad_norm: float | None,
        *,
        model: Classifier | None = None,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> Trainer:
        """The strategy's trainer: the run's learning rate, device and precision.

        Args:
            max_grad_norm: The strategy's gradient clip (``None`` or 0: none).
            model: What it trains (default: the context's model; OML-ER's and SEQ*'s own
                wrappers pass theirs).
            optimizer: An optimiser of the strategy's own (default: `make_optimizer`'s AdamW
                over ``model`` at the context's learning rate).

        """
        model = self.model if model is None else model
        return Trainer(model, self.lr, max_grad_norm, optimizer=optimizer, runtime=self.runtime)


HOOKS = (
    "on_stream_start",
    "on_task_start",
    "on_task_end",
    "on_eval_start",
    "on_eval_sets",
    "on_eval_end",
    "predict_set",
    "report",
    "check_available",
)
"""The hooks the learner calls (in stream order) and the registry's availability check, all
declared on `Strategy`."""


class IncompleteStrategyError(TypeError, ValueError):
    """A strategy (class or object) lacks hooks the learner calls.

    A `TypeError` for library code; also a `ValueError`, so the command line reports it as the
    one-line error of a bad ``--strategy`` before anything loads.
    """


def require_hooks(strategy: object, label: str | None = None) -> None:
    """Raise unless ``strategy`` (a class or an object) has every hook of `HOOKS`.

    Args:
        strategy: The strategy class (the registry checks it before anything loads) or object
            (the learner checks what it is handed).
        label: How the error names it (default: the class's name).

    Raises:
        IncompleteStrategyError: Hooks are missing (named), with how to get their defaults.

    """
    missing = [hook for hook in HOOKS if not callable(getattr(strategy, hook, None))]
    if missing:
        cls = strategy if isinstance(strategy, type) else type(strategy)
        raise IncompleteStrategyError(
            f"{label or cls.__name__} lacks the learner's hooks {', '.join(missing)}: "
            "inherit lifelong.StrategyHooks (do-nothing defaults)"
        )


def supports(strategy: type | object, kind: str) -> bool:
    """Whether a strategy (class or object) runs on task kind ``kind`` (its ``kinds``)."""
    kinds = getattr(strategy, "kinds", None)
    return kinds is None or kind in kinds


class StrategyHooks:
    """Do-nothing defaults of the learner's hooks; a strategy overrides what it needs.

    The learner calls every hook directly (no probing for optional methods), so a type checker
    sees each call. Built-in strategies and third-party ones inherit this class; the registry
    refuses a strategy class that lacks a hook (`lifelong.registry.build`).

    Attributes:
        joint_training: ``True`` for a learner that trains on every task's data from the first
            batch (MTL): its rows are not a sequence of tasks, so BWT, FWT and forgetting are
            undefined for it (null in ``metrics.json``; reports leave them out).
        kinds: The task kinds it runs on (``None``: every kind); a run on another stream is
            refused before anything loads (`supports`).

    """

    joint_training: ClassVar[bool] = False
    kinds: ClassVar[tuple[str, ...] | None] = None

    def on_stream_start(self, stream: TaskStream) -> None:
        """Before the first task, on a resume too (rebuild, do not reset): MTL sees every task."""

    def on_task_start(self, task: int) -> None:
        """Before task ``task``'s first mini-batch (e.g. a fresh per-task optimiser)."""

    def on_task_end(self, task: int) -> list[dict[str, float]] | None:
        """After task ``task``'s last mini-batch (online EWC's Fisher).

        Returns:
            ``None``, or the statistics of updates taken here, one dict per update (the
            Avalanche templates train a whole experience at the task's end): the learner
            hands them to the trackers at the task's steps and checks them as in ``observe``.

        """
        return None

    def on_eval_start(self) -> None:
        """Before an evaluation of every test set (after each task, and the final one)."""

    def on_eval_sets(self, sets: Sequence[Sequence[Example]]) -> None:
        """Every task's test examples, before any is predicted (Meta-MbPA's coarse adaptation)."""

    def on_eval_end(self) -> None:
        """After an evaluation: undo what ``on_eval_start``/``on_eval_sets`` set up."""

    def predict_set(self, batches: Sequence[Batch]) -> list[torch.Tensor] | None:
        """Scores of a whole test set at once, one tensor per batch, or ``None``.

        A strategy that adapts once per test set (OML-ER's meta-test) returns the scores; the
        default ``None`` makes the learner ask `Strategy.predict` batch by batch.
        """
        return None

    @classmethod
    def check_available(cls) -> None:
        """Raise if the strategy cannot run here (a missing extra), before anything loads.

        The registry calls it when the strategy's options are parsed (`lifelong.registry.parse`),
        so the error comes before any data or model loads; the default is always available.
        """

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: the state of the strategy's ``self.resumable``.

        A strategy lists its parts once in ``__init__`` (``self.resumable =
        ResumableParts(trainer=..., replay=..., rng=...)``: weights, optimiser, memory,
        counters, generators, `lifelong.state.ResumableParts`); one without that overrides this
        and `load_state_dict`.
        """
        return _resumable(self).state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``self.resumable`` from what `state_dict` returned."""
        _resumable(self).load_state_dict(state)

    def report(self) -> dict[str, float]:
        """End-of-run numbers (``metrics.json`` under ``"strategy"``; none by default).

        ``memory_examples`` and ``write_rate``, where present, are also copied to the top level
        of ``metrics.json``, comparable across strategies.
        """
        return {}


def _resumable(strategy: StrategyHooks) -> ResumableParts:
    parts = getattr(strategy, "resumable", None)
    if not isinstance(parts, ResumableParts):
        raise TypeError(
            f"{type(strategy).__name__} has no resumable parts: set self.resumable = "
            "ResumableParts(...) in __init__, or override state_dict and load_state_dict"
        )
    return parts


@runtime_checkable
class Strategy(Protocol):
    """What the learner needs from a continual-learning strategy."""

    name: ClassVar[str]
    description: ClassVar[str]
    joint_training: ClassVar[bool]  # see `StrategyHooks`: no BWT, FWT or forgetting

    def observe(self, batch: Batch) -> dict[str, float]:
        """Learn from one training mini-batch; return scalars worth logging (e.g. loss)."""
        ...

    def predict(self, batch: Batch) -> torch.Tensor:
        """Scores for every row of an evaluation batch, leaving the model unchanged.

        Logits (n, num_labels) for classification, (n, 1) pair scores for relation
        extraction, (n, t, 2) start/end scores for QA; the task kind turns them into
        predictions and scores.
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights, optimiser, memory, counters."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        ...

    def on_stream_start(self, stream: TaskStream) -> None:
        """See `StrategyHooks.on_stream_start`."""
        ...

    def on_task_start(self, task: int) -> None:
        """See `StrategyHooks.on_task_start`."""
        ...

    def on_task_end(self, task: int) -> list[dict[str, float]] | None:
        """See `StrategyHooks.on_task_end`."""
        ...

    def on_eval_start(self) -> None:
        """See `StrategyHooks.on_eval_start`."""
        ...

    def on_eval_sets(self, sets: Sequence[Sequence[Example]]) -> None:
        """See `StrategyHooks.on_eval_sets`."""
        ...

    def on_eval_end(self) -> None:
        """See `StrategyHooks.on_eval_end`."""
        ...

    def predict_set(self, batches: Sequence[Batch]) -> list[torch.Tensor] | None:
        """See `StrategyHooks.predict_set`."""
        ...

    def report(self) -> dict[str, float]:
        """See `StrategyHooks.report`."""
        ...

    @classmethod
    def check_available(cls) -> None:
        """See `StrategyHooks.check_available`."""
        ...
