import dataclasses

import numpy as np
import pytest
import torch

from lifelong import registry
from lifelong.batch import Batch
from lifelong.encoders.base import attention_implementation
from lifelong.learner import evaluate, evaluate_all
from lifelong.mechanisms.episodes import EpisodeBuffer
from lifelong.mechanisms.replay import ReplaySchedule
from lifelong.mechanisms.scopes import Head
from lifelong.strategies.anml_er import ANMLER
from lifelong.strategies.meta_mbpa import MetaMbPAOptions
from lifelong.strategies.oml_er import OMLER, OMLEROptions
from lifelong.strategy import StrategyContext
from tests.conftest import tiny_classifier, toy_stream

META = ["meta-mbpa", "oml-er", "anml-er"]
SMALL = {
    # beta 1e-3: the toy inputs differ by one word, so their keys are close under beta = 10
    "meta-mbpa": {
        "k": 3,
        "write_rate": 1.0,
        "beta": 1e-3,
        "steps": 2,
        "replay_every": 8,
        "replay_ratio": 0.25,
    },
    "oml-er": {"support_batches": 2, "replay_every": 8, "replay_ratio": 0.5, "inner_lr": 0.1},
    "anml-er": {"support_batches": 2, "replay_every": 8, "replay_ratio": 0.5, "inner_lr": 0.1},
}


def stream_batches(kind, n=6, task=0, size=4):
    train = toy_stream(n_train=n * size).tasks[task].train
    return [kind(list(train[i : i + size])) for i in range(0, len(train), size)]


def replay_frequency(every, batch_size, support_batches):
    return ReplaySchedule(every, 0.01).episodes_between_replays(batch_size, support_batches)


def build(name, task, **overrides):
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    return registry.build(name, context, {**SMALL[name], **overrides}), context


def snapshot(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def encoder_grads(model):
    return [p.grad for n, p in model.named_parameters() if n.startswith("encoder.")]


def test_meta_strategies_are_registered_with_descriptions():
    described = registry.describe()
    assert all(described.get(name) for name in META)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("meta-mbpa", {}),
        ("meta-mbpa", {"first_order": True}),
        ("meta-mbpa", {"meta_scope": "head"}),
        ("meta-mbpa", {"meta_scope": "lora", "adapt_scope": "lora"}),
        ("oml-er", {}),
        ("anml-er", {}),
    ],
)
def test_outer_updates_reach_the_encoder(name, overrides, task):
    strategy, context = build(name, task, **overrides)
    before = snapshot(context.model.encoder)
    for batch in stream_batches(task):
        strategy.observe(batch)
    grads = encoder_grads(context.model)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    after = snapshot(context.model.encoder)
    assert any(not torch.equal(before[n], after[n]) for n in before)


def filled_meta_mbpa(task, **overrides):
    strategy, context = build("meta-mbpa", task, **overrides)
    for batch in stream_batches(task, n=2):
        strategy.writer.write(batch)
    assert len(strategy.memory) >= 3
    return strategy, context


def meta_gradient(strategy, example, first_order):
    strategy.options = dataclasses.replace(strategy.options, first_order=first_order)
    params = [p for n, p in strategy.model.named_parameters() if n.startswith("encoder.")]
    neighbours = strategy.neighbours(example)
    with attention_implementation(strategy.model.encoder, "eager"):
        if isinstance(strategy.meta_scope, Head):
            loss = strategy.head_meta_loss(example, neighbours)
        else:
            loss = strategy.meta_loss(example, neighbours[0])
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])


@pytest.mark.parametrize("scope", ["all", "top1", "head", "lora"])
def test_second_and_first_order_meta_gradients_differ_and_are_finite(task, scope):
    strategy, context = filled_meta_mbpa(task, meta_lr=0.5, meta_scope=scope)
    context.model.eval()
    example = stream_batches(task, task=1)[0].examples_at([0])
    second = meta_gradient(strategy, example, first_order=False)
    first = meta_gradient(strategy, example, first_order=True)
    assert torch.isfinite(second).all() and torch.isfinite(first).all()
    assert first.norm() > 0
    assert (second - first).norm() > 1e-4 * first.norm()


