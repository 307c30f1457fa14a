"""NCM and RanPAC: training-free classifiers on the frozen encoder's features."""

import numpy as np
import pytest
import torch

from lifelong.cost import CostMeter, metering
from lifelong.mechanisms.prototypes import (
    UNSEEN,
    ClassMeans,
    HeldFeatures,
    RidgeStatistics,
    frozen_features,
    holdout_errors,
    select_ridge,
    solve_flops,
)
from lifelong.strategies.ncm import NCM, NCMOptions
from lifelong.strategies.ranpac import RanPAC, RanPACOptions
from tests.conftest import toy_stream


def test_class_means_are_the_means_of_everything_seen_whatever_the_batches():
    rng = np.random.default_rng(0)
    features = torch.tensor(rng.normal(size=(30, 5)))
    labels = torch.tensor(rng.integers(0, 3, 30))
    means = ClassMeans(4, 5)
    for start in range(0, 30, 7):  # uneven batches
        means.add(features[start : start + 7], labels[start : start + 7])
    for c in range(3):
        torch.testing.assert_close(means.means()[c], features[labels == c].mean(0))
    scores = means.cosine_scores(features.float())
    assert (scores[:, 3] == UNSEEN).all()  # never seen
    assert scores[:, :3].abs().max() <= 1 + 1e-6


def test_the_incremental_ridge_equals_the_batch_solution():
    """RanPAC §3.3: G and C summed batch by batch give the ridge fit of all the data at once."""
    rng = np.random.default_rng(1)
    h = torch.tensor(rng.normal(size=(40, 6)))
    y = torch.tensor(rng.integers(0, 3, 40))
    stats = RidgeStatistics(6, 3)
    for start in range(0, 40, 9):
        stats.add(h[start : start + 9], y[start : start + 9])
    onehot = torch.nn.functional.one_hot(y, 3).double()
    batch = torch.linalg.solve(h.T @ h + 0.5 * torch.eye(6, dtype=h.dtype), h.T @ onehot)
    torch.testing.assert_close(stats.solve(0.5), batch)


def test_the_ridge_is_chosen_on_a_hold_out_of_the_task_as_the_reference_does():
    rng = np.random.default_rng(2)
    h = torch.tensor(rng.normal(size=(50, 4)))
    y = (h[:, 0] > 0).long()
    ridge = select_ridge(h, y, 2)
    assert ridge in [10.0**k for k in range(-8, 9)]
    fit, held = h[:40], h[40:]  # the first 80%, the rest
    onehot = torch.nn.functional.one_hot(y, 2).double()

    def error(r):
        w = torch.linalg.solve(fit.T @ fit + r * torch.eye(4, dtype=h.dtype), fit.T @ onehot[:40])
        return float(((held @ w - onehot[40:]) ** 2).mean())

    assert error(ridge) == min(error(10.0**k) for k in range(-8, 9))


def test_a_task_narrower_than_the_projection_is_scored_in_the_dual_form():
    """n = 24 fitted rows against M = 64: the n x n system gives the M x M one's errors."""
    rng = np.random.default_rng(3)
    h = torch.relu(torch.tensor(rng.normal(size=(30, 64))))
    y = torch.tensor(rng.integers(0, 3, 30))
    onehot = torch.nn.functional.one_hot(y, 3).double()
    fit, held = h[:24], h[24:]

    def primal(r):
        w = torch.linalg.solve(fit.T @ fit + r * torch.eye(64, dtype=h.dtype), fit.T @ onehot[:24])
        return float(((held @ w - onehot[24:]) ** 2).mean())

    grid = tuple(10.0**k for k in range(-3, 9))  # the M x M system is well-posed here
    meter = CostMeter()
    with metering(meter), meter.phase("train"):
        errors = holdout_errors(h, y, 3, grid)
    np.testing.assert_allclose(errors, [primal(r) for r in grid], rtol=1e-7)
    assert select_ridge(h, y, 3, grid) == grid[int(np.argmin([primal(r) for r in grid]))]
    kernel = 2 * 24 * 64 * (24 + 6)  # HHᵀ and H_t Hᵀ
    assert meter.phases["train"].flops == kernel + len(grid) * (solve_flops(24, 3) + 2 * 6 * 24 * 3)


def test_held_features_are_taken_once_and_survive_a_checkpoint():
    held = HeldFeatures()
    held.add(torch.ones(2, 3), torch.tensor([0, 1]))
    again = HeldFeatures()
    again.load_state_dict(held.state_dict())
    features, labels = again.take()
    assert features.shape == (2, 3) and labels.tolist() == [0, 1]
    assert again.take() is None


