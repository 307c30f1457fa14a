"""`higher` as an oracle: our ``torch.func`` inner loops give `higher`'s numbers.

`higher` (facebookresearch/higher 0.2.1, unmaintained) is what the reference implementations
ran MAML with (MetaLifelongLanguage ``models/cls_maml.py``), and EM-in-LLL's local adaptation
is a plain ``torch.optim.SGD`` loop. `lifelong` writes these inner loops once, as the pure
function `lifelong.mechanisms.inner_loop.local_adapt` over ``torch.func.grad``. These tests run a
tiny
random BERT classifier through both and ask for the same numbers to 1e-5, in float32:

* local adaptation (MbPA++): the weights `local_adapt` returns for a test example's retrieved
  neighbours, for every parameter of the scope (``all``, ``head``), and `LocalAdapter`'s adapted
  logits on both paths (``reference``, ``fast``), against a ``higher.innerloop_ctx`` loop of
  ``torch.optim.SGD(lr, momentum)`` steps on ``CE + λ Σ ||W~ − W||²``;
* meta-gradients, MAML-ER: d L_query(W') / d W from `MAMLER.inner_loop` and
  `MAMLER.outer_gradient`, against ``higher`` with ``copy_initial_weights=False``: second order
  with ``track_higher_grads=True``; first order (FOMAML) as ``cls_maml.py`` takes it, with
  ``track_higher_grads=False`` and the query loss's gradient at the fast weights;
* meta-gradients, Meta-MbPA: the gradient of `MetaMbPA.meta_loss` (one `local_adapt` step on
  the neighbours, first or second order), likewise.

`higher` 0.2.1 needs no workaround under torch 2.13 here. Second order goes through the
encoder's backward pass, which the CPU SDPA kernel cannot differentiate: the strategies switch
to eager attention for it, and the `higher` runs do the same (`attention_implementation`).
"""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call
from torch.nn import functional as F

from lifelong import registry
from lifelong.encoders.base import attention_implementation
from lifelong.mechanisms.adaptation import AdaptationOptions, LocalAdapter
from lifelong.mechanisms.inner_loop import local_adapt
from lifelong.mechanisms.replay import episodic_writer
from lifelong.strategy import StrategyContext
from tests.conftest import classification, tiny_classifier, toy_stream

higher = pytest.importorskip("higher")

ATOL = 1e-5
# λ large enough that the pull moves the weights measurably in 3 steps; momentum as EM-in-LLL
LOCAL = {"k": 4, "steps": 3, "adapt_lr": 0.05, "l2": 0.5, "momentum": 0.9}