@pytest.mark.parametrize("first_order", [False, True])
def test_batched_head_steps_equal_the_per_example_loop(task, first_order, monkeypatch):
    """The head scope's vmap-ed meta steps give the loop's loss and every parameter's gradient."""
    from lifelong.strategies.meta_mbpa import MetaMbPA

    strategy, context = filled_meta_mbpa(task, meta_lr=0.5, meta_scope="head",
                                         first_order=first_order)  # fmt: skip
    context.model.eval()
    batch = stream_batches(task, task=1)[0]
    neighbours = strategy.neighbours(batch)
    assert len({len(n) for n in neighbours}) == 1 and len(batch) > 1
    params = [p for p in context.model.parameters() if p.requires_grad]
    results = {}
    for batched in (True, False):
        monkeypatch.setattr(MetaMbPA, "batches_head_steps", batched)
        calls = []
        monkeypatch.setattr(strategy, "_batched_head_meta_loss",
                            _spy(strategy._batched_head_meta_loss, calls))  # fmt: skip
        loss = strategy.head_meta_loss(batch, neighbours)
        assert bool(calls) == batched  # the batched path ran exactly when asked
        results[batched] = (loss.detach(), torch.autograd.grad(loss, params, allow_unused=True))
    (loss_b, grads_b), (loss_l, grads_l) = results[True], results[False]
    torch.testing.assert_close(loss_b, loss_l, rtol=1e-5, atol=1e-6)
    for gb, gl in zip(grads_b, grads_l):
        if gl is None:
            assert gb is None or not gb.any()
        else:
            torch.testing.assert_close(gb, gl, rtol=1e-4, atol=1e-6)


def _spy(function, calls):
    def spied(*args, **kwargs):
        calls.append(1)
        return function(*args, **kwargs)

    return spied


def test_by_default_head_steps_batch_on_cuda_only(task, monkeypatch):
    from lifelong.strategies.meta_mbpa import MetaMbPA

    assert MetaMbPA.batches_head_steps is None
    strategy, _ = filled_meta_mbpa(task, meta_scope="head")
    batch = stream_batches(task, task=1)[0]
    calls = []
    monkeypatch.setattr(strategy, "_batched_head_meta_loss",
                        _spy(strategy._batched_head_meta_loss, calls))  # fmt: skip
    strategy.head_meta_loss(batch, strategy.neighbours(batch))
    assert not calls  # the CPU takes the loop, the faster there


def test_head_steps_fall_back_to_the_loop_when_examples_differ_in_neighbours(task):
    strategy, context = filled_meta_mbpa(task, meta_scope="head")
    batch = stream_batches(task, task=1)[0]
    neighbours = strategy.neighbours(batch)
    uneven = [neighbours[0][:1], *neighbours[1:]]
    stored = strategy.writer.batch(np.unique(np.concatenate(uneven)))
    assert strategy._one_row_each(batch, stored, neighbours)
    assert not strategy._one_row_each(batch, stored, uneven)


def test_meta_mbpa_inner_step_never_modifies_the_model(task):
    strategy, context = filled_meta_mbpa(task, meta_lr=0.5)
    before = snapshot(context.model)
    example = stream_batches(task, task=1)[0].examples_at([0])
    strategy.meta_loss(example, strategy.neighbours(example)[0])
    assert all(torch.equal(p, before[n]) for n, p in context.model.named_parameters())


@pytest.mark.parametrize("name", ["oml-er", "anml-er"])
def test_episode_inner_loops_never_modify_the_module(name, task):
    strategy, context = build(name, task)
    before = snapshot(strategy.net)
    adapted = strategy.inner_loop(stream_batches(task, n=2))
    assert all(torch.equal(p, before[n]) for n, p in strategy.net.named_parameters())
    changed = [k for k, v in adapted.items() if not torch.equal(v, before[k])]
    assert changed and all(k.endswith(("weight", "bias")) for k in changed)
    if name == "anml-er":  # the whole prediction network adapts, the gate does not
        assert any(".encoder." in k for k in changed)
        assert not any(k.startswith("neuromodulator.") for k in adapted)


