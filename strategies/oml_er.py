"""OML-ER (Holla et al., 2020): online-aware meta-learning with sparse experience replay.

The model is a representation network (the encoder, RLN) and a prediction network (the linear
head, PLN). The stream is cut into episodes (see `lifelong.episodes`): m = 5 support batches of
b = 16 and a query, the next stream batch or, every R_F episodes, a replay batch of ⌊r·R_I⌋
memory examples (R_I = 9,600, r = 0.01). Inner loop: one functional SGD step (lr α) on the head
per support batch, the encoder fixed. Outer loop: Adam on encoder + head with the query loss's
gradient at the adapted head (first-order). Every stream example is written to memory after its
episode (p_write = 1). Meta-test: once per test set, the head is fine-tuned on m random memory
batches of b, and the whole test set is predicted with that head.

The last, incomplete episode of a task is trained on when evaluation starts (its last batch as
the query), so every evaluation sees a model that has learnt from every example so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from lifelong.adaptation import Params
from lifelong.encoders.base import EncoderOutput
from lifelong.episodes import Episode, EpisodeBuffer, adapt_head, head_scores
from lifelong.model import Batch
from lifelong.options import NonNegativeFloat, PositiveFloat, PositiveInt, option_group
from lifelong.replay import ClipOptions, ReplayOptions, SparseReplay, WriteOptions
from lifelong.state import Components, Counters, delegated
from lifelong.strategy import StrategyContext
from lifelong.training import Trainer, evaluating


@option_group
class OMLEROptions(ReplayOptions, WriteOptions, ClipOptions):
    """OML-ER's options; defaults are the paper's text-classification setting (§4, App. A)."""

    replay_every: PositiveInt = 9_600  # R_I: stream examples per replay (Holla et al.: 9,600)
    support_batches: PositiveInt = 5  # m: support mini-batches per episode
    inner_lr: PositiveFloat = 1e-3  # α: SGD step size of the inner loop (and of the meta-test)
    meta_test: bool = True  # fine-tune the head on m memory batches once per test set
    outer_lr: NonNegativeFloat = 0.0  # β of the outer Adam; 0 = the run's learning rate


class OMLER:
    """FOMAML episodes with a head-only inner loop and sparse replay queries.

    Args:
        context: Model, task kind, learning rate (β of the outer Adam) and batch size (b).
        options: m, α, R_I, r, p_write and the meta-test switch.

    """

    name: ClassVar[str] = "oml-er"
    description: ClassVar[str] = "OML + experience replay: FOMAML episodes, inner SGD on the head"
    Options = OMLEROptions

    def __init__(self, context: StrategyContext, options: OMLEROptions | None = None) -> None:
        self.options = options = options or self.Options()
        self.model = context.model
        self.batch_size = context.batch_size
        self.replay = SparseReplay(context, options, options.write_prob)
        self.net = self._build_net(context)
        trainable = [p for p in self.net.parameters() if p.requires_grad]
        outer = torch.optim.Adam(trainable, lr=options.outer_lr or context.lr)
        self.trainer = Trainer(self.net, context.lr, options.max_grad_norm, optimizer=outer)
        self.buffer = EpisodeBuffer(
            options.support_batches,
            self.replay.schedule.episodes_between_replays(
                context.batch_size, options.support_batches
            ),
        )
        self.counts = Counters(meta_tests=0)
        self.rng = np.random.default_rng(context.seed + 1)  # meta-test memory batches
        self.parts = Components(
            trainer=self.trainer,
            replay=self.replay,
            episodes=self.buffer,
            counts=self.counts,
            rng=self.rng,
        )

    # -- what ANML-ER changes -----------------------------------------------------------------
    head_prefix: ClassVar[str] = "head."  # where the head's parameters sit in `net`

    def _build_net(self, context: StrategyContext) -> nn.Module:
        """The module trained by the outer loop (here: the classifier itself)."""
        return context.model

    @property
    def head(self) -> nn.Module:
        """The prediction head fine-tuned at meta-test."""
        return self.model.head

    def features(self, batch: Batch) -> EncoderOutput:
        """What the head reads (the encoder's output), without gradient."""
        with torch.no_grad():
            return self.model.encoder(batch.input_ids, batch.attention_mask).detach()

    def inner_loop(self, support: Sequence[Batch]) -> Params:
        """Head weights after one SGD step per support batch (encoder fixed), named in `net`."""
        params = dict(self.head.named_parameters())
        batches = [(self.features(b), b) for b in support]
        lr, criterion = self.options.inner_lr, self.model.criterion
        adapted = adapt_head(self.head, params, batches, lr, criterion)
        return {self.head_prefix + k: v for k, v in adapted.items()}

    def logits(self, params: Params, batch: Batch) -> torch.Tensor:
        """Row scores of `net` with ``params`` swapped in."""
        return functional_call(self.net, params, (batch.input_ids, batch.attention_mask))

    # -- the learner's interface ---------------------------------------------------------------
    def observe(self, batch: Batch) -> dict[str, float]:
        """Buffer the batch; when it completes an episode, take one meta-update."""
        episode = self.buffer.add(batch)
        return self.learn(episode) if episode is not None else {}

    def learn(self, episode: Episode) -> dict[str, float]:
        """Inner loop on the support set, one outer Adam step on the query loss, then write."""
        memory = self.replay.memory
        if episode.replay and not len(memory):  # nothing stored yet to replay:
            episode = Episode(episode.support[:-1], episode.support[-1])  # last batch = query
        query = episode.query
        if episode.replay:  # ⌊r·R_I⌋ memory examples, every one with all its rows
            query = self.replay.writer.batch(self.replay.sample())
        self.net.train()
        adapted = self.inner_loop(episode.support)
        loss = self.model.criterion(self.logits(adapted, query), query)
        self.trainer.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # first-order: d adapted / d W = I, so W receives the gradient at W'
        self.trainer.apply()
        for stream_batch in episode.stream_batches:
            self.replay.write(stream_batch)
        return {"loss": float(loss.detach())}

    def on_eval_start(self) -> None:
        """Train on the incomplete episode still buffered, so evaluation sees every example."""
        episode = self.buffer.flush()
        if episode is not None:
            self.learn(episode)

    def predict_set(self, batches: Sequence[Batch]) -> list[torch.Tensor]:
        """Meta-test once for the whole test set, then predict every batch with that head."""
        with evaluating(self.net):
            params = {k: v.detach() for k, v in self.head.named_parameters()}
            if self.options.meta_test and len(self.replay.memory):
                params = self.meta_test(params)
            return [head_scores(self.head, params, self.features, b) for b in batches]

    def meta_test(self, params: Params) -> Params:
        """The head after one SGD step on each of m random memory batches of b examples."""
        m, b = self.options.support_batches, self.batch_size
        size = len(self.replay.memory)  # its own generator: evaluation leaves training alone
        slots = np.sort(self.rng.choice(size, size=min(m * b, size), replace=False))
        memory_batches = [
            self.replay.writer.batch(slots[i : i + b]) for i in range(0, len(slots), b)
        ]
        batches = [(self.features(mb), mb) for mb in memory_batches]
        self.counts.meta_tests += 1
        lr, criterion = self.options.inner_lr, self.model.criterion
        return {
            k: v.detach() for k, v in adapt_head(self.head, params, batches, lr, criterion).items()
        }

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores for one batch (a test set of one batch)."""
        return self.predict_set([batch])[0]

    def report(self) -> dict[str, float]:
        """Episodes, replay episodes, meta-tests, examples in memory and write rate."""
        return {
            **self.replay.writer.report(),
            "episodes": self.buffer.episodes,
            "replay_episodes": self.replay.schedule.replays,
            "meta_tests": self.counts.meta_tests,
        }

    state_dict = delegated("state_dict")  # weights, optimiser, memory, counters, generators
    load_state_dict = delegated("load_state_dict")
