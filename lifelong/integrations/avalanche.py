"""Avalanche interop: our streams as Avalanche benchmarks, Avalanche's strategies in our runs.

Needs the extra ``lifelong[avalanche]`` (``avalanche-lib`` 0.6.0), which imports torchvision;
``make setup-avalanche`` builds the environment that holds it (``.venv-avalanche``, see the
Makefile). This module imports without Avalanche: its adapters are registered like every
strategy (entry points ``avalanche:NAME``), and Avalanche is imported only when one is chosen
(`AvalancheStrategy.check_available`, before anything loads: `AvalancheUnavailableError`,
naming the extra, when it cannot be).

**(a) Benchmarks.** `as_benchmark` turns a `TaskStream` into an Avalanche benchmark with a
``train_stream`` and a ``test_stream``, one classification experience per task in the stream's
order. A pattern is the example's record as our task kind tokenised it (`RecordCodec`: the
record's fields side by side in one fixed-width int64 tensor, ``-1`` where a field is shorter),
its target its label in the stream's **merged** label space (33 classes for the five text
datasets, 80 relations for FewRel), its task label 0 (the papers' setting: no task ids; pass
``task_labels=True`` for the task index). `as_model` wraps our `Classifier` so that Avalanche
calls it on such patterns and gets one score per class of the merged label space:

* text classification: the classifier's logits, (n, classes);
* relation extraction (FewRel): each candidate relation's pair score (the head's one logit
  per pair row: our prediction rule, `lifelong.tasks.relation`) at that relation's class,
  `PADDING_SCORE`
  at the relations that are not candidates, so the argmax is our prediction and Avalanche's
  cross-entropy is a softmax over the sentence's candidates: our ``pair_loss: softmax``, not
  the default binary pair loss of Holla et al. (which has no per-sentence class scores);
* extractive QA: **not supported** (`UnsupportedStreamError`): a QA answer is a span of start
  and end tokens in a context window, not a class, so there is no label space for Avalanche's
  classification experiences, its accuracy metrics or its class-based strategies.

**(b) Strategies.** ``lifelong run --strategy avalanche:NAME`` (``naive``, ``replay``, ``ewc``,
``lwf``, ``agem``, ``gem``, ``der``) trains one of Avalanche's strategy
templates on our stream, with our encoder, model, evaluation, metrics, run directory, run index
and reports: `AvalancheStrategy` implements our `Strategy` protocol around the template.

How the template is driven. Avalanche trains on *experiences* (``template.train(experience)``
runs its own data loaders, plugin callbacks and optimiser steps over a whole experience), and
its strategies need the experience as a whole: Replay and DER draw each stream mini-batch
together with a memory mini-batch from a loader built before the experience starts, EWC
computes importances and GEM/A-GEM fill their memories after it ends. Driving the template
mini-batch by mini-batch from our ``observe`` would re-implement that machinery and would not
be Avalanche's training. So the adapter **buffers** the records of the task's mini-batches in
``observe`` (no update there), and at the task boundary (the learner's ``on_task_end`` hook)
builds the task's experience from them and calls ``template.train(experience)``: exactly the
training Avalanche's own loop gives that experience (one epoch by default, the papers' single
pass; its own within-task shuffling; mini-batches of the run's ``batch_size``; AdamW at the
run's ``lr``, the optimiser all our strategies use; no gradient clip unless the option
``max_grad_norm`` adds one, `GradientClip`). The learner then evaluates as for every
other strategy, so R, BWT, FWT and forgetting are ours and comparable across the two libraries.
Consequences: the adapter needs task boundaries (as Avalanche does; our ``ewc`` uses the same
hook), the learner's mid-task progress shows no loss (nothing trains until the task ends), and
a run killed mid-task resumes by re-buffering (the buffered records are in the checkpoint).

**(c) Metrics.** Avalanche's forgetting and BWT (``forgetting_metrics``, ``bwt_metrics``) against
ours (`lifelong.metrics`), on one accuracy matrix R (rows: after training task i; columns:
tasks), T tasks:

* Units: Avalanche reports fractions in [0, 1], we report percent.
* Avalanche's *stream* forgetting is ``mean_{j<T-1} (R[j, j] − R[T-1, j])``: the accuracy right
  after training task j minus the final one, averaged over the tasks before the last (the
  current training experience has no "last" value after Avalanche's ``reset_last``). Ours is
  ``mean_{j<T-1} (max_{j<=l<T-1} R[l, j] − R[T-1, j])``: the *best* accuracy since the task was
  trained (``forgetting_any``: in any earlier row, Chaudhry et al. 2018). The two agree exactly
  when no task scores higher after later tasks than right after its own training; otherwise
  ours is larger by ``max_{j<=l<T-1} R[l, j] − R[j, j]`` for that task.
* Avalanche's BWT is minus its forgetting, ``mean_{j<T-1} (R[T-1, j] − R[j, j])``: Lopez-Paz &
  Ranzato's BWT, the same as ours (`lifelong.metrics.backward_transfer`), always.
* Avalanche's metrics are accumulated during its evaluation calls (each needs an evaluation on
  every experience after every training experience, with matching ``current_experience``
  ids); ours are pure functions of R. With one task both libraries give nothing (None).

``tests/lifelong/integrations/test_avalanche.py`` checks all of this on a run evaluated by both.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import torch
from torch import nn

from lifelong.batch import Batch
from lifelong.model import PADDING_SCORE, Classifier
from lifelong.options import (
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Probability,
    option_group,
)
from lifelong.registry import UnknownStrategyError
from lifelong.strategy import StrategyHooks
from lifelong.tasks.prepared import base_kind
from lifelong.tasks.relation import pair_scores

if TYPE_CHECKING:
    from lifelong.memory.records import ExampleRecords
    from lifelong.strategy import StrategyContext
    from lifelong.streams.core import Task, TaskStream
    from lifelong.tasks import TaskKind

log = logging.getLogger(__name__)

PREFIX = "avalanche:"
"""Avalanche's strategies are registered as ``avalanche:NAME`` (entry points in pyproject)."""