@pytest.mark.parametrize("strategy", ["ncm", "ranpac"])
def test_no_weight_moves_and_a_separable_toy_is_learnt(context, task, strategy):
    """The toy's labels are given away by a word: frozen features separate them."""
    stream = toy_stream(n_train=32, n_test=16)
    before = [p.detach().clone() for p in context.model.parameters()]
    learner = NCM(context) if strategy == "ncm" else RanPAC(context, RanPACOptions(projection=256))
    for i, t in enumerate(stream):
        for start in range(0, len(t.train), 8):
            learner.observe(task(list(t.train[start : start + 8])))
        learner.on_task_end(i)
    assert all(torch.equal(a, b) for a, b in zip(before, context.model.parameters()))
    correct = total = 0
    for t in stream:
        batch = task(list(t.test))
        correct += int((learner.predict(batch).argmax(-1) == batch.labels).sum())
        total += len(t.test)
    assert correct / total > 0.5  # 4 classes: chance is 0.25


def test_ranpac_resumes_to_the_same_predictions(context, task):
    stream = toy_stream(n_train=16, n_test=8)
    first = RanPAC(context, RanPACOptions(projection=64))
    first.observe(task(list(stream.tasks[0].train)))
    first.on_task_end(0)
    again = RanPAC(context, RanPACOptions(projection=64))
    again.load_state_dict(first.state_dict())
    batch = task(list(stream.tasks[0].test))
    torch.testing.assert_close(again.predict(batch), first.predict(batch))
    assert frozen_features(context.model, batch).shape == (8, context.model.encoder.hidden_size)


@pytest.mark.parametrize("strategy", ["ncm", "ranpac"])
def test_a_classification_only_strategy_on_fewrel_is_refused_before_anything_loads(
    strategy, tmp_path
):
    from lifelong.experiment.config import ConfigError, RunConfig, plan_run

    config = RunConfig.demo(stream="fewrel", strategy=strategy, encoder="tiny")
    with pytest.raises(ConfigError, match=f"strategy '{strategy}' runs on classification"):
        plan_run(config.replace(output_dir=str(tmp_path)))


def test_er_ncm_and_ranpac_are_registered_strategies():
    from lifelong import registry

    assert {"er", "ncm", "ranpac"} <= set(registry.names())
    assert registry.get("ranpac") is RanPAC and registry.get("ncm") is NCM


@pytest.mark.parametrize("strategy", ["ncm", "ranpac"])
def test_a_warm_up_trains_the_encoder_first_then_adds_the_kept_batches(context, task, strategy):
    """SEQ*'s warm-up: 3/8 of the first task's batches train, then the encoder is frozen and
    the warm-up batches' features (by that encoder) join the prototypes."""
    from lifelong.learner import run_stream

    before = {n: p.detach().clone() for n, p in context.model.encoder.named_parameters()}
    if strategy == "ncm":
        learner = NCM(context, NCMOptions(warmup_fraction=0.375))
    else:
        learner = RanPAC(context, RanPACOptions(projection=64, warmup_fraction=0.375))
    stream = toy_stream(n_train=16)
    run_stream(stream, learner, task, batch_size=4, progress=False)
    assert learner.warmup.counts.warmup_steps == 2  # ceil(0.375 * 4 batches)
    assert learner.warmup.counts.frozen and not learner.warmup.held
    encoder = context.model.encoder
    moved = [n for n, p in encoder.named_parameters() if not torch.equal(p, before[n])]
    assert moved and not any(p.requires_grad for p in encoder.parameters())
    seen = learner.means.counts if strategy == "ncm" else learner.ridge.seen
    assert int(seen.sum()) == 32  # every training example, the warm-up's included


def test_ncm_with_a_warm_up_means_are_the_frozen_encoders_class_means(context, task):
    from lifelong.learner import run_stream
    from lifelong.mechanisms.prototypes import frozen_features

    learner = NCM(context, NCMOptions(warmup_fraction=0.375))
    stream = toy_stream(n_train=16)
    run_stream(stream, learner, task, batch_size=4, progress=False)
    examples = [e for t in stream.tasks for e in t.train]
    batch = task(examples)
    features = frozen_features(context.model, batch).double()
    labels = batch.labels
    for y in labels.unique().tolist():
        expected = features[labels == y].mean(0)
        assert torch.allclose(learner.means.means()[y], expected, atol=1e-5)


def test_a_warm_up_resumes_with_its_kept_batches(context, task):
    learner = NCM(context, NCMOptions(warmup_fraction=0.375))
    learner.on_stream_start(toy_stream(n_train=16))
    train = toy_stream(n_train=16).tasks[0].train
    learner.observe(task(list(train[:4])))  # one of two warm-up steps
    state = learner.state_dict()
    again = NCM(context, NCMOptions(warmup_fraction=0.375))
    again.load_state_dict(state)
    assert again.warmup.active and len(again.warmup.held) == 1
    assert again.warmup.counts.warmup_steps == 2