def test_replay_frequency_and_size_follow_the_formulas():
    # R_F = ceil((R_I / b + 1) / (m + 1)); text classification: ceil(601 / 6) = 101, 96 examples
    assert replay_frequency(9_600, 16, 5) == 101
    assert ReplaySchedule(9_600, 0.01).size == 96
    assert replay_frequency(1_600, 4, 5) == 67  # FewRel: ceil(401 / 6)
    assert replay_frequency(100, 16, 5) == 2  # ceil(7.25 / 6)
    with pytest.raises(ValueError):
        replay_frequency(100, 0, 5)


def tagged(i):
    return Batch(
        torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long), torch.tensor([i])
    )


def test_episode_layout_support_then_query_and_every_rf_th_a_replay_query():
    buffer = EpisodeBuffer(support_batches=5, replay_every_episodes=3)
    episodes = [e for e in (buffer.add(tagged(i)) for i in range(41)) if e is not None]
    ids = [
        ([int(b.labels) for b in e.support], e.query and int(e.query.labels), e.replay)
        for e in episodes
    ]
    assert ids[0] == ([0, 1, 2, 3, 4], 5, False)
    assert ids[1] == ([6, 7, 8, 9, 10], 11, False)
    assert ids[2] == ([12, 13, 14, 15, 16], None, True)  # episode 3 = R_F: query from memory
    assert ids[3] == ([17, 18, 19, 20, 21], 22, False)
    assert [e.replay for e in episodes] == [(i + 1) % 3 == 0 for i in range(len(episodes))]
    leftover = buffer.flush()
    assert leftover is not None and buffer.pending == []
    assert [int(b.labels) for b in leftover.stream_batches] == list(
        range(sum(len(e.stream_batches) for e in episodes), 41)
    )


def test_oml_er_replays_memory_on_schedule_and_writes_every_example(task):
    options = OMLEROptions(support_batches=2, replay_every=8, replay_ratio=0.5)
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    strategy = OMLER(context, options)
    assert strategy.buffer.replay_every_episodes == replay_frequency(8, 4, 2) == 1
    assert strategy.replay.schedule.size == 4
    data = stream_batches(task, n=7)
    for batch in data:
        strategy.observe(batch)
    # every episode is a replay episode (R_F = 1): 2 stream batches each, the first has no memory
    assert strategy.buffer.episodes == 3 and strategy.replay.schedule.replays == 2
    assert len(strategy.replay.memory) == 6 * 4  # the seventh batch waits for its episode
    evaluate_all(strategy, toy_stream(), task, batch_size=4, progress=False)
    assert len(strategy.buffer.pending) == 1 and len(strategy.replay.memory) == 6 * 4


@pytest.mark.parametrize("name", ["oml-er", "anml-er"])
def test_meta_test_draws_memory_batches_at_random_with_replacement(name, task):
    strategy, _ = build(name, task, support_batches=5)
    for batch in stream_batches(task, n=12):
        strategy.observe(batch)
    size = len(strategy.replay.memory)
    drawn, read = [], strategy.replay.writer.batch
    strategy.replay.writer.batch = lambda slots: drawn.append(slots) or read(slots)
    for _ in range(20):
        strategy.meta.memory_support()  # the meta-test's m = 5 memory batches of b = 4
    draws = [drawn[i : i + 5] for i in range(0, 100, 5)]
    assert all(len(d) == 5 and all(len(s) == 4 for s in d) for d in draws)
    flat = np.concatenate([np.concatenate(d) for d in draws])
    assert set(flat.tolist()) <= set(range(size))
    # not oldest -> newest: many batches are unsorted, and batches share examples
    assert sum(not np.all(np.diff(s) > 0) for d in draws for s in d) > 50
    assert any(len(set(np.concatenate(d).tolist())) < 20 for d in draws)