INSTALL_HINT = (
    "install the extra `lifelong[avalanche]` (avalanche-lib 0.6.0, which needs torchvision: in "
    "this repository `make setup-avalanche` builds .venv-avalanche with it)"
)


class AvalancheUnavailableError(UnknownStrategyError):
    """Avalanche cannot be imported here (the ``avalanche`` extra is missing or broken)."""


class UnsupportedStreamError(ValueError):
    """A stream whose task kind Avalanche's classification experiences cannot express."""


def require_avalanche() -> None:
    """Import Avalanche's training package, or say how to install it.

    Raises:
        AvalancheUnavailableError: ``avalanche`` is missing, or fails to import (e.g. a
            torchvision built for another torch), with the original error.

    """
    try:
        import avalanche.training  # noqa: F401
    except Exception as err:  # ImportError, or torchvision's RuntimeError against CPU torch
        raise AvalancheUnavailableError(
            f"Avalanche strategies need avalanche-lib, which does not import here "
            f"({type(err).__name__}: {err}); {INSTALL_HINT}"
        ) from err


# ---------------------------------------------------------------------------------------------
# (a) records <-> Avalanche patterns, the model Avalanche calls, the benchmark


class RecordCodec:
    """Our examples' records as fixed-width int64 tensors (Avalanche patterns) and back.

    A pattern is the record's fields (all but the label) side by side, each padded with ``-1``
    to the widest it can be for the task kind: token ids up to ``max_length``, FewRel candidate
    ids up to the number of relations. Fixed widths let Avalanche's default collate stack
    patterns of any experience, and its replay buffers concatenate them; `as_model` trims the
    padding again, so a batch costs what our own batches cost.

    Args:
        kind: The run's task kind (classification or relation).

    Raises:
        UnsupportedStreamError: A QA kind (span extraction has no label space) or any other
            kind this codec does not know.

    """

    def __init__(self, kind: TaskKind) -> None:
        kind = base_kind(kind)  # its own members: max_length, num_labels, relation_tokens
        name = getattr(kind, "name", type(kind).__name__)
        max_length = int(getattr(kind, "max_length", 0))
        if name == "classification":
            self.fields: tuple[tuple[str, int], ...] = (("tokens", max_length),)
            self.num_classes = int(kind.num_labels)
        elif name == "relation":
            relations = len(kind.relation_tokens)
            self.fields = (("sentence", max_length), ("candidates", relations))
            self.num_classes = relations
        elif name == "qa":
            raise UnsupportedStreamError(
                "Avalanche interop covers classification streams (text classification, "
                "FewRel relations): a QA answer is a span of start/end tokens in a context "
                "window, not a class of a label space, so it has no Avalanche classification "
                "experience, accuracy or class-based strategy"
            )
        else:
            raise UnsupportedStreamError(f"Avalanche interop does not know task kind {name!r}")
        self.kind_name = name
        self.width = sum(width for _, width in self.fields)

    def encode(self, records: ExampleRecords) -> tuple[torch.Tensor, torch.Tensor]:
        """Patterns (n, width) and targets (n,) of ``records``.

        Raises:
            ValueError: A field longer than the kind allows (not a record of this kind).

        """
        n = len(records)
        x = torch.full((n, self.width), -1, dtype=torch.long)
        start = 0
        for name, width in self.fields:
            for i, values in enumerate(records[name]):
                if len(values) > width:
                    raise ValueError(f"record field {name!r} holds {len(values)} > {width} ids")
                x[i, start : start + len(values)] = torch.from_numpy(values.astype(np.int64))
            start += width
        y = torch.as_tensor(np.concatenate(records["label"]).astype(np.int64)).reshape(n)
        return x, y

    def decode(self, x: torch.Tensor) -> ExampleRecords:
        """The records of patterns ``x`` (labels 0: the model's inputs never read them)."""
        from lifelong.memory.records import ExampleRecords

        rows = x.detach().cpu().numpy()
        fields: dict[str, list[np.ndarray]] = {}
        start = 0
        for name, width in self.fields:
            part = rows[:, start : start + width]
            fields[name] = [row[row >= 0] for row in part]
            start += width
        fields["label"] = [np.zeros(1, dtype=np.int64)] * len(rows)
        return ExampleRecords.build(**fields)


