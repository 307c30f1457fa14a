"""Meta-learning episodes over a stream, as in OML-ER and ANML-ER (Holla et al., 2020).

The stream arrives in mini-batches of b examples. An episode is m support batches and a query:
normally the next stream batch; every R_F-th episode instead a replay batch of ⌊r·R_I⌋ examples
drawn from episodic memory, where R_F = ⌈(R_I / b + 1) / (m + 1)⌉
(`ReplaySchedule.episodes_between_replays`), so that replay happens about once every R_I stream
examples (R_I = 9,600, r = 0.01, b = 16, m = 5 for text classification: a 96-example replay
query every 101 episodes). The inner loop
adapts a part of the network with one SGD step per support batch; the outer loop updates the
whole network on the query loss at the adapted weights (first-order: FOMAML).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from lifelong.batch import Batch
from lifelong.encoders.base import EncoderOutput
from lifelong.mechanisms.inner_loop import Params, local_adapt
from lifelong.mechanisms.replay import (
    ClipOptions,
    ReplayLossOptions,
    ReplayOptions,
    ReplaySchedule,
    SparseReplay,
    WriteOptions,
)
from lifelong.options import (
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    StandsFor,
    option_group,
)
from lifelong.runtime import eager_call
from lifelong.state import Counters

if TYPE_CHECKING:
    from lifelong.strategy import StrategyContext
    from lifelong.training import Trainer

Criterion = Callable[[torch.Tensor, Batch], torch.Tensor]
"""A task's loss from logits and the batch they were computed on."""


@option_group
class MetaReplayOptions(ReplayOptions, ReplayLossOptions, WriteOptions, ClipOptions):
    """What OML-ER, ANML-ER and MAML-ER share: episodes, replay queries, the outer update.

    Defaults are the papers' text-classification setting where they give one (Holla et al.,
    2020, §4 and App. A), else their code's (Nithin-Holla/MetaLifelongLanguage: the flags of
    ``train_text_cls.py`` named in the comments, ``models/cls_oml.py``, ``cls_anml.py``,
    ``cls_maml.py``): the replay query's loss is the sum of its mini-batches' mean losses,
    nothing is clipped, and BERT meta-trains without dropout.
    """

    replay_every: PositiveInt = 9_600  # R_I: stream examples per replay (--replay_every 9600)
    # r = 0.01 (--replay_rate 0.01) and p_write = 1 (--write_prob 1.0) are the groups' defaults
    support_batches: PositiveInt = 5  # m: support mini-batches per episode (--updates 5)
    inner_lr: PositiveFloat = 1e-3  # α: inner-loop and meta-test SGD step (--inner_lr 0.001)
    meta_test: bool = True  # adapt on m memory batches before predicting (each strategy's part)
    # β of the outer Adam (--meta_lr 3e-5); 0 = the run's lr
    outer_lr: Annotated[NonNegativeFloat, StandsFor("lr", 0.0)] = 0.0
    replay_mode: Literal["mean", "sum_batches"] = "sum_batches"  # cls_*.py sum query grads
    max_grad_norm: NonNegativeFloat = 0.0  # outer-update clip; 0 = none (cls_*.py never clip)
    # dropout while meta-training: Holla never calls .train() on BERT (transformers 3.0.2's
    # from_pretrained leaves it in eval mode), so cls_*.py meta-train without it
    dropout: bool = False


@dataclass
class Episode:
    """One episode: support batches from the stream and a query.

    Attributes:
        support: The m support batches (fewer when a partial episode is flushed).
        query: The query stream batch; ``None`` in a replay episode (the query comes from memory).
        replay: Whether this is a replay episode.

    """

    support: list[Batch]
    query: Batch | None
    replay: bool = False

    @property
    def stream_batches(self) -> list[Batch]:
        """The stream batches the episode consumed (to write to memory afterwards)."""
        return self.support + ([self.query] if self.query is not None else [])