def test_anml_er_meta_test_adapts_the_whole_prediction_network_with_the_gate_fixed(task):
    strategy, _ = build("anml-er", task)
    for batch in stream_batches(task):
        strategy.observe(batch)
    with torch.no_grad():
        weights = dict(strategy.net.named_parameters())
    adapted = strategy.meta_test()
    assert any(k.startswith("classifier.encoder.") for k in adapted)
    assert not any(k.startswith("neuromodulator.") for k in adapted)
    moved = [k for k, v in adapted.items() if not torch.equal(v, weights[k])]
    assert any(k.startswith("classifier.encoder.") for k in moved)
    assert any(k.startswith("classifier.head.") for k in moved)
    oml, _ = build("oml-er", task)
    for batch in stream_batches(task):
        oml.observe(batch)
    assert all(k.startswith("head.") for k in oml.meta_test())


@pytest.mark.parametrize("name", META)
def test_adaptation_runs_once_per_test_set(name, task):
    strategy, _ = build(name, task)
    for batch in stream_batches(task):
        strategy.observe(batch)
    stream = toy_stream(n_test=12)
    accuracy = evaluate(strategy, stream.tasks[0].test, task, batch_size=4, progress=False)
    assert 0.0 <= accuracy <= 100.0
    counter = "coarse_adaptations" if name == "meta-mbpa" else "meta_tests"
    assert getattr(strategy.counts, counter) == 1  # three batches, one adaptation
    evaluate_all(strategy, stream, task, batch_size=4, progress=False)
    # Meta-MbPA adapts once for the whole evaluation (coarse_scope "test_set", the paper's)
    once_more = 1 if name == "meta-mbpa" else len(stream)
    assert getattr(strategy.counts, counter) == 1 + once_more
    assert strategy.report()[counter] == 1 + once_more


@pytest.mark.parametrize("name", META)
def test_predict_never_changes_the_weights(name, task):
    strategy, _ = build(name, task)
    for batch in stream_batches(task):
        strategy.observe(batch)
    module = getattr(strategy, "net", strategy.model)
    before = snapshot(module)
    scores = strategy.predict(task(list(toy_stream().tasks[0].test)))
    assert scores.shape == (8, 4) and torch.isfinite(scores).all()
    assert all(torch.equal(p, before[n]) for n, p in module.named_parameters())


def test_coarse_pool_weights_memories_by_how_many_test_inputs_retrieved_them(task):
    strategy, _ = filled_meta_mbpa(task, k=2)
    test = [task(list(toy_stream().tasks[0].test))]
    slots, weights = strategy.pool(test)
    keys = strategy.writer.keys(test[0].examples)
    retrieved = strategy.memory.nearest(keys, 2)[1].reshape(-1)
    assert sorted(slots.tolist()) == sorted(set(retrieved.tolist()))
    expected = np.array([(retrieved == s).sum() for s in slots]) / len(retrieved)
    np.testing.assert_allclose(weights, expected)


def test_meta_mbpa_replays_its_memories_without_their_own_slot(task):
    strategy, _ = filled_meta_mbpa(task)
    slots = np.arange(len(strategy.memory))
    rows = strategy.neighbours(strategy.writer.batch(slots), own_slots=slots)
    assert all(
        own not in row and len(row) == min(3, len(slots) - 1) for own, row in zip(slots, rows)
    )


def test_meta_mbpa_state_round_trip(task):
    strategy, _ = filled_meta_mbpa(task)
    strategy.observe(stream_batches(task)[0])
    again, _ = build("meta-mbpa", task)
    again.load_state_dict(strategy.state_dict())
    assert len(again.memory) == len(strategy.memory)
    assert again.replay.schedule.seen == strategy.replay.schedule.seen
    assert again.memory.policy == strategy.memory.policy


