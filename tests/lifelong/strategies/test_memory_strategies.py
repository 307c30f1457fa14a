import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lifelong import registry
from lifelong.strategies.agem import AGEM, AGEMOptions, flat_gradient, project_gradient
from lifelong.strategies.ewc import EWC, EWCOptions, ewc_penalty
from lifelong.strategies.mbpa import MbPA, MbPAOptions
from lifelong.strategies.mbpa_plus_plus import MbPAPlusPlus, MbPAPlusPlusOptions, MbPAPlusPlusRand
from lifelong.strategies.mtl import MTL, MTLOptions
from lifelong.strategies.mtl_cumulative import MTLCumulative, MTLCumulativeOptions
from lifelong.strategy import StrategyContext
from tests.conftest import tiny_classifier, toy_stream

ALL = ["seq", "replay", "agem", "ewc", "mbpa", "mbpa++", "mbpa++-rand", "mtl", "mtl-cumulative"]


def batches(kind, n=4, task=0, size=4):
    train = toy_stream(n_train=n * size).tasks[task].train
    return [kind(list(train[i : i + size])) for i in range(0, len(train), size)]


def snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def unchanged(model, before):
    return all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_all_eight_strategies_are_registered_with_descriptions():
    described = registry.describe()
    assert set(ALL) <= set(described)
    assert all(described[n] for n in ALL)


@pytest.mark.parametrize("name", ALL)
def test_predict_never_changes_the_base_weights(name, task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    # every adapt_scope and path is checked for this in tests/lifelong/mechanisms/test_adaptation.py
    options = {"k": 4, "steps": 3, "adapt_scope": "top1"} if name.startswith("mbpa") else {}
    strategy = registry.build(name, ctx, options)
    if hasattr(strategy, "on_stream_start"):
        strategy.on_stream_start(toy_stream())
    for b in batches(task):
        strategy.observe(b)
    for hook in ("on_task_end",):
        if hasattr(strategy, hook):
            getattr(strategy, hook)(0)
    before = snapshot(ctx.model)
    test = task(list(toy_stream().tasks[0].test))
    scores = strategy.predict(test)
    assert scores.shape == (len(test), 4) and torch.isfinite(scores).all()
    assert unchanged(ctx.model, before)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=6, max_size=6))
def test_agem_projection_never_conflicts_with_the_memory_gradient(values):
    g = torch.tensor(values[:3], dtype=torch.float64)
    g_ref = torch.tensor(values[3:], dtype=torch.float64)
    projected = project_gradient(g, g_ref)
    # zero up to rounding: relative to the sizes of the vectors involved
    assert torch.dot(projected, g_ref) >= -1e-9 * (1 + g.norm()) * (1 + g_ref.norm())
    if torch.dot(g, g_ref) >= 0:
        assert projected is g


def test_agem_projects_against_memory_gradient(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3)
    strategy = AGEM(ctx, AGEMOptions(memory_batch=4))
    first, second = batches(task, task=0)[0], batches(task, task=1)[0]
    strategy.observe(first)  # memory now holds task 0
    g = flat_gradient(ctx.model, [second])
    g_ref = flat_gradient(ctx.model, [strategy.replay.writer.batch(np.arange(4))])
    assert torch.dot(project_gradient(g, g_ref), g_ref) >= -1e-4
    strategy.observe(second)
    assert len(strategy.replay.memory) == 8


def test_agem_replay_steps_mode_only_checks_when_replay_is_due(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3)
    strategy = AGEM(ctx, AGEMOptions(project="replay_steps", replay_every=8, replay_ratio=0.5))
    calls = []
    original = strategy._reference_batches
    strategy._reference_batches = lambda: calls.append(1) or original()
    for b in batches(task, n=4):  # 16 examples: replay due after 8 and 16
        strategy.observe(b)
    assert len(calls) == 2


def test_ewc_penalty_is_zero_at_the_anchor_and_grows_away_from_it(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-2)
    strategy = EWC(ctx, EWCOptions(ewc_lambda=10.0, fisher_samples=8))
    assert strategy.penalty().item() == 0.0  # no task has ended yet
    for b in batches(task):
        strategy.observe(b)
    strategy.on_task_end(0)
    assert set(strategy.state.fisher) == set(strategy.state.anchor)
    assert sum(f.sum() for f in strategy.state.fisher.values()) > 0
    assert strategy.penalty().item() == pytest.approx(0.0, abs=1e-12)
    for b in batches(task, task=1):
        stats = strategy.observe(b)
    assert stats["ewc"] > 0 and strategy.penalty().item() > 0


def test_ewc_penalty_by_hand():
    params = {"w": torch.tensor([1.0, 2.0])}
    anchor = {"w": torch.tensor([0.0, 2.0])}
    fisher = {"w": torch.tensor([3.0, 5.0])}
    assert ewc_penalty(params, anchor, fisher).item() == pytest.approx(3.0)


def test_online_fisher_accumulates_with_gamma(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-2)
    strategy = EWC(ctx, EWCOptions(gamma=0.5, fisher_samples=4))
    strategy.observe(batches(task)[0])
    strategy.on_task_end(0)
    first = {n: f.clone() for n, f in strategy.state.fisher.items()}
    strategy.observe(batches(task, task=1)[0])
    new = strategy.fisher_information()
    strategy.on_task_end(1)
    name = "head.linear.weight"
    torch.testing.assert_close(strategy.state.fisher[name], 0.5 * first[name] + new[name])