@dataclass
class EpisodeBuffer:
    """Cuts a stream of mini-batches into episodes.

    Episode e (counting from 1) is a replay episode when e is a multiple of R_F: it takes m
    stream batches as support and queries memory; any other episode takes m + 1 stream
    batches, the last one as query.

    Attributes:
        support_batches: m.
        replay_every_episodes: R_F (0 = never replay).
        episodes: Episodes emitted so far.
        pending: Stream batches not yet in an episode.
        device: Where pending batches restored from a checkpoint go (the run's device; a
            checkpoint loads on the CPU).

    """

    support_batches: int
    replay_every_episodes: int
    episodes: int = 0
    pending: list[Batch] = field(default_factory=list)
    device: torch.device | None = None  # where restored pending batches go (the run's)

    def next_is_replay(self) -> bool:
        """Whether the episode being filled will query memory."""
        r = self.replay_every_episodes
        return r > 0 and (self.episodes + 1) % r == 0

    def add(self, batch: Batch) -> Episode | None:
        """Take one stream batch; return the episode it completes, if any."""
        self.pending.append(batch)
        replay = self.next_is_replay()
        if len(self.pending) < self.support_batches + (0 if replay else 1):
            return None
        return self._emit(replay)

    def flush(self) -> Episode | None:
        """The partial episode of the batches still pending (last one as query), if any."""
        if not self.pending:
            return None
        return self._emit(replay=False)

    def state_dict(self) -> dict[str, object]:
        """Episodes emitted and the batches still pending."""
        return {"episodes": self.episodes, "pending": list(self.pending)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore what `state_dict` returned."""
        self.episodes = int(state["episodes"])  # type: ignore[arg-type]
        pending: list[Batch] = list(state["pending"])  # type: ignore[arg-type]
        self.pending = [b.to(self.device) for b in pending] if self.device else pending

    def _emit(self, replay: bool) -> Episode:
        batches, self.pending = self.pending, []
        self.episodes += 1
        if replay:
            return Episode(batches, None, replay=True)
        return Episode(batches[:-1], batches[-1])


def adapt_head(
    head: nn.Module,
    params: Params,
    batches: Sequence[tuple[EncoderOutput, Batch]],
    lr: float,
    criterion: Criterion,
    loss_scale: float = 1.0,
) -> Params:
    """One SGD step on the head per (encoder output, batch) pair, in order.

    First-order (the inner gradients are constants), pure: ``head`` and ``params`` are not
    modified; the result stays differentiable with respect to ``params`` with identity
    Jacobian, so a query loss at the adapted head back-propagates FOMAML's gradient to W.

    Args:
        head: The head (its parameters are only read).
        params: Its starting weights.
        batches: The encoder's output on each support batch, with the batch (labels, groups).
        lr: α, the inner SGD step.
        criterion: The task's loss from logits and their batch.
        loss_scale: The static loss scale of the steps (`local_adapt`; fp16's, or 1).

    """
    for encoded, batch in batches:

        def loss(q: Params, encoded: EncoderOutput = encoded, batch: Batch = batch):
            return criterion(functional_call(head, q, (encoded,)), batch)

        params = local_adapt(
            loss, params, steps=1, lr=lr, l2=0.0, first_order=True, loss_scale=loss_scale
        )
    return params


def adapt_per_batch(
    module: nn.Module,
    params: Params,
    batches: Sequence[Batch],
    lr: float,
    criterion: Criterion,
    *,
    first_order: bool = True,
    loss_scale: float = 1.0,
) -> Params:
    """One SGD step on ``params`` of ``module`` per batch, in order (a meta inner loop).

    ``module`` is run on each batch's inputs with ``params`` swapped in (the others its own);
    pure like `local_adapt`. First order: the inner gradients are constants; otherwise the
    result stays differentiable through them (second-order MAML). ``loss_scale`` as in
    `local_adapt`.
    """
    for batch in batches:

        def loss(q: Params, batch: Batch = batch) -> torch.Tensor:
            return criterion(eager_call(module, q, batch.inputs()), batch)

        params = local_adapt(
            loss, params, steps=1, lr=lr, l2=0.0, first_order=first_order, loss_scale=loss_scale
        )
    return params


def meta_test_slots(
    rng: np.random.Generator, memory_size: int, batches: int, batch_size: int
) -> np.ndarray:
    """Slots of the meta-test's memory batches, shape (m, b), each drawn uniformly with replacement.

    Holla et al.'s ``evaluate()`` (``cls_oml.py``, ``cls_anml.py``, ``cls_maml.py``) calls
    ``memory.read_batch(b)`` m times, each read ``random.choice(buffer)`` per example
    (``base_models.py``), so examples can recur within and across batches. Pass the strategy's
    own generator: evaluation then leaves training's randomness alone.
    """
    return rng.integers(0, memory_size, size=(batches, batch_size))  # (m, b)


class MetaReplay(NamedTuple):
    """What OML-ER, ANML-ER and MAML-ER share: sparse replay cut into episodes, and meta-tests.

    A strategy unpacks the parts it uses into its own names (``self.replay, self.buffer,
    self.counts = self.meta[:3]``) and asks it for the outer trainer, the meta-test's memory
    batches and the report.

    Attributes:
        replay: Sparse replay over every written example (unkeyed: drawn uniformly).
        buffer: Cuts the stream into episodes, every R_F-th a replay episode.
        counts: ``meta_tests`` so far.
        rng: The meta-test's own generator (seed + 1), so evaluation leaves training's alone.
        support_batches: m, the batches of an episode's support set and of a meta-test.
        batch_size: b, examples per batch.

    """

    replay: SparseReplay
    buffer: EpisodeBuffer
    counts: Counters
    rng: np.random.Generator
    support_batches: int
    batch_size: int

    @classmethod
    def build(cls, context: StrategyContext, options: MetaReplayOptions) -> MetaReplay:
        """The parts for ``context``: replay (R_I, r, p_write, its loss), m and b."""
        m, b = options.support_batches, context.batch_size
        replay = SparseReplay(
            context,
            ReplaySchedule.from_options(options),
            chunk=options.replay_chunk,
            mode=options.replay_mode,
            grad_norm=options.max_grad_norm,
            write_prob=options.write_prob,
            keyed=False,  # replay queries are uniform samples: no keys
        )
        between = replay.schedule.episodes_between_replays(b, m)
        buffer = EpisodeBuffer(m, between, device=context.runtime.device)
        rng = np.random.default_rng(context.seed + 1)  # meta-test memory batches only
        return cls(replay, buffer, Counters(meta_tests=0), rng, m, b)

    @staticmethod
    def outer_trainer(
        context: StrategyContext, options: MetaReplayOptions, net: nn.Module | None = None
    ) -> Trainer:
        """The outer loop's trainer: Adam at β over ``net``'s trainable weights.

        β is ``options.outer_lr``, or the run's learning rate when it is 0. Holla et al.'s
        ``cls_oml.py``, ``cls_anml.py`` and ``cls_maml.py`` build AdamW with weight decay 0,
        i.e. Adam. ``net`` defaults to the context's model (ANML-ER passes its own, with the
        neuromodulator); ``options.max_grad_norm`` clips the outer update.
        """
        net = context.model if net is None else net
        trainable = [p for p in net.parameters() if p.requires_grad]
        outer = torch.optim.Adam(trainable, lr=options.outer_lr or context.lr)
        return context.build_trainer(options.max_grad_norm, model=net, optimizer=outer)

    def resumable(self) -> dict[str, Any]:
        """Its parts by their checkpoint keys (`lifelong.state.ResumableParts`)."""
        return {
            "replay": self.replay,
            "episodes": self.buffer,
            "counts": self.counts,
            "rng": self.rng,
        }

    def usable(self, episode: Episode) -> Episode:
        """``episode``, or, for a replay episode while memory is empty, its last batch as query."""
        if episode.replay and not len(self.replay.memory):  # nothing stored yet to replay
            return Episode(episode.support[:-1], episode.support[-1])
        return episode

    def memory_support(self) -> list[Batch]:
        """The meta-test's m memory batches of b examples; counts one meta-test.

        As Holla et al.'s ``evaluate()`` (``cls_oml.py``, ``cls_anml.py``, ``cls_maml.py``):
        every example drawn uniformly with replacement (`meta_test_slots`).
        """
        self.counts.meta_tests += 1
        m, b = self.support_batches, self.batch_size
        slots = meta_test_slots(self.rng, len(self.replay.memory), m, b)  # (m, b)
        return [self.replay.writer.batch(row) for row in slots]

    def report(self) -> dict[str, float]:
        """Episodes, replay episodes, meta-tests, examples in memory and write rate."""
        return {
            **self.replay.writer.report(),
            "episodes": self.buffer.episodes,
            "replay_episodes": self.replay.schedule.replays,
            "meta_tests": self.counts.meta_tests,
        }