class _Shared:
    """The task kind and codec an `AvalancheModel` reads: shared by its copies, never copied.

    LwF keeps a deep copy of the model as its teacher and checkpoints copy the plugins; the
    kind (tokenizer, token cache) is the same for every copy and is not state.
    """

    def __init__(self, kind: TaskKind, codec: RecordCodec) -> None:
        self.kind = kind
        self.codec = codec

    def __deepcopy__(self, memo: dict[int, Any]) -> _Shared:
        return self


class AvalancheModel(nn.Module):
    """Our `Classifier` as Avalanche calls it: patterns in, merged-label-space scores out.

    Its parameters are the classifier's (same tensors, same order), so Avalanche's optimiser
    steps, EWC importances and GEM projections act on our model.

    Args:
        model: The classifier (encoder + the task kind's head).
        kind: The run's task kind (makes rows from records).
        codec: Decodes the patterns (default: built from ``kind``).

    """

    def __init__(self, model: Classifier, kind: TaskKind, codec: RecordCodec | None = None):
        super().__init__()
        self.model = model
        self.shared = _Shared(kind, codec or RecordCodec(kind))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scores (n, classes): logits, or FewRel candidate margins at their relations."""
        kind, codec = self.shared.kind, self.shared.codec
        records = codec.decode(x)
        batch = kind.rows(records).to(x.device)
        logits = self.model(*batch.inputs())
        if codec.kind_name == "classification":
            return logits
        return candidate_scores(logits, batch, records, codec.num_classes)


def candidate_scores(
    logits: torch.Tensor, batch: Batch, records: ExampleRecords, num_classes: int
) -> torch.Tensor:
    """FewRel pair scores as class scores: each candidate's score at its relation, (n, classes).

    Args:
        logits: Pair scores (rows, 1) of ``batch``.
        batch: The rows of ``records`` (one per candidate, examples in order).
        records: The examples' records (their ``candidates``, in row order).
        num_classes: Relations in the merged label space.

    """
    margin = pair_scores(logits)  # (rows,)
    relation = torch.as_tensor(
        np.concatenate(records["candidates"]).astype(np.int64), device=logits.device
    )
    out = margin.new_full((batch.num_examples, num_classes), PADDING_SCORE)
    return out.index_put((batch.row_groups, relation), margin)


def as_model(model: Classifier, kind: TaskKind) -> AvalancheModel:
    """``model`` as an Avalanche strategy's model on `as_benchmark`'s patterns."""
    return AvalancheModel(model, kind)


def experience_dataset(codec: RecordCodec, records: ExampleRecords, task_label: int = 0) -> Any:
    """An Avalanche classification dataset of ``records``: (pattern, target, task label).

    Avalanche's own tensor dataset (``TaskAwareSupervisedClassificationDataset``), with the
    ``targets`` and ``targets_task_labels`` attributes its strategies and metrics read.
    """
    from avalanche.benchmarks.utils import _make_taskaware_tensor_classification_dataset

    x, y = codec.encode(records)
    return _make_taskaware_tensor_classification_dataset(
        x, y, task_labels=task_label, targets=y.tolist()
    )


def as_benchmark(stream: TaskStream, kind: TaskKind, *, task_labels: bool = False) -> Any:
    """``stream`` as an Avalanche benchmark: one classification experience per task.

    Each task's train and test split becomes an experience of the benchmark's
    ``train_stream`` and ``test_stream``, in the stream's task order (experience i = task i),
    over our tokenised inputs (``kind.encode``: the same records our runs train on) and the
    stream's merged label space; experiences carry Avalanche's classes timeline
    (``classes_in_this_experience``, ``classes_seen_so_far``, ...).

    Args:
        stream: A text-classification or FewRel stream.
        kind: Its task kind (`lifelong.tasks.build_task`, or a run's cached kind).
        task_labels: Task label i for task i; default 0 everywhere (no task ids, as in our
            runs and the papers).

    Returns:
        The benchmark (``avalanche.benchmarks.scenarios.CLScenario``).

    Raises:
        UnsupportedStreamError: A QA stream (see the module docstring).
        AvalancheUnavailableError: Avalanche does not import here.

    """
    codec = RecordCodec(kind)
    require_avalanche()
    from avalanche.benchmarks.scenarios.dataset_scenario import benchmark_from_datasets
    from avalanche.benchmarks.scenarios.supervised import with_classes_timeline

    def split(tasks: Sequence[Task], part: str) -> list[Any]:
        return [
            experience_dataset(codec, kind.encode(getattr(task, part)), i if task_labels else 0)
            for i, task in enumerate(tasks)
        ]

    tasks = list(stream)
    return with_classes_timeline(
        benchmark_from_datasets(train=split(tasks, "train"), test=split(tasks, "test"))
    )


# ---------------------------------------------------------------------------------------------
# (b) Avalanche's strategies behind our Strategy protocol


@option_group
class AvalancheOptions:
    """What every Avalanche strategy takes here (Avalanche's defaults unless noted)."""

    train_epochs: PositiveInt = 1  # passes over each experience; 1: the papers' single pass
    # clip the gradient norm before every optimiser step (after GEM's / A-GEM's projections),
    # as our strategies do by default (ClipOptions: 1.0); 0: none, Avalanche's own training
    max_grad_norm: NonNegativeFloat = 1.0
    # the experience's mini-batches in the order our learner made them (its seeded shuffle),
    # not reshuffled by Avalanche's loader: the same batches as our strategies get
    our_batch_order: bool = True


@option_group
class NaiveOptions(AvalancheOptions):
    """Avalanche's ``Naive``: fine-tuning, no options of its own; clipped as our ``seq``."""

    max_grad_norm: NonNegativeFloat = 0.0  # our seq's default (Holla's cls_baseline.py)


@option_group
class ReplayOptions(AvalancheOptions):
    """Avalanche's ``Replay``: an experience-balanced buffer, one memory batch per batch."""

    mem_size: PositiveInt = 200  # Avalanche's default buffer size (patterns, all experiences)


@option_group
class EWCOptions(AvalancheOptions):
    """Avalanche's ``EWC``: penalty ``ewc_lambda * Σ F (θ − θ*)²`` (no 1/2 factor).

    Avalanche has no default λ; 500 is our ``ewc``'s default 1,000 under its ``(λ/2)``
    convention. ``mode`` and ``decay_factor`` are Avalanche's (``separate`` keeps one penalty
    per experience; ``onlinesum`` / ``onlineweightedsum`` one running one, decayed by
    ``decay_factor`` in the weighted mode). Avalanche's importances are the mean squared
    gradients of mini-batch losses (not per-example: our ``ewc`` uses per-example gradients).
    """

    ewc_lambda: NonNegativeFloat = 500.0
    mode: Literal["separate", "onlinesum", "onlineweightedsum"] = "separate"
    decay_factor: Probability | None = None  # needed by onlineweightedsum

    def check(self) -> None:
        """``onlineweightedsum`` needs a decay factor (Avalanche asserts it)."""
        from lifelong.options import OptionsError

        if self.mode == "onlineweightedsum" and self.decay_factor is None:
            raise OptionsError("mode 'onlineweightedsum' needs a decay_factor")


@option_group
class LwFOptions(AvalancheOptions):
    """Avalanche's ``LwF``: distillation from the previous experience's model.

    Defaults: Avalanche's ``LwFPlugin`` (alpha 1, temperature 2; Li & Hoiem 2017 use T = 2).
    """

    alpha: NonNegativeFloat = 1.0
    temperature: PositiveFloat = 2.0


@option_group
class AGEMOptions(AvalancheOptions):
    """Avalanche's ``AGEM``: one reference gradient from a memory sample per update.

    Avalanche has no default memory size; 100 per experience here. ``sample_size`` 64 is
    Avalanche's default.
    """

    patterns_per_exp: PositiveInt = 100
    sample_size: PositiveInt = 64


@option_group
class GEMOptions(AvalancheOptions):
    """Avalanche's ``GEM``: a QP projection against every earlier experience's memory.

    Avalanche has no default memory size; 32 per experience here, because GEM computes one
    gradient over each earlier experience's whole memory at *every* update (a transformer on a
    CPU pays that per step). ``memory_strength`` 0.5 is Avalanche's default (γ in GEM).
    """

    patterns_per_exp: PositiveInt = 32
    memory_strength: NonNegativeFloat = 0.5


@option_group
class DEROptions(AvalancheOptions):
    """Avalanche's ``DER`` (DER++ when ``beta > 0``): replay with stored logits.

    Defaults: Avalanche's (``mem_size`` 200, ``alpha`` 0.1, ``beta`` 0.5; a memory batch of
    ``batch_size_mem``, default the run's batch size).
    """

    mem_size: PositiveInt = 200
    alpha: NonNegativeFloat = 0.1
    beta: NonNegativeFloat = 0.5
    batch_size_mem: PositiveInt | None = None


class AvalancheStrategy(StrategyHooks):
    """An Avalanche strategy template trained on our stream, behind our `Strategy` protocol.

    ``observe`` buffers the task's examples; ``on_task_end`` trains the template on them as one
    experience (see the module docstring); ``predict`` is our model's plain forward pass (none of
    these strategies changes inference). Subclasses name the template and its options.

    Args:
        context: Model, task kind, learning rate, batch size, device.
        options: The strategy's options.

    Raises:
        AvalancheUnavailableError: Avalanche does not import here.
        UnsupportedStreamError: A QA run.

    """

    name: ClassVar[str] = "avalanche:base"
    description: ClassVar[str] = ""
    template: ClassVar[str] = ""  # class name in avalanche.training
    Options: ClassVar[type] = AvalancheOptions

    def __init__(self, context: StrategyContext, options: Any = None) -> None:
        require_avalanche()
        import avalanche.training as training
        from avalanche.training.plugins import EvaluationPlugin

        from lifelong.training import make_optimizer

        self.options = options or self.Options()
        self.context = context
        self.model, self.kind = context.model, context.kind
        self.codec = RecordCodec(self.kind)
        self.net = AvalancheModel(self.model, self.kind, self.codec)
        self.optimizer = make_optimizer(self.model, context.lr)
        with warnings.catch_warnings():  # "no loggers": on purpose, our metrics are the record
            warnings.simplefilter("ignore")
            evaluator = EvaluationPlugin(loggers=[])
        self.losses = LossLog()  # each update's loss, for the trackers
        plugins: list[Any] = [self.losses]
        if self.options.max_grad_norm:
            plugins.append(GradientClip(self.options.max_grad_norm))
        self.avalanche = getattr(training, self.template)(
            model=self.net,
            plugins=plugins,
            optimizer=self.optimizer,
            criterion=nn.CrossEntropyLoss(),
            train_mb_size=context.batch_size,
            train_epochs=self.options.train_epochs,
            eval_mb_size=context.batch_size,
            device=context.runtime.device,
            evaluator=evaluator,
            eval_every=-1,
            **self.template_options(),
        )
        self.pending: list[ExampleRecords] = []
        self.experiences = 0  # experiences trained
        self.seen_classes: set[int] = set()

    def template_options(self) -> dict[str, Any]:
        """The template's own keyword arguments: the options not in `AvalancheOptions`.

        Each strategy's ``Options`` fields are named as its Avalanche template's arguments
        (``mem_size``, ``ewc_lambda``, ``patterns_per_exp``, ...), so they pass straight on.
        """
        shared = {f.name for f in dataclasses.fields(AvalancheOptions)}
        return {
            f.name: getattr(self.options, f.name)
            for f in dataclasses.fields(self.options)
            if f.name not in shared
        }

    def observe(self, batch: Batch) -> dict[str, float]:
        """Buffer the batch's examples for this task's experience (no update yet)."""
        if batch.examples is None:
            raise ValueError("Avalanche strategies need batches made by a task kind (records)")
        self.pending.append(batch.examples.only(self.kind.stored_fields))
        return {}

    def on_task_end(self, task_index: int) -> list[dict[str, float]]:
        """Train the template on the task's buffered examples as experience ``task_index``.

        Returns:
            Each update's loss (``{"loss": ...}``), which the learner hands to the trackers.

        """
        from avalanche.benchmarks.scenarios.dataset_scenario import DatasetExperience

        if not self.pending:
            return []
        records = concat_records(self.pending)
        dataset = experience_dataset(self.codec, records)
        experience = DatasetExperience(dataset=dataset, current_experience=task_index)
        classes = set(int(c) for c in dataset.targets.uniques)
        experience.classes_in_this_experience = classes
        experience.previous_classes = set(self.seen_classes)
        experience.classes_seen_so_far = classes | self.seen_classes
        experience.future_classes = set()  # unknown to a learner: the stream is not given
        # Avalanche 0.6 calls its own deprecated API, with a decorator that forces its warning
        # through every filter: record the warnings, pass on all but those
        loader = {"shuffle": False} if self.options.our_batch_order else {}
        self.losses.values = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.avalanche.train(experience, eval_streams=[], **loader)
        for w in caught:
            if issubclass(w.category, DeprecationWarning):
                log.debug("avalanche: %s", w.message)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self.seen_classes |= classes
        self.experiences += 1
        self.pending = []
        return [{"loss": value} for value in self.losses.values]

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model (evaluation mode)."""
        from lifelong.training import predict_scores

        return predict_scores(self.model, batch)

    def report(self) -> dict[str, float]:
        """Experiences trained, and the examples the strategy's memory holds (if any)."""
        out: dict[str, float] = {"experiences": float(self.experiences)}
        held = self.memory_examples()
        if held is not None:
            out["memory_examples"] = float(held)
        return out

    buffer: ClassVar[Callable[[Any], int] | None] = None  # reads the template's memory size

    @classmethod
    def check_available(cls) -> None:
        """Refuse the strategy before anything loads where Avalanche does not import."""
        require_avalanche()

    def held_bytes(self) -> int:
        """Bytes of the template's plugin state: replay buffers, EWC importances, LwF's teacher."""
        from lifelong.cost import tensor_bytes
        from lifelong.integrations.avalanche_state import encode

        live = {id(obj): name for name, obj in self._live().items()}
        parts = [encode(p, live) for p in self.avalanche.plugins]
        if hasattr(self.avalanche, "storage_policy"):  # DER keeps its buffer on the template
            parts.append(encode(self.avalanche.storage_policy, live))
        return tensor_bytes(parts)

    def memory_examples(self) -> int | None:
        """Examples in the template's replay memory, or None for a strategy without one."""
        return None if self.buffer is None else self.buffer(self.avalanche)

    def state_dict(self) -> dict[str, Any]:
        """Weights, optimiser, the buffered examples and the template's plugins, as data.

        The plugins (replay buffers, EWC importances, LwF's teacher, GEM memories, the clock)
        are written by `lifelong.integrations.avalanche_state.encode`: tensors and tagged
        plain containers, with the live model, optimiser and evaluator as references, so a
        checkpoint holds them once, runs nothing when read, and `load_state_dict` puts the
        state back into this run's own template. A memory loader's position (A-GEM's infinite
        loader) is not kept: a resumed run starts a fresh pass over the same memory.
        """
        from lifelong.integrations.avalanche_state import encode

        live = {id(obj): name for name, obj in self._live().items()}
        template = {"plugins": [encode(p, live) for p in self.avalanche.plugins]}
        template["clock"] = encode(self.avalanche.clock, live)
        if hasattr(self.avalanche, "storage_policy"):  # DER keeps its buffer on the template
            template["storage_policy"] = encode(self.avalanche.storage_policy, live)
        # the names of the parameters the optimiser steps (None before the first experience):
        # without them Avalanche takes the next experience for its first, and resets Adam
        optimized = getattr(self.avalanche, "optimized_param_id", None)
        template["optimized"] = None if optimized is None else list(optimized)
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "pending": list(self.pending),
            "experiences": self.experiences,
            "seen_classes": sorted(self.seen_classes),
            "template": template,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned.

        Raises:
            ValueError: A checkpoint of an earlier version (its template state pickled,
                which is never unpickled: it could run code), or a state that does not fit
                this strategy's template (`AvalancheStateError`, naming what).

        """
        from lifelong.integrations.avalanche_state import rebuild_loaders, restore

        if "template" not in state:
            raise ValueError(
                "this Avalanche checkpoint was written by an earlier lifelong, which pickled "
                "the template's plugins; a pickle is not read (it could run code): delete "
                "checkpoint.pt and resume, which starts the run again"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.pending = list(state["pending"])
        self.experiences = int(state["experiences"])
        self.seen_classes = set(state["seen_classes"])
        live = self._live()
        template, plugins = state["template"], self.avalanche.plugins
        if len(template["plugins"]) != len(plugins):
            raise ValueError(
                f"the checkpoint holds {len(template['plugins'])} Avalanche plugins, this "
                f"run's template {len(plugins)}"
            )
        for i, (plugin, data) in enumerate(zip(plugins, template["plugins"], strict=True)):
            if isinstance(data, dict) and data.get("~") == "live":
                continue  # the evaluator: this run's own
            restore(plugin, data, live, f"plugins[{i}]")
        restore(self.avalanche.clock, template["clock"], live, "clock")
        if "storage_policy" in template:
            restore(self.avalanche.storage_policy, template["storage_policy"], live, "policy")
        for plugin in plugins:  # A-GEM: a fresh pass over its memory loader
            rebuild_loaders(plugin)
        names = template.get("optimized")
        if names is not None:  # the same parameters, this run's tensors
            parameters = dict(self.avalanche.model.named_parameters())
            unknown = [n for n in names if n not in parameters]
            if unknown:
                raise ValueError(
                    f"the checkpoint's optimiser steps unknown parameters {unknown[:3]}"
                )
            self.avalanche.optimized_param_id = {n: parameters[n] for n in names}

    def _live(self) -> dict[str, Any]:
        return {
            "net": self.net,
            "model": self.model,
            "optimizer": self.optimizer,
            "shared": self.net.shared,
            "evaluator": self.avalanche.evaluator,
        }


class LossLog:
    """An Avalanche plugin keeping the loss of every training iteration (for the trackers)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def after_training_iteration(self, strategy: Any, **kwargs: Any) -> None:
        """Keep this iteration's loss."""
        self.values.append(float(strategy.loss.detach()))


class GradientClip:
    """An Avalanche plugin clipping the gradient norm right before each optimiser step.

    ``before_update`` runs after every ``after_backward`` hook, so GEM's and A-GEM's projected
    gradients are what is clipped, as our strategies clip the gradient they apply. A plain class:
    Avalanche calls a plugin's callbacks by name (``trigger_plugins``), and checkpoints copy it.

    Args:
        max_norm: The largest gradient norm (over all the model's parameters).

    """

    def __init__(self, max_norm: float) -> None:
        self.max_norm = max_norm

    def before_update(self, strategy: Any, **kwargs: Any) -> None:
        """Clip the template model's gradients."""
        nn.utils.clip_grad_norm_(strategy.model.parameters(), self.max_norm)


def concat_records(parts: Sequence[ExampleRecords]) -> ExampleRecords:
    """The examples of ``parts`` in order, as one `ExampleRecords`."""
    from lifelong.memory.records import ExampleRecords

    names = parts[0].names
    return ExampleRecords({k: tuple(v for part in parts for v in part[k]) for k in names})


def _replay_buffer(template: Any) -> int:
    """Patterns in Replay's experience-balanced buffer (a plugin's storage policy)."""
    for plugin in template.plugins:
        policy = getattr(plugin, "storage_policy", None)
        if policy is not None:
            return len(policy.buffer)
    return 0


def _der_buffer(template: Any) -> int:
    """Patterns in DER's buffer (on the template itself)."""
    return len(template.storage_policy.buffer)


def adapter(
    key: str,
    template: str,
    options: type,
    description: str,
    buffer: Callable[[Any], int] | None = None,
) -> type[AvalancheStrategy]:
    """The adapter class of Avalanche's strategy template ``template``, as ``avalanche:key``.

    The seven adapters differ only in these data (one row each below); each is registered by an
    entry point of the ``lifelong.strategies`` group, like every other strategy.

    Args:
        key: The name after ``avalanche:``.
        template: The template's class name in ``avalanche.training``.
        options: Its options (`AvalancheOptions` and the template's own arguments).
        description: The one-line description ``lifelong strategies`` prints.
        buffer: Reads the size of the template's replay memory, for strategies with one.

    """
    name = f"Avalanche{template}"
    attributes = {
        "__doc__": f"Avalanche's ``{template}`` behind our Strategy protocol: {description}.",
        "__module__": __name__,
        "__qualname__": name,
        "name": PREFIX + key,
        "description": description,
        "template": template,
        "Options": options,
        "buffer": staticmethod(buffer) if buffer else None,
    }
    return type(name, (AvalancheStrategy,), attributes)


AvalancheNaive = adapter(
    "naive", "Naive", NaiveOptions, "Avalanche's Naive (fine-tuning) on our stream and model"
)
AvalancheReplay = adapter(
    "replay",
    "Replay",
    ReplayOptions,
    "Avalanche's Replay (experience-balanced buffer, mem_size)",
    _replay_buffer,
)
AvalancheEWC = adapter("ewc", "EWC", EWCOptions, "Avalanche's EWC (separate or online penalties)")
AvalancheLwF = adapter(
    "lwf", "LwF", LwFOptions, "Avalanche's LwF (distillation from the previous model)"
)
AvalancheAGEM = adapter(
    "agem", "AGEM", AGEMOptions, "Avalanche's A-GEM (projection on a memory reference gradient)"
)
AvalancheGEM = adapter(
    "gem", "GEM", GEMOptions, "Avalanche's GEM (QP projection, per-experience memories)"
)
AvalancheDER = adapter(
    "der",
    "DER",
    DEROptions,
    "Avalanche's DER++ (replay with stored logits; beta=0: DER)",
    _der_buffer,
)

STRATEGIES: tuple[type[AvalancheStrategy], ...] = (
    AvalancheNaive,
    AvalancheReplay,
    AvalancheEWC,
    AvalancheLwF,
    AvalancheAGEM,
    AvalancheGEM,
    AvalancheDER,
)
"""Every adapter, in the order ``lifelong strategies`` lists them (pyproject registers each)."""


def names() -> list[str]:
    """The ``avalanche:NAME`` strategy names."""
    return [cls.name for cls in STRATEGIES]


__all__ = [
    "PREFIX",
    "AvalancheModel",
    "AvalancheStrategy",
    "AvalancheUnavailableError",
    "RecordCodec",
    "UnsupportedStreamError",
    "as_benchmark",
    "as_model",
    "experience_dataset",
    "names",
    "adapter",
    "require_avalanche",
]
