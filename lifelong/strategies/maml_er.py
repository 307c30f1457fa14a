"""MAML-ER (Holla et al., 2020): MAML over the whole network with sparse experience replay.

The ablation of OML-ER in which nothing is held fixed in the inner loop. Episodes and replay are
OML-ER's (see `lifelong.mechanisms.episodes`): m = 5 support batches of b = 16 and a query, the next
stream batch or, every R_F episodes, a replay batch of ⌊r·R_I⌋ memory examples (R_I = 9,600, r =
0.01). Inner loop: one functional SGD step (lr α) on *all* trainable weights, encoder and head, per
support batch; the module's own weights are never modified. Outer loop: Adam on all weights with
the query loss's gradient at the adapted weights: first-order by default (FOMAML, as the reference
code, MetaLifelongLanguage ``models/cls_maml.py``, which runs `higher` with
``track_higher_grads=False``), or second-order (back through the inner steps) with
``first_order=False``. Every stream example is written to memory after its episode
(p_write = 1); the reference does not clip gradients, so neither do we by default.

Meta-test, as ``cls_maml.py``'s ``evaluate()``: once per test set, the whole network takes one
SGD step (lr α) on each of m memory batches of b examples drawn uniformly *with* replacement
(``ReplayMemory.read_batch``), and the whole test set is predicted with those weights. It works on
a functional copy of the weights with its own generator, so evaluating changes neither the
trained model nor its optimiser, and nothing that training later depends on.

An incomplete episode stays buffered across evaluations and task boundaries (the stream has no
task identifiers); it is not trained on when evaluation starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import ClassVar

import torch

from lifelong import cost
from lifelong.batch import Batch
from lifelong.encoders.base import attention_implementation
from lifelong.mechanisms.episodes import Episode, MetaReplay, MetaReplayOptions, adapt_per_batch
from lifelong.mechanisms.inner_loop import Params
from lifelong.options import option_group
from lifelong.runtime import eager_call
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.training import evaluating


@option_group
class MAMLEROptions(MetaReplayOptions):
    """MAML-ER's options: the meta strategies' (`MetaReplayOptions`) and the gradient's order.

    Its meta-test adapts the whole network on m memory batches once per test set.
    """

    first_order: bool = True  # FOMAML (cls_maml.py: track_higher_grads=False); False = 2nd order


class MAMLER(StrategyHooks):
    """MAML episodes over the whole network, with sparse replay queries.

    Args:
        context: Model, task kind, learning rate (β of the outer Adam) and batch size (b).
        options: m, α, R_I, r, p_write, first/second order and the meta-test switch.

    """

    name: ClassVar[str] = "maml-er"
    description: ClassVar[str] = "MAML + experience replay: episodes, inner SGD on the whole net"
    Options = MAMLEROptions

    def __init__(self, context: StrategyContext, options: MAMLEROptions | None = None) -> None:
        self.options = options = options or self.Options()
        self.model = context.model
        self.meta = MetaReplay.build(context, options)
        self.replay, self.buffer, self.counts = self.meta[:3]
        self.trainer = self.meta.outer_trainer(context, options)  # Adam over W (cls_maml.py)
        self.resumable = ResumableParts(trainer=self.trainer, **self.meta.resumable())

    # -- the inner loop ---------------------------------------------------------------------------
    def weights(self) -> Params:
        """The trainable weights W (encoder and head), live: the ones the outer loop updates."""
        return {k: p for k, p in self.model.named_parameters() if p.requires_grad}

    def adapt(self, params: Params, batches: Sequence[Batch], *, first_order: bool) -> Params:
        """One SGD step (lr α) on ``params`` per batch, in order; pure (nothing is modified).

        With ``first_order`` the inner gradients are constants; otherwise the result stays
        differentiable through them with respect to ``params`` (second-order MAML).
        """
        lr, criterion = self.options.inner_lr, self.model.criterion
        return adapt_per_batch(
            self.model,
            params,
            batches,
            lr,
            criterion,
            first_order=first_order,
            loss_scale=self.trainer.inner_loss_scale,
        )

    def inner_loop(self, support: Sequence[Batch]) -> Params:
        """W' after one SGD step per support batch on every trainable weight.

        First-order: computed from detached weights (no graph to W is needed, since
        d W' / d W is taken as the identity). Second-order: differentiable with respect to W.
        """
        first = self.options.first_order
        params = {k: p.detach() if first else p for k, p in self.weights().items()}
        return self.adapt(params, support, first_order=first)

    # -- the learner's interface ------------------------------------------------------------------
    def observe(self, batch: Batch) -> dict[str, float]:
        """Buffer the batch; when it completes an episode, take one meta-update."""
        episode = self.buffer.add(batch)
        return self.learn(episode) if episode is not None else {}

    def learn(self, episode: Episode) -> dict[str, float]:
        """Inner loop on the support set, one outer Adam step on the query loss, then write."""
        episode = self.meta.usable(episode)
        scale = 1.0
        if episode.replay:  # ⌊r·R_I⌋ memory examples, in chunks of replay_chunk examples
            slots = self.replay.sample()
            query, scale = self.replay.replay_batches(slots), self.replay.loss_scale(len(slots))
        else:
            query = [episode.query]
        self.model.train(self.options.dropout)
        with self._double_backward():
            adapted = self.inner_loop(episode.support)
            loss = self.outer_gradient(adapted, query, scale)
        self.trainer.apply()
        for stream_batch in episode.stream_batches:
            self.replay.write(stream_batch)
        return {"loss": loss}

    def outer_gradient(self, adapted: Params, query: Sequence[Batch], scale: float = 1.0) -> float:
        """Put d (scale · L_query(W')) / d W into the weights' ``.grad``; return the query loss.

        The query's chunks are weighted by their share of the loss's units, so the gradient is
        that of one batch holding them all (times ``scale``: a replay query's mini-batches). The
        gradient at W' is computed on detached copies, one chunk's graph at a time, then carried
        to W: as is (first order) or back through the inner steps as one vector–Jacobian
        product (second order).
        """
        self.trainer.optimizer.zero_grad(set_to_none=True)
        at = {k: v.detach().requires_grad_() for k, v in adapted.items()}
        sizes = [self.model.loss_units(chunk) for chunk in query]
        total, loss_sum = sum(sizes), 0.0
        for chunk, size in zip(query, sizes):
            logits = eager_call(self.model, at, chunk.inputs())
            loss = self.model.criterion(logits, chunk) * (size / total)
            self.trainer.backward(loss * scale)  # fp16: scaled, unscaled in `Trainer.apply`
            loss_sum += float(loss.detach())
        grads = {k: v.grad for k, v in at.items() if v.grad is not None}
        if self.options.first_order:  # FOMAML: the gradient at W' is W's
            weights = self.weights()
            for k, g in grads.items():
                weights[k].grad = g
        elif grads:
            torch.autograd.backward([adapted[k] for k in grads], [grads[k] for k in grads])
        return loss_sum

    def _double_backward(self) -> contextlib.AbstractContextManager[None]:
        # Second order differentiates the encoder's backward pass, and the CPU SDPA kernel has
        # no double backward: use the eager attention kernel then, and only then.
        if self.options.first_order:
            return contextlib.nullcontext()
        return attention_implementation(self.model.encoder, "eager")

    def predict_set(self, batches: Sequence[Batch]) -> list[torch.Tensor]:
        """Meta-test once for the whole test set, then predict every batch with those weights."""
        with evaluating(self.model):
            params = {k: v.detach() for k, v in self.weights().items()}
            if self.options.meta_test and len(self.replay.memory):
                with cost.phase("adapt"):
                    params = self.meta_test(params)
            with torch.no_grad():
                return [eager_call(self.model, params, b.inputs()) for b in batches]

    def meta_test(self, params: Params) -> Params:
        """The weights after one SGD step on each of m memory batches of b examples.

        As ``cls_maml.py``'s ``evaluate()``: every example is drawn uniformly with replacement
        (``ReplayMemory.read_batch``), with this strategy's own generator, so evaluation leaves
        training's randomness (memory sampling, dropout) alone.
        """
        adapted = self.adapt(params, self.meta.memory_support(), first_order=True)
        return {k: v.detach() for k, v in adapted.items()}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores for one batch (a test set of one batch)."""
        return self.predict_set([batch])[0]

    def report(self) -> dict[str, float]:
        """Episodes, replay episodes, meta-tests, examples in memory and write rate."""
        return self.meta.report()