def test_anml_er_gate_is_in_unit_interval_and_its_encoder_frozen(task):
    strategy, _ = build("anml-er", task)
    assert isinstance(strategy, ANMLER)
    batch = stream_batches(task)[0]
    gate = strategy.net.neuromodulator(batch.input_ids, batch.attention_mask)
    assert gate.shape == (4, strategy.model.encoder.hidden_size)
    assert ((gate >= 0) & (gate <= 1)).all()
    frozen = strategy.net.neuromodulator.encoder
    assert not any(p.requires_grad for p in frozen.parameters())
    optimised = {
        id(p) for group in strategy.trainer.optimizer.param_groups for p in group["params"]
    }
    assert not any(id(p) in optimised for p in frozen.parameters())
    assert all(id(p) in optimised for p in strategy.net.neuromodulator.gate.parameters())


def test_meta_mbpa_options_are_validated():
    with pytest.raises(ValueError):
        MetaMbPAOptions(k=0)


@pytest.mark.parametrize("name", ["oml-er", "anml-er"])
def test_outer_lr_overrides_the_run_lr_and_is_validated(name, task):
    default, _ = build(name, task)
    assert [g["lr"] for g in default.trainer.optimizer.param_groups] == [1e-3]
    custom, _ = build(name, task, outer_lr=2e-4)
    assert [g["lr"] for g in custom.trainer.optimizer.param_groups] == [2e-4]
    with pytest.raises(ValueError, match="outer_lr"):
        OMLEROptions(outer_lr=-1.0)


def test_meta_mbpa_alpha_defaults_to_the_papers_1e_5_not_the_run_lr(task, monkeypatch):
    import lifelong.strategies.meta_mbpa as meta_mbpa
    from lifelong.mechanisms.inner_loop import local_adapt

    assert MetaMbPAOptions().meta_lr == 1e-5  # Wang et al. (2020): α = 1e-5
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs["lr"])
        return local_adapt(*args, **kwargs)

    monkeypatch.setattr(meta_mbpa, "local_adapt", spy)
    example = stream_batches(task, task=1)[0].examples_at([0])
    for overrides, alpha in (({}, 1e-5), ({"meta_lr": 0.0}, 1e-3)):  # 0: the run's lr (1e-3)
        strategy, _ = filled_meta_mbpa(task, **overrides)
        strategy.meta_loss(example, strategy.neighbours(example)[0])
        assert seen.pop() == alpha


def evaluate_with_all_test_sets(strategy, stream, kind):
    """The learner's evaluation with the ``on_eval_sets`` hook: every test set first."""
    from lifelong.learner import evaluate_metrics

    strategy.on_eval_start()
    strategy.on_eval_sets([t.test for t in stream])
    per_task = [
        strategy.predict_set([kind(list(t.test[i : i + 4])) for i in range(0, len(t.test), 4)])
        for t in stream
    ]
    scores = [
        evaluate_metrics(strategy, t.test, kind, batch_size=4, progress=False) for t in stream
    ]
    strategy.on_eval_end()
    return per_task, scores


def test_coarse_adaptation_runs_once_over_all_test_sets_of_an_evaluation(task):
    strategy, _ = build("meta-mbpa", task)
    assert strategy.options.coarse_scope == "test_set"  # the paper: once for the testing set
    for batch in stream_batches(task):
        strategy.observe(batch)
    stream = toy_stream(n_test=8)
    every = [task(list(t.test[i : i + 4])) for t in stream for i in range(0, len(t.test), 4)]
    expected = torch.cat(strategy.predict_set(every))  # one set of both tasks' inputs
    assert strategy.counts.coarse_adaptations == 1
    per_task, scores = evaluate_with_all_test_sets(strategy, stream, task)
    assert strategy.counts.coarse_adaptations == 2  # one more for the whole evaluation
    torch.testing.assert_close(torch.cat([torch.cat(p) for p in per_task]), expected)
    assert all(0.0 <= s["accuracy"] <= 100.0 for s in scores)
    assert strategy._evaluation_params is None  # dropped at on_eval_end