def test_mbpa_plus_plus_replay_schedule_fires_floor_r_ri_every_ri(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3)
    options = MbPAPlusPlusOptions(replay_every=6, replay_ratio=0.5, k=2, steps=1)
    strategy = MbPAPlusPlus(ctx, options)
    sizes = []
    original = strategy.replay.replay_batches
    strategy.replay.replay_batches = lambda slots=None: (
        sizes.append(sum(map(len, out := original(slots)))) or out
    )
    for b in batches(task, n=6, size=3):  # 18 examples, R_I = 6 -> 3 replays of floor(3)
        strategy.observe(b)
    assert sizes == [3, 3, 3]


def test_mbpa_and_rand_variants(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3)
    assert MbPA(ctx, MbPAOptions()).adapter.options.retrieval == "nearest"
    rand = MbPAPlusPlusRand(StrategyContext(tiny_classifier(), task), None)
    assert rand.adapter.options.retrieval == "random"
    assert registry.build("mbpa++-rand", ctx, {"k": 3}).adapter.options.retrieval == "random"


def test_mtl_sees_a_sample_of_every_task_in_its_first_batches(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    strategy = MTL(ctx, MTLOptions())
    stream = toy_stream(n_train=16)
    strategy.on_stream_start(stream)
    labels = []
    ctx.model.loss, original = (
        (lambda b: labels.extend(b.labels.tolist()) or original(b)),
        (ctx.model.loss),
    )
    first_task = list(batches(task))[:2]  # two stream batches of task 0 (labels 0 and 1 only)
    for b in first_task:
        assert {int(y) for y in b.labels} <= {0, 1}
        strategy.observe(b)
    assert {2, 3} & set(labels)  # task 1's labels are already trained on
    for b in batches(task)[2:] + [task(list(stream.tasks[1].train))]:
        strategy.observe(b)
    # one joint pass: every training example of both tasks exactly once
    assert strategy.counts.taken == 32 and sorted(strategy.order.tolist()) == list(range(32))


def test_mtl_needs_the_stream_before_it_observes(task):
    strategy = MTL(StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4))
    with pytest.raises(RuntimeError, match="on_stream_start"):
        strategy.observe(batches(task)[0])


def test_mtl_cumulative_trains_jointly_on_everything_seen_at_task_end(task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    strategy = MTLCumulative(ctx, MTLCumulativeOptions(epochs=2))
    before = snapshot(ctx.model)
    for b in batches(task):
        assert strategy.observe(b) == {}
    assert unchanged(ctx.model, before)  # observe only stores
    seen = []
    ctx.model.loss, original = (lambda b: seen.append(len(b)) or original(b)), ctx.model.loss
    strategy.on_task_end(0)
    assert sum(seen) == 2 * 16 and not unchanged(ctx.model, before)


def adam_steps(optimizer):
    return sorted({int(s["step"]) for s in optimizer.state.values()})


@pytest.mark.parametrize("cls", [MbPA, MbPAPlusPlus])
def test_optimizer_per_task_restarts_adam_and_the_linear_schedule_at_each_task(cls, task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3)
    options = cls.Options(optimizer_per_task=True, warmup_steps=2, schedule_steps=6)
    strategy = cls(ctx, options)
    strategy.on_task_start(0)

    def lrs(task_id, n):
        out = []
        for b in batches(task, n=n, task=task_id):
            strategy.observe(b)
            out.append(strategy.trainer.optimizer.param_groups[0]["lr"])
        return out

    # EM-in-LLL's WarmupLinearSchedule: u/2 while u < 2, then (6 − u)/4 down to 0
    assert lrs(0, 4) == pytest.approx([5e-4, 1e-3, 7.5e-4, 5e-4])
    first = strategy.trainer.optimizer
    assert adam_steps(first) == [4]
    strategy.on_task_start(1)
    assert strategy.trainer.optimizer is not first and not strategy.trainer.optimizer.state
    assert lrs(1, 7) == pytest.approx([5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0, 0.0])
    assert adam_steps(strategy.trainer.optimizer) == [7]
    group = strategy.trainer.optimizer.param_groups[0]
    assert (group["weight_decay"], group["eps"]) == (0, 1e-8)  # EM-in-LLL's AdamW


@pytest.mark.parametrize("cls", [MbPA, MbPAPlusPlus])
def test_optimizer_per_task_is_off_by_default_and_keeps_one_optimizer(cls, task):
    ctx = StrategyContext(tiny_classifier(), task, lr=1e-3)
    strategy = cls(ctx, cls.Options())
    mbpa = strategy.mbpa if isinstance(strategy, MbPAPlusPlus) else strategy  # MbPA++ holds one
    assert mbpa.local.training.schedule is None and "schedule" not in strategy.state_dict()
    optimizer = strategy.trainer.optimizer
    strategy.observe(batches(task)[0])
    strategy.on_task_start(1)
    assert strategy.trainer.optimizer is optimizer and adam_steps(optimizer) == [1]


def test_optimizer_per_task_resumes_mid_task_with_its_schedule_and_adam_state(task):
    options = MbPAPlusPlusOptions(optimizer_per_task=True, warmup_steps=1, schedule_steps=5)
    strategy = MbPAPlusPlus(StrategyContext(tiny_classifier(), task, lr=1e-3), options)
    data = batches(task, n=3)
    strategy.on_task_start(0)
    for b in data[:2]:
        strategy.observe(b)
    state = copy.deepcopy(strategy.state_dict())  # as from a file: Adam would share tensors
    assert state["schedule"] == {"updates": 2}
    again = MbPAPlusPlus(StrategyContext(tiny_classifier(seed=1), task, lr=1e-3), options)
    again.load_state_dict(state)  # a resumed run: no on_task_start mid-task
    assert adam_steps(again.trainer.optimizer) == [2]
    for s in (strategy, again):
        torch.manual_seed(0)
        s.observe(data[2])
    assert again.trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 2 / 4)
    assert unchanged(again.trainer.model, snapshot(strategy.trainer.model))
