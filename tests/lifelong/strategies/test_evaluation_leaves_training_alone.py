"""Evaluating after every task must not change what a strategy learns (for every strategy)."""

import dataclasses

import pytest
import torch

from lifelong import registry
from lifelong.learner import evaluate_all
from lifelong.strategy import StrategyContext
from lifelong.streams.core import batches
from lifelong.training import seed_everything
from tests.conftest import tiny_classifier, toy_stream

# small enough that replay, episodes, meta-tests and coarse adaptation all happen on the toy stream
SMALL = {
    "projection": 64,  # RanPAC's M (10,000 by default: a 10,000 x 10,000 solve)
    "replay_every": 8,
    "replay_ratio": 0.5,
    "support_batches": 2,
    "k": 3,
    "write_rate": 1.0,
    "steps": 2,
    "epochs": 1,
}


def options_for(name):
    fields = {f.name for f in dataclasses.fields(registry.get(name).Options)}
    return {k: v for k, v in SMALL.items() if k in fields}


def train(name, task, evaluate_every_task):
    seed_everything(0)
    stream = toy_stream(n_train=20, n_test=8)  # 5 batches: episodes straddle tasks
    model = tiny_classifier(kind=task)
    context = StrategyContext(model, task, lr=1e-3, batch_size=4, seed=0)
    strategy = registry.build(name, context, options_for(name))
    getattr(strategy, "on_stream_start", lambda stream: None)(stream)
    for i, t in enumerate(stream):
        getattr(strategy, "on_task_start", lambda i: None)(i)
        for chunk in batches(t.train, 4, shuffle=True, seed=i):
            strategy.observe(task(chunk))
        getattr(strategy, "on_task_end", lambda i: None)(i)
        if evaluate_every_task or i == len(stream) - 1:
            evaluate_all(strategy, stream, task, batch_size=4, progress=False)
    module = getattr(strategy, "net", model)
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("name", registry.available())
def test_a_run_evaluated_after_every_task_ends_with_the_weights_of_one_evaluated_once(name, task):
    every = train(name, task, evaluate_every_task=True)
    once = train(name, task, evaluate_every_task=False)
    assert every.keys() == once.keys()
    changed = [k for k in every if not torch.equal(every[k], once[k])]
    assert not changed, f"{name}: evaluation changed {changed[:3]}"
