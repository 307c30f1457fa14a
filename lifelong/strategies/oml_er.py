"""OML-ER (Holla et al., 2020): online-aware meta-learning with sparse experience replay.

The model is a representation network (the encoder, RLN) and a prediction network (the linear
head, PLN). The stream is cut into episodes (see `lifelong.mechanisms.episodes`): m = 5 support
batches of b = 16 and a query, the next stream batch or, every R_F episodes, a replay batch of
⌊r·R_I⌋ memory examples (R_I = 9,600, r = 0.01). Inner loop: one functional SGD step (lr α) on the
head per support batch, the encoder fixed. Outer loop: Adam on encoder + head with the query loss's
gradient at the adapted head (first-order). Every stream example is written to memory after its
episode (p_write = 1). Meta-test: once per test set, the inner loop is run on m memory batches
of b, every example drawn uniformly with replacement, as Holla's ``cls_oml.py`` ``evaluate()``
does with ``memory.read_batch``; the whole test set is predicted with the adapted weights
(OML-ER: the head).

Evaluation never changes training: an incomplete episode stays buffered across an evaluation (and
across task boundaries) until it fills, as in Holla's code, which never trains on an incomplete
episode; the meta-test draws from its own generator and adapts a functional copy of the weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import torch
from torch import nn

from lifelong import cost
from lifelong.batch import Batch
from lifelong.encoders.base import EncoderOutput
from lifelong.mechanisms.episodes import Episode, MetaReplay, MetaReplayOptions, adapt_head
from lifelong.mechanisms.inner_loop import Params
from lifelong.options import option_group
from lifelong.runtime import eager_call
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.streams.core import Example
from lifelong.training import evaluating


@option_group
class OMLEROptions(MetaReplayOptions):
    """OML-ER's options: the meta strategies' (`MetaReplayOptions`) and when to meta-test.

    Its meta-test fine-tunes the head on m memory batches before predicting.
    """

    # how often: "evaluation" (once, for every test set: Holla's FewRel, rel_oml.py testing()
    # on the pooled val set, train_rel.py), "test_set" (once per test set: Holla's text
    # classification, cls_oml.py), "auto" (evaluation on relation extraction, else test_set)
    meta_test_scope: Literal["auto", "evaluation", "test_set"] = "auto"


class OMLER(StrategyHooks):
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
        self.kind_name = context.kind.name
        self._evaluation_params: Params | None = None  # this evaluation's meta-test, if one
        self.meta = MetaReplay.build(context, options)
        self.replay, self.buffer, self.counts = self.meta[:3]
        self.net = self._build_net(context)
        self.trainer = self.meta.outer_trainer(context, options, self.net)  # Adam (cls_oml.py)
        self.resumable = ResumableParts(trainer=self.trainer, **self.meta.resumable())

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
            return self.model.encoder(*batch.inputs()).detach()

    def inner_loop(self, support: Sequence[Batch]) -> Params:
        """Head weights after one SGD step per support batch (encoder fixed), named in `net`."""
        params = dict(self.head.named_parameters())
        batches = [(self.features(b), b) for b in support]
        lr, criterion = self.options.inner_lr, self.model.criterion
        adapted = adapt_head(
            self.head, params, batches, lr, criterion, self.trainer.inner_loss_scale
        )
        return {self.head_prefix + k: v for k, v in adapted.items()}

    def logits(self, params: Params, batch: Batch) -> torch.Tensor:
        """Row scores of `net` with ``params`` swapped in."""
        return eager_call(self.net, params, batch.inputs())

    # -- the learner's interface ---------------------------------------------------------------
    def observe(self, batch: Batch) -> dict[str, float]:
        """Buffer the batch; when it completes an episode, take one meta-update."""
        episode = self.buffer.add(batch)
        return self.learn(episode) if episode is not None else {}

    def learn(self, episode: Episode) -> dict[str, float]:
        """Inner loop on the support set, one outer Adam step on the query loss, then write."""
        episode = self.meta.usable(episode)
        query, scale = episode.query, 1.0
        if episode.replay:  # ⌊r·R_I⌋ memory examples, every one with all its rows
            slots = self.replay.sample()
            query, scale = self.replay.writer.batch(slots), self.replay.loss_scale(len(slots))
        self.net.train(self.options.dropout)
        adapted = self.inner_loop(episode.support)
        loss = self.model.criterion(self.logits(adapted, query), query)
        self.trainer.optimizer.zero_grad(set_to_none=True)
        # first-order: d adapted / d W = I: W gets the gradient at W'
        self.trainer.backward(loss * scale)
        self.trainer.apply()
        for stream_batch in episode.stream_batches:
            self.replay.write(stream_batch)
        return {"loss": float(loss.detach())}

    def on_eval_start(self) -> None:
        """An evaluation begins: no meta-tested weights yet."""
        self._evaluation_params = None

    def on_eval_sets(self, sets: Sequence[Sequence[Example]]) -> None:
        """Meta-test once for the whole evaluation where the scope says so.

        On FewRel Holla et al. adapt once before scoring the pooled test set of every
        cluster (`OMLEROptions.meta_test_scope`).
        """
        if self._scope() == "evaluation":
            self._evaluation_params = self._meta_tested()

    def on_eval_end(self) -> None:
        """The evaluation is over: its meta-tested weights are dropped (never saved)."""
        self._evaluation_params = None

    def _scope(self) -> str:
        scope = self.options.meta_test_scope
        if scope == "auto":
            return "evaluation" if self.kind_name == "relation" else "test_set"
        return scope

    def _meta_tested(self) -> Params:
        with evaluating(self.net):
            if self.options.meta_test and len(self.replay.memory):
                with cost.phase("adapt"):
                    return self.meta_test()
        return {}  # nothing swapped in: the trained weights

    def predict_set(self, batches: Sequence[Batch]) -> list[torch.Tensor]:
        """Predict a test set with the meta-tested weights: this evaluation's, or its own."""
        params = self._evaluation_params
        if params is None:
            params = self._meta_tested()
        with evaluating(self.net), torch.no_grad():
            return [self.logits(params, b) for b in batches]

    def meta_test(self) -> Params:
        """The inner loop's weights after one SGD step on each of m random memory batches."""
        return {k: v.detach() for k, v in self.inner_loop(self.meta.memory_support()).items()}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores for one batch (a test set of one batch)."""
        return self.predict_set([batch])[0]

    def report(self) -> dict[str, float]:
        """Episodes, replay episodes, meta-tests, examples in memory and write rate."""
        return self.meta.report()