def test_coarse_scope_task_adapts_once_per_task_test_set(task):
    strategy, _ = build("meta-mbpa", task, coarse_scope="task")
    for batch in stream_batches(task):
        strategy.observe(batch)
    stream = toy_stream(n_test=8)
    own = [
        torch.cat(strategy.predict_set([task(list(t.test[i : i + 4])) for i in range(0, 8, 4)]))
        for t in stream
    ]
    per_task, _ = evaluate_with_all_test_sets(strategy, stream, task)
    assert strategy.counts.coarse_adaptations == 2 + 2 * 2  # per set: predict_set, then scores
    for mine, theirs in zip(per_task, own):
        torch.testing.assert_close(torch.cat(mine), theirs)
    pooled, _ = build("meta-mbpa", task)
    pooled.load_state_dict(strategy.state_dict())
    together, _ = evaluate_with_all_test_sets(pooled, stream, task)
    assert not torch.allclose(torch.cat(together[0]), own[0])  # task vs test-set pools differ


def test_meta_mbpa_write_rule_reaches_its_diversity_policy(task):
    assert MetaMbPAOptions().write_rule == "dissimilar"
    strategy, _ = build("meta-mbpa", task, write_rule="literal")
    assert strategy.memory.policy.rule == "literal"
    with pytest.raises(ValueError, match="write_rule"):
        MetaMbPAOptions(write_rule="similar")


def test_coarse_adaptation_over_all_test_sets_with_an_empty_memory_keeps_the_base_weights(task):
    strategy, context = build("meta-mbpa", task)
    stream = toy_stream(n_test=8)
    per_task, _ = evaluate_with_all_test_sets(strategy, stream, task)
    assert strategy.counts.coarse_adaptations == 0
    with torch.no_grad():
        context.model.eval()
        for scores, t in zip(per_task, stream):
            first = task(list(t.test[:4]))  # the first batch of the task's test set
            torch.testing.assert_close(
                scores[0], context.model(first.input_ids, first.attention_mask)
            )


def test_coarse_lora_adaptation_moves_the_predictions_and_never_the_weights(task):
    strategy, context = filled_meta_mbpa(task, adapt_scope="lora", adapt_lr=0.05, steps=3)
    test = task(list(toy_stream().tasks[0].test))
    before = snapshot(context.model)
    with torch.no_grad():
        plain = context.model.eval()(*test.inputs())
    adapted = strategy.predict(test)
    assert adapted.shape == plain.shape and (adapted - plain).abs().max() > 1e-3
    assert strategy.counts.coarse_adaptations == 1
    assert all(torch.equal(p, before[n]) for n, p in context.model.named_parameters())


@pytest.mark.parametrize("name", ["oml-er", "anml-er"])
def test_on_fewrel_the_meta_test_adapts_once_per_evaluation_as_holla(name):
    """Holla's rel_oml.py / rel_anml.py meta-test once, then score the pooled test set of every
    cluster; text classification (cls_oml.py) meta-tests once per dataset's test set."""
    from lifelong.experiment.config import from_dict
    from lifelong.experiment.runs import build_model
    from lifelong.learner import run_stream
    from lifelong.strategy import StrategyContext
    from tests.cuda_emulation.test_autocast import KINDS, stream_of
    from tests.lifelong.strategies.test_evaluation_leaves_training_alone import options_for

    counts = {}
    for kind in ("relation-binary", "classification"):
        stream_name, keys = KINDS[kind]
        stream = stream_of(kind)
        config = from_dict({"stream": stream_name, "encoder": "tiny", **keys})
        model, task = build_model(
            config.encoder, config.task_settings(), stream, seed=config.training.seed
        )
        context = StrategyContext(model, task, lr=1e-3, batch_size=4, seed=0)
        strategy = registry.build(name, context, options_for(name))
        run_stream(stream, strategy, task, batch_size=4, eval_batch_size=4, progress=False)
        counts[kind] = strategy.report()["meta_tests"]
    tasks = 2  # evaluations with a memory to meta-test from: after each task
    assert counts == {"relation-binary": tasks, "classification": tasks * tasks}