def close(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        torch.testing.assert_close(ours[name], value, atol=ATOL, rtol=0, msg=name)


def stream_batches(kind, n: int, task: int = 0, size: int = 4):
    train = toy_stream(n_train=n * size).tasks[task].train
    return [kind(list(train[i : i + size])) for i in range(0, len(train), size)]


# -- local adaptation ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def memory(tokenizer):
    kind = classification(tokenizer)
    model = tiny_classifier(kind=kind).eval()  # no dropout: the same function in every pass
    writer = episodic_writer(StrategyContext(model, kind))
    stream = toy_stream(n_train=16)
    for task in stream:
        writer.write(kind(list(task.train)))
    test = kind([stream.tasks[0].test[0], stream.tasks[1].test[3]])
    return model, writer, test


def higher_local_adapt(model, names, neighbours, test, options):
    """EM-in-LLL's loop under `higher`: SGD(lr, momentum) on CE + λ Σ ||W~ − W||² over ``names``.

    Returns the adapted weights ``names`` and the test rows' logits under them.
    """
    every = [n for n, _ in model.named_parameters()]
    weights = [p for n, p in model.named_parameters() if n in names]
    anchor = {n: p.detach().clone() for n, p in model.named_parameters() if n in names}
    sgd = torch.optim.SGD(weights, lr=options.adapt_lr, momentum=options.momentum)
    with higher.innerloop_ctx(model, sgd, copy_initial_weights=True) as (fmodel, diffopt):
        for _ in range(options.steps):
            fast = dict(zip(every, fmodel.parameters(), strict=True))
            pull = sum(((fast[n] - w) ** 2).sum() for n, w in anchor.items())
            loss = F.cross_entropy(fmodel(*neighbours.inputs()), neighbours.labels)
            diffopt.step(loss + options.l2 * pull)
        fast = dict(zip(every, fmodel.parameters(), strict=True))
        logits = fmodel(*test.inputs())
    return {n: fast[n].detach() for n in names}, logits.detach()


@pytest.mark.parametrize("scope", ["all", "head"])
def test_local_adaptation_gives_highers_weights_and_logits(memory, scope):
    model, writer, test = memory
    options = AdaptationOptions(**LOCAL, adapt_scope=scope, adapt_path="reference")
    adapter = LocalAdapter(model, writer, options)
    slots = adapter.neighbours(test)
    expected = []
    for i in range(test.num_examples):
        neighbours = writer.batch(slots[i])

        def loss(p, nb=neighbours):
            return model.criterion(functional_call(model, p, nb.inputs()), nb)

        start = adapter.scope.params(model)
        ours = local_adapt(
            loss,
            start,
            steps=options.steps,
            lr=options.adapt_lr,
            l2=options.l2,
            momentum=options.momentum,
        )
        theirs, logits = higher_local_adapt(
            model, set(start), neighbours, test.select(test.example_rows(i)), options
        )
        close(ours, theirs)
        moved = max((ours[n] - start[n]).abs().max() for n in start)
        assert moved > 1e-3  # the comparison is not between two unmoved copies
        expected.append(logits)
    expected = torch.cat(expected)
    for path in ("reference", "fast"):
        options = AdaptationOptions(**LOCAL, adapt_scope=scope, adapt_path=path)
        ours = LocalAdapter(model, writer, options).logits(test)
        torch.testing.assert_close(ours, expected, atol=ATOL, rtol=0, msg=path)


# -- meta-gradients ------------------------------------------------------------------------------
def higher_meta_gradient(model, support, query, lr, *, first_order):
    """d L_query(W') / d W with W' = one SGD step (lr) per support batch, under `higher`.

    Second order differentiates back through the steps (``track_higher_grads=True``); first
    order is ``cls_maml.py``'s: steps without higher-order graph and the query loss's gradient
    at the fast weights, taken as W's.
    """
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    weights = [p for p in model.parameters() if p.requires_grad]
    sgd = torch.optim.SGD(weights, lr=lr)
    with higher.innerloop_ctx(
        model, sgd, copy_initial_weights=False, track_higher_grads=not first_order
    ) as (fmodel, diffopt):
        for batch in support:
            diffopt.step(F.cross_entropy(fmodel(*batch.inputs()), batch.labels))
        loss = F.cross_entropy(fmodel(*query.inputs()), query.labels)
        wrt = [p for p in fmodel.parameters() if p.requires_grad] if first_order else weights
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return {n: g for n, g in zip(names, grads, strict=True) if g is not None}


@pytest.mark.parametrize("first_order", [True, False], ids=["first", "second"])
def test_maml_er_meta_gradient_is_highers(task, first_order):
    inner_lr = 0.5  # large, so second order differs from first well beyond the tolerance
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    options = {"support_batches": 2, "inner_lr": inner_lr, "first_order": first_order}
    strategy = registry.build("maml-er", context, options)
    model = strategy.model.eval()
    *support, query = stream_batches(task, n=3)
    with strategy._double_backward():  # eager attention for second order, as `learn` does
        strategy.outer_gradient(strategy.inner_loop(support), [query])
    ours = {n: p.grad for n, p in strategy.weights().items() if p.grad is not None}
    with attention_implementation(model.encoder, "eager"):
        theirs = higher_meta_gradient(model, support, query, inner_lr, first_order=first_order)
    close(ours, theirs)


def test_maml_er_second_order_differs_from_first(task):
    """The two oracles above are not one number twice: the orders disagree by far more."""
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    model = context.model.eval()
    *support, query = stream_batches(task, n=3)
    with attention_implementation(model.encoder, "eager"):
        first, second = (
            higher_meta_gradient(model, support, query, 0.5, first_order=order)
            for order in (True, False)
        )
    gap = max((first[n] - second[n]).abs().max() for n in first)
    assert gap > 100 * ATOL


@pytest.mark.parametrize("first_order", [True, False], ids=["first", "second"])
def test_meta_mbpa_meta_gradient_is_highers(task, first_order):
    meta_lr = 0.5
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    options = {"k": 3, "write_rate": 1.0, "beta": 1e-3, "meta_lr": meta_lr}
    strategy = registry.build("meta-mbpa", context, {**options, "first_order": first_order})
    for batch in stream_batches(task, n=2):
        strategy.writer.write(batch)
    model = context.model.eval()
    example = stream_batches(task, n=1, task=1)[0].examples_at([0])
    slots = strategy.neighbours(example)[0]
    assert len(slots) == 3
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    weights = [p for p in model.parameters() if p.requires_grad]
    with attention_implementation(model.encoder, "eager"):
        ours = torch.autograd.grad(strategy.meta_loss(example, slots), weights, allow_unused=True)
        neighbours = strategy.writer.batch(slots)
        theirs = higher_meta_gradient(
            model, [neighbours], example, meta_lr, first_order=first_order
        )
    close({n: g for n, g in zip(names, ours, strict=True) if g is not None}, theirs)
