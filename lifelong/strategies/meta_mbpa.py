"""Meta-MbPA (Wang et al., 2020): meta-learnt local adaptation with a small diverse memory.

Training, for each stream batch:

* **meta-task loss**: for each example x, one local-adaptation step on its K nearest memories,
  θ̃_x = θ − α ∇_θ L_LA(θ; N_x), then the loss of x under θ̃_x, back-propagated through the
  adaptation step (second order; ``first_order: true`` treats ∇L_LA as a constant). α is
  ``meta_lr``, 1e-5 by default: Wang et al. (2020, meta-task loss) take α = "the current
  learning rate", 1e-5 in their runs (as the survey's "Meta-MbPA" section reports it); we fix
  the value so α does not follow a run's different outer rate, and ``meta_lr: 0`` follows the
  current outer learning rate instead. While memory is empty the plain loss is used.
* **diversity writes** (`lifelong.memory.DiversityWrite`): an example is written with a
  probability that grows with its key distance to everything stored, scaled to keep about
  ``write_rate`` (1%) of the stream (``write_rule``: see `MetaMbPAOptions`). The achieved rate
  is in the run's report.
* **meta-replay**: every R_I stream examples, the same meta loss on ⌊r·R_I⌋ uniformly drawn
  memory examples (1% replay, as MbPA++); a replayed memory's neighbours exclude itself.

Memories are whole examples: neighbours, pools and replays count examples, and the task kind
expands each into its rows (a FewRel sentence with its candidates, a question with its windows).

Test, **coarse local adaptation** (Wang et al., 2020), done "only once for the entire testing
set" (the survey's words): each test input retrieves its K nearest memories; the pool is the
multiset union of these retrievals, i.e. the distinct memories weighted by how many test inputs
retrieved them. The objective is the average of the per-input MbPA++ objectives,
Σ_u w_u l(x_u) / Σ_u w_u + λ||θ̃ − θ||², minimised with L = 30 full-pool SGD steps (with
momentum, see `LocalAdaptationOptions`) from θ; every test input is then predicted with θ̃. The
base weights never change. ``coarse_scope`` says what the testing set is: ``test_set`` (the
default) is every task's test set of one evaluation together, one θ̃ per evaluation, which
needs the learner to hand over all test sets first (the ``on_eval_sets`` hook; without it,
one θ̃ per ``predict_set`` call); ``task`` adapts once per task's test set, which uses task
identity at test time (the task an input comes from decides which θ̃ predicts it).

``meta_scope`` picks the parameters of the meta step: ``all`` (the paper), ``top<N>``,
``head`` or ``lora`` (a rank-``adapt_rank`` delta on every layer from B = 0, so the step moves
each weight by −α·G·AᵀA: the gradient projected on r input directions;
`lifelong.mechanisms.lowrank`). With ``head`` the encoder runs once per batch over the batch's
distinct neighbours and the meta-gradient still reaches it through their features: a CPU-sized
variant.

A second-order step through encoder layers needs `attn_implementation="eager"`: the CPU SDPA
kernel of Hugging Face BERT has no double backward. Only that computation switches to it (not
the first-order one, not the head-only one, not prediction), through
`lifelong.encoders.base.attention_implementation`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Annotated, ClassVar, Literal

import numpy as np
import torch
from torch.func import functional_call

from lifelong import cost
from lifelong.batch import Batch
from lifelong.encoders.base import EncoderOutput, attention_implementation
from lifelong.heads import reads_pooled_only
from lifelong.mechanisms.adaptation import LocalAdaptationOptions
from lifelong.mechanisms.inner_loop import Params, local_adapt, summed_gradient
from lifelong.mechanisms.neighbours import frozen_prefix
from lifelong.mechanisms.replay import (
    ClipOptions,
    ReplayOptions,
    ReplaySchedule,
    SparseReplay,
    episodic_writer,
)
from lifelong.mechanisms.scopes import Head, Lora, Scope, parse_scope
from lifelong.memory import DiversityWrite, EpisodicMemory, EpisodicWriter
from lifelong.model import task_loss
from lifelong.options import NonNegativeFloat, PositiveFloat, PositiveInt, Range, option_group
from lifelong.runtime import eager_call
from lifelong.state import Counters, ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.streams.core import Example
from lifelong.tasks.classification import Classification
from lifelong.training import evaluating

log = logging.getLogger(__name__)


@option_group
class MetaMbPAOptions(ReplayOptions, LocalAdaptationOptions, ClipOptions):
    """Meta-MbPA's options; defaults follow Wang et al. (2020): 1% memory, K = 32, L = 30, α = 1e-5.

    ``k``, ``steps``, ``l2``, ``adapt_lr``, ``momentum`` and ``adapt_scope`` are the coarse
    adaptation's (and ``k`` also the meta step's neighbours); the paper gives no step size or
    optimiser for it, so those are MbPA++'s (EM-in-LLL's, see `LocalAdaptationOptions`).
    ``replay_every`` / ``replay_ratio`` are the meta-replay's.

    ``write_rule`` is how the key distance d to memory becomes a write score. The paper (§3.2)
    writes ``log p(x) ∝ −d(x)/β``, i.e. p ∝ exp(−d/β), and says the aim is "to select examples
    that are less similar to existing memory". Taken literally, that formula is largest for
    d = 0, so it favours near-duplicates of stored examples: the opposite of the stated aim.
    ``dissimilar`` (default) follows the aim: p ∝ 1 − exp(−d/β), reading exp(−d/β) as how well
    memory already covers x. ``literal`` is the formula as printed, p ∝ exp(−d/β), for
    comparison. Both are scaled to keep ``write_rate`` of the stream (`DiversityWrite`).
    """

    write_rate: Annotated[float, Range(0, 1, min_open=True)] = 0.01  # fraction kept (§3.2: 1%)
    beta: PositiveFloat = 10.0  # β: distance scale of the diversity criterion (§3.2)
    write_rule: Literal["dissimilar", "literal"] = "dissimilar"  # p ∝ 1 − e^(−d/β), or e^(−d/β)
    meta_lr: NonNegativeFloat = 1e-5  # α of the meta step (paper: 1e-5); 0 = the current outer lr
    coarse_scope: Literal["test_set", "task"] = "test_set"  # one θ̃ per evaluation, or per task
    meta_scope: Scope = "all"  # what the meta step adapts: "all", "top<N>", "head" or "lora"
    first_order: bool = False  # treat the meta step's gradient as a constant
    pool_chunk: PositiveInt = 32  # memory examples per forward pass in a coarse step


def _mean_cross_entropy(kind: object) -> bool:
    """Whether ``kind``'s loss is `Classification`'s, the mean cross-entropy over rows.

    A kind prepared for a device is read through to its base.
    """
    base = getattr(kind, "base", kind)
    return isinstance(base, Classification) and type(base).loss is Classification.loss


class MetaMbPA(StrategyHooks):
    """Meta-learnt local adaptation, diversity writes, meta-replay and coarse adaptation.

    Args:
        context: Model, task kind, learning rate and seed.
        options: See `MetaMbPAOptions`.

    """

    name: ClassVar[str] = "meta-mbpa"
    description: ClassVar[str] = (
        "meta local-adaptation loss + diversity writes (1%) + coarse test-time adaptation"
    )
    Options = MetaMbPAOptions

    def __init__(self, context: StrategyContext, options: MetaMbPAOptions | None = None) -> None:
        self.options = options = options or self.Options()
        self.model, self.kind = context.model, context.kind
        self.trainer = context.build_trainer(options.max_grad_norm)
        policy = DiversityWrite(rate=options.write_rate, beta=options.beta, rule=options.write_rule)
        self.replay = SparseReplay(
            context,
            ReplaySchedule.from_options(options),
            chunk=options.replay_chunk,
            grad_norm=options.max_grad_norm,
            writer=episodic_writer(context, policy=policy),
        )
        encoder = self.model.encoder
        self.meta_scope = parse_scope(options.meta_scope, encoder, options.adapt_rank)
        self.adapt_scope = parse_scope(options.adapt_scope, encoder, options.adapt_rank)
        self.seed = context.seed  # of lora's A (`lifelong.mechanisms.lowrank.init_lora`)
        self.counts = Counters(coarse_adaptations=0)
        self.resumable = ResumableParts(
            trainer=self.trainer, replay=self.replay, counts=self.counts
        )
        # θ̃ of the current evaluation (coarse_scope "test_set"); never saved: it lasts one phase
        self._evaluation_params: Params | None = None
        self._evaluating = False
        self._warned = False  # about a learner without on_eval_sets (said once)

    @property
    def writer(self) -> EpisodicWriter:
        """The diversity-writing episodic writer (memory and key network)."""
        return self.replay.writer

    @property
    def memory(self) -> EpisodicMemory:
        """The diversity-written episodic memory."""
        return self.replay.memory

    # -- training ---------------------------------------------------------------------------
    def observe(self, batch: Batch) -> dict[str, float]:
        """Meta-task update on the batch, diversity write, meta-replay when due."""
        self._evaluation_params = None  # the weights change: an evaluation's θ̃ is stale
        stats = {"loss": self.meta_update(batch)}
        self.replay.write(batch)
        for _ in range(self.replay.due(batch)):
            if len(self.memory):
                slots = self.replay.sample()
                stats["replay_loss"] = self.meta_update(self.writer.batch(slots), own_slots=slots)
        return stats

    def meta_update(self, batch: Batch, own_slots: np.ndarray | None = None) -> float:
        """One optimiser step on the mean meta loss of ``batch`` (memories: ``own_slots``)."""
        self.model.train()
        self.trainer.optimizer.zero_grad(set_to_none=True)
        neighbours = self.neighbours(batch, own_slots)
        if isinstance(self.meta_scope, Head):
            loss = self.head_meta_loss(batch, neighbours)
            self.trainer.backward(loss)
            total = float(loss.detach())
        else:
            summed = torch.zeros((), device=batch.input_ids.device)
            n = batch.num_examples
            with self._double_backward():
                for i in range(n):
                    loss = self.meta_loss(batch.examples_at([i]), neighbours[i]) / n
                    self.trainer.backward(loss)  # one example's graph at a time
                    summed = summed + loss.detach()  # summed on the device: no sync a step
            total = float(summed)
        self.trainer.apply()
        return total

    def _double_backward(self) -> contextlib.AbstractContextManager[None]:
        # A second-order step through encoder layers differentiates their backward pass, and
        # the CPU SDPA kernel has none: use the eager attention kernel for it, and only for it.
        if self.options.first_order:
            return contextlib.nullcontext()
        return attention_implementation(self.model.encoder, "eager")

    def neighbours(self, batch: Batch, own_slots: np.ndarray | None = None) -> list[np.ndarray]:
        """Slots of each example's K nearest memories (itself excluded for replayed memories)."""
        if not len(self.memory):
            return [np.zeros(0, np.int64)] * batch.num_examples
        extra = 0 if own_slots is None else 1
        keys = self.writer.keys(batch.examples)
        slots = self.memory.nearest(keys, self.options.k + extra)[1]
        if own_slots is None:
            return list(slots)
        return [row[row != own][: self.options.k] for row, own in zip(slots, own_slots)]

    def meta_loss(self, example: Batch, slots: np.ndarray) -> torch.Tensor:
        """l(f_θ̃(x), y) with θ̃ = θ − α∇L_LA(θ; N_x); the plain loss when N_x is empty."""
        if len(slots) == 0:
            return self.model.loss(example)
        neighbours = self.writer.batch(slots)
        staged = self._staged(neighbours)

        def la_loss(q: Params) -> torch.Tensor:
            return self.model.criterion(self._meta_logits(q, staged), neighbours)

        adapted = self.meta_step(la_loss, self.meta_scope.start(self.model, self.seed))
        logits = self._meta_logits(adapted, self._staged(example))
        return self.model.criterion(logits, example)

    def _staged(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """A batch's inputs for the meta step, computed with their autograd graph.

        The token inputs; for ``lora``, the embedding outputs (stage 1), through which the
        meta-gradient reaches the embeddings.
        """
        if not isinstance(self.meta_scope, Lora):
            return batch.inputs()
        types = {} if batch.token_type_ids is None else {"token_type_ids": batch.token_type_ids}
        x = self.model.encoder.run_stages(batch.input_ids, batch.attention_mask, 0, 1, **types)
        return x, batch.attention_mask

    def _meta_logits(self, params: Params, staged: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Logits under the meta step's parameters: lora deltas, or a subset of the weights."""
        if isinstance(self.meta_scope, Lora):
            return self.meta_scope.logits(self.model, params, staged)
        return eager_call(self.model, params, staged)  # the rest: the model's own weights

    def head_meta_loss(self, batch: Batch, neighbours: list[np.ndarray]) -> torch.Tensor:
        """The batch's mean meta loss when the meta step adapts the head only.

        The encoder runs once over the batch's distinct neighbours (with its graph, so the
        meta-gradient reaches it through their features); each example then takes its own
        head step on its K neighbours' rows. Second order needs no double backward through the
        encoder: the inner gradient is the head's.
        """
        distinct = np.unique(np.concatenate(neighbours)) if len(self.memory) else []
        if len(distinct) == 0:
            return self.model.loss(batch)
        stored = self.writer.batch(distinct)
        position = {int(s): i for i, s in enumerate(distinct)}
        features = self.model.encoder(*stored.inputs())  # their rows
        inputs = self.model.encoder(*batch.inputs())  # the batch's rows
        batched = self.batches_head_steps
        if batched is None:
            batched = batch.input_ids.device.type == "cuda"
        if batched and self._one_row_each(batch, stored, neighbours):
            near = torch.as_tensor(
                np.array([[position[int(s)] for s in slots] for slots in neighbours]),
                device=stored.input_ids.device,
            )  # (n, K): each example's neighbours among the distinct ones
            return self._batched_head_meta_loss(features.pooled, stored.labels, near, inputs.pooled,
                                                batch.labels)  # fmt: skip
        head, criterion = self.model.head, self.model.criterion
        params = dict(head.named_parameters())
        losses = []
        for i, slots in enumerate(neighbours):
            examples = [position[int(s)] for s in slots]
            rows = torch.as_tensor(
                np.concatenate([stored.example_rows(e) for e in examples]),
                device=stored.input_ids.device,
            )
            near = stored.examples_at(examples, trim=False)  # their labels, groups, masks

            def la_loss(q: Params, rows: torch.Tensor = rows, near: Batch = near) -> torch.Tensor:
                return criterion(functional_call(head, q, (features.rows(rows),)), near)

            adapted = self.meta_step(la_loss, params)
            own = torch.as_tensor(batch.example_rows(i), device=batch.input_ids.device)
            logits = functional_call(head, adapted, (inputs.rows(own),))
            losses.append(criterion(logits, batch.examples_at([i], trim=False)))
        return torch.stack(losses).mean()

    batches_head_steps: ClassVar[bool | None] = None
    """Whether the head scope's per-example steps run as one ``vmap``-ed computation where they
    can (`_one_row_each`): ``None`` on CUDA only, ``True`` always, ``False`` never. The loop stays
    as the oracle (tested equal). On the CPU the loop is the faster (0.33-0.35 s an example
    against 0.35-0.37 batched at the text budget, `experiments/bench/meta_step.py --scopes
    head,head-loop`): a step's time is the encoder's pass over the batch's distinct neighbours,
    and ``vmap`` adds its own work to the small head steps; on a GPU one call replaces a kernel
    launch per example."""

    def _one_row_each(self, batch: Batch, stored: Batch, neighbours: list[np.ndarray]) -> bool:
        """Whether the head steps can be batched (`_batched_head_meta_loss`).

        They can with a classification loss (mean cross-entropy over rows), one row an example,
        a head that reads the pooled vector alone, and as many neighbours for every example.
        """
        return (
            _mean_cross_entropy(self.kind)
            and batch.groups is None
            and stored.groups is None
            and reads_pooled_only(self.model.head)
            and len({len(slots) for slots in neighbours}) == 1
        )

    def _batched_head_meta_loss(
        self,
        near_pooled: torch.Tensor,
        near_labels: torch.Tensor,
        near: torch.Tensor,
        pooled: torch.Tensor,
        labels: torch.Tensor,
    ) -> torch.Tensor:
        """`head_meta_loss` with every example's head step in one ``vmap`` (the same numbers).

        Args:
            near_pooled: The distinct neighbours' pooled vectors (u, d), with their graph.
            near_labels: Their labels (u,).
            near: Each example's K neighbours among them (n, K).
            pooled: The batch's pooled vectors (n, d), with their graph.
            labels: The batch's labels (n,).

        """
        head = self.model.head
        params = dict(head.named_parameters())

        def logits(q: Params, vectors: torch.Tensor) -> torch.Tensor:  # vectors (r, d)
            return functional_call(head, q, (EncoderOutput(vectors[:, None], vectors),))

        def one(rows: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            def la_loss(q: Params) -> torch.Tensor:  # the mean over its K neighbours
                return task_loss(logits(q, near_pooled[rows]), near_labels[rows])

            adapted = self.meta_step(la_loss, params)
            return task_loss(logits(adapted, x[None]), y[None])

        losses = torch.func.vmap(one, randomness="different")(near, pooled, labels)  # (n,)
        return losses.mean()

    def meta_step(self, loss: Callable[[Params], torch.Tensor], params: Params) -> Params:
        """θ̃ = θ − α∇L_LA(θ): one SGD step at α (``meta_lr``, else the optimiser's lr)."""
        return local_adapt(
            loss,
            params,
            steps=1,
            lr=self.options.meta_lr or self.current_lr(),
            l2=0.0,
            first_order=self.options.first_order,
            loss_scale=self.trainer.inner_loss_scale,
        )

    def current_lr(self) -> float:
        """The optimiser's current learning rate (the paper's α)."""
        return float(self.trainer.optimizer.param_groups[0]["lr"])

    # -- test: coarse local adaptation ------------------------------------------------------
    def on_eval_start(self) -> None:
        """A new evaluation: forget the previous one's θ̃."""
        self._evaluation_params, self._evaluating = None, True

    def on_eval_sets(self, sets: Sequence[Sequence[Example]]) -> None:
        """Adapt once on the pool of every test set's inputs (``coarse_scope`` ``test_set``).

        The learner hands over all test sets of the evaluation before predicting any; each
        `predict_set` of this evaluation then uses the one θ̃.
        """
        if self.options.coarse_scope != "test_set":
            return
        self._evaluation_params = self._coarse_start()  # θ: nothing to adapt on
        sets = [examples for examples in sets if len(examples)]
        if sets and self._can_adapt():
            with cost.phase("adapt"):
                keys = np.concatenate([self._keys(examples) for examples in sets])
                with evaluating(self.model):
                    self._evaluation_params = self.coarse_adapt_keys(keys)

    def on_eval_end(self) -> None:
        """The evaluation is over: drop its θ̃ (it is never saved)."""
        self._evaluation_params, self._evaluating = None, False

    def predict_set(self, batches: Sequence[Batch]) -> list[torch.Tensor]:
        """Predict a test set with θ̃: this evaluation's (``test_set``) or its own (``task``)."""
        with evaluating(self.model):
            stage = self.adapt_scope.stage
            params = self._evaluation_params
            if params is None:
                if (
                    self._evaluating
                    and self.options.coarse_scope == "test_set"
                    and not self._warned
                ):
                    self._warned = True
                    log.warning(
                        "meta-mbpa coarse_scope 'test_set': the learner gave no on_eval_sets; "
                        "adapting once per test set instead"
                    )
                params = self._coarse_start()
                if self._can_adapt():
                    with cost.phase("adapt"):
                        params = self.coarse_adapt(batches)
            out = []
            with torch.no_grad():
                for batch in batches:
                    staged = frozen_prefix(self.model, stage, *batch.inputs())
                    out.append(self.adapt_scope.logits(self.model, params, staged))
            return out

    def _coarse_start(self) -> Params:
        """θ (or lora's zero delta) without its autograd graph: coarse adaptation's start."""
        return {k: v.detach() for k, v in self.adapt_scope.start(self.model, self.seed).items()}

    def _can_adapt(self) -> bool:
        return bool(len(self.memory)) and self.options.steps > 0

    def _keys(self, examples: Sequence[Example]) -> np.ndarray:
        """Memory keys of raw test examples, 64 at a time, shape (n, key_dim)."""
        chunks = [examples[s : s + 64] for s in range(0, len(examples), 64)]
        return np.concatenate([self.writer.query_keys(self.kind.encode(list(c))) for c in chunks])

    def pool(self, batches: Sequence[Batch]) -> tuple[np.ndarray, np.ndarray]:
        """Distinct memories retrieved by the test examples and their weights (retrieval counts)."""
        return self.pool_keys(np.concatenate([self.writer.query_keys(b.examples) for b in batches]))

    def pool_keys(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`pool` for test inputs given by their keys (n, key_dim)."""
        slots = self.memory.nearest(keys, self.options.k)[1]  # (n, k)
        distinct, counts = np.unique(slots, return_counts=True)
        return distinct, counts / counts.sum()

    def coarse_adapt(self, batches: Sequence[Batch]) -> Params:
        """θ̃ after L full-pool SGD steps on the weighted pool (see the module docstring)."""
        return self.coarse_adapt_keys(
            np.concatenate([self.writer.query_keys(b.examples) for b in batches])
        )

    def coarse_adapt_keys(self, keys: np.ndarray) -> Params:
        """`coarse_adapt` for test inputs given by their keys (n, key_dim)."""
        slots, weights = self.pool_keys(keys)
        scope, chunk = self.adapt_scope, self.options.pool_chunk
        losses, chunk_weights = [], []
        for s in range(0, len(slots), chunk):
            part = self.writer.batch(slots[s : s + chunk])
            staged = frozen_prefix(self.model, scope.stage, *part.inputs())  # at the stage
            w = torch.as_tensor(
                weights[s : s + chunk], dtype=torch.float32, device=part.input_ids.device
            )

            def loss(q: Params, staged=staged, part=part, w=w) -> torch.Tensor:
                logits = scope.logits(self.model, q, staged)
                return (self.kind.example_losses(logits, part) * w).sum()

            losses.append(loss)
            chunk_weights.append(1.0)
        o, start = self.options, self._coarse_start()
        adapted = local_adapt(
            losses[0],
            start,
            steps=o.steps,
            lr=o.adapt_lr,
            l2=o.l2,
            momentum=o.momentum,
            gradient=summed_gradient(losses, chunk_weights, self.trainer.inner_loss_scale),
            pull=scope.pull(start, o.l2),
        )
        self.counts.coarse_adaptations += 1
        return {k: v.detach() for k, v in adapted.items()}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores for one batch (a test set of one batch)."""
        return self.predict_set([batch])[0]

    # -- bookkeeping ------------------------------------------------------------------------
    def report(self) -> dict[str, float]:
        """Examples in memory, write rate, meta-replays and coarse adaptations."""
        return {
            **self.writer.report(),
            "meta_replays": self.replay.schedule.replays,
            "coarse_adaptations": self.counts.coarse_adaptations,
        }
