"""The defaults that come from the papers' reference code, and what they do."""

import pytest

from lifelong import registry
from lifelong.strategies.agem import AGEM, AGEMOptions
from lifelong.strategy import StrategyContext
from tests.conftest import tiny_classifier, toy_stream


def test_agem_projects_only_at_the_replay_steps_by_default(task, monkeypatch):
    assert AGEMOptions().project == "replay_steps" and AGEMOptions().max_grad_norm == 0.0
    context = StrategyContext(tiny_classifier(kind=task), task, lr=1e-3, batch_size=4)
    strategy = AGEM(context, AGEMOptions(replay_every=8, replay_ratio=0.5))
    references = []
    original = strategy._reference_batches
    monkeypatch.setattr(strategy, "_reference_batches", lambda: references.append(1) or original())
    train = toy_stream(n_train=32).tasks[0].train
    for start in range(0, 32, 4):
        strategy.observe(task(list(train[start : start + 4])))
    # 8 updates; R_I = 8 examples = every 2nd update, the first with memory to compare against
    assert len(references) == 4 and strategy.replay.schedule.replays == 4


@pytest.mark.parametrize("name", ["seq", "replay", "agem", "mtl", "oml-er", "anml-er", "maml-er"])
def test_holla_s_strategies_do_not_clip_their_ordinary_updates(name):
    assert registry.get(name).Options().max_grad_norm == 0.0


@pytest.mark.parametrize("name", ["mbpa", "mbpa++", "mbpa++-rand"])
def test_mbpa_family_clips_every_update_at_one_as_em_in_lll(name):
    options = registry.get(name).Options()
    assert options.max_grad_norm == 1.0
    assert getattr(options, "replay_grad_norm", None) in (None, 1.0)  # None: max_grad_norm


@pytest.mark.parametrize("name", ["oml-er", "anml-er", "maml-er"])
def test_meta_learners_meta_train_without_dropout_by_default(name, task):
    context = StrategyContext(tiny_classifier(kind=task), task, lr=1e-3, batch_size=4)
    options = {"support_batches": 1, "replay_every": 1000}
    strategy = registry.build(name, context, options)
    modes = []
    encoder = context.model.encoder
    hook = encoder.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    train = toy_stream(n_train=8).tasks[0].train
    for start in range(0, 8, 4):
        strategy.observe(task(list(train[start : start + 4])))
    hook.remove()
    assert modes and not any(modes)
    with_dropout = registry.build(name, context, {**options, "dropout": True})
    modes.clear()
    hook = encoder.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    for start in range(0, 8, 4):
        with_dropout.observe(task(list(train[start : start + 4])))
    hook.remove()
    assert any(modes)


@pytest.mark.parametrize("name", ["oml-er", "anml-er", "maml-er"])
def test_meta_learners_sum_their_replay_query_mini_batches(name):
    assert registry.get(name).Options().replay_mode == "sum_batches"
    assert registry.get(name).Options().dropout is False
