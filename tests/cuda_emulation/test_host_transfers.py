"""Device batches are never turned into NumPy arrays by accident, and hot loops sync little.

Every task kind's batches are `DeviceTensor`s here (they refuse ``np.asarray`` as CUDA tensors
do, and count host syncs); each strategy trains, predicts and is scored through them.
"""

import numpy as np
import pytest

from lifelong import registry
from lifelong.experiment.config import from_dict
from lifelong.experiment.runs import build_model
from lifelong.learner import evaluate_metrics, run_stream
from lifelong.strategy import StrategyContext
from lifelong.streams.core import batches
from lifelong.training import seed_everything
from tests.cuda_emulation.devices import GpuKind, count_syncs
from tests.cuda_emulation.test_autocast import KINDS, STRATEGY_KINDS, stream_of
from tests.lifelong.strategies.test_evaluation_leaves_training_alone import options_for


def built(strategy, kind, **options):
    seed_everything(0)
    name, keys = KINDS[kind]
    config = from_dict({"stream": name, "encoder": "tiny", "max_length": 48, **keys})
    stream = stream_of(kind)
    model, task = build_model(
        config.encoder, config.task_settings(), stream, seed=config.training.seed
    )
    task = GpuKind(task)
    context = StrategyContext(model, task, lr=1e-3, batch_size=4, seed=0)
    return stream, task, registry.build(strategy, context, {**options_for(strategy), **options})


@pytest.mark.parametrize(("strategy", "kind"), STRATEGY_KINDS)
def test_every_strategy_trains_predicts_and_scores_device_batches(strategy, kind):
    """Failure 1: QA evaluation called np.asarray on a device tensor (TypeError on CUDA)."""
    stream, task, trained = built(strategy, kind)
    result = run_stream(stream, trained, task, batch_size=4, eval_batch_size=4, progress=False)
    assert np.isfinite(result.accuracy).all()


SYNC_CASES = [(name, kind, {}) for name, kind in STRATEGY_KINDS if kind != "relation-softmax"]
SYNC_CASES.append(("meta-mbpa", "classification", {"meta_scope": "head"}))
SYNC_CASES.append(("meta-mbpa", "relation-binary", {"meta_scope": "head"}))
PER_OBSERVE = 8  # a loss value, a memory write's keys, a replay draw...
PER_ADAPTED_EXAMPLE = 8  # the packed attention's data-dependent shapes, the prediction


def syncs(name, kind, k, batch_size, **options):
    """Host syncs of one observe (memory already filled) and of evaluating 4 test examples."""
    fields = set(registry.get(name).Options.__dataclass_fields__)
    stream, task, strategy = built(name, kind, **({"k": k} if "k" in fields else {}), **options)
    getattr(strategy, "on_stream_start", lambda stream: None)(stream)
    getattr(strategy, "on_task_start", lambda i: None)(0)
    chunks = list(batches(stream.tasks[0].train, batch_size, shuffle=True, seed=0))
    for chunk in chunks[:-1]:
        strategy.observe(task(chunk))
    with count_syncs() as observed:
        strategy.observe(task(chunks[-1]))
    getattr(strategy, "on_task_end", lambda i: None)(0)
    with count_syncs() as evaluated:
        evaluate_metrics(strategy, stream.tasks[0].test[:4], task, batch_size=4, progress=False)
    return sum(observed.values()), sum(evaluated.values()) / 4, dict(observed), dict(evaluated)


@pytest.mark.parametrize("name, kind, options", SYNC_CASES, ids=str)
def test_host_syncs_per_step_do_not_grow_with_neighbours_or_batch(name, kind, options):
    """Failure 9: a .cpu() per neighbour (Meta-MbPA), per example (FewRel scoring, row lookups).

    K and the batch grow fourfold; the syncs of one observe and of one adapted test example
    must not grow with them, and stay within a small budget.
    """
    small = syncs(name, kind, 2, 2, **options)
    large = syncs(name, kind, 8, 8, **options)
    assert large[0] <= PER_OBSERVE and large[1] <= PER_ADAPTED_EXAMPLE, large
    assert large[0] <= small[0] + 1 and large[1] <= small[1] + 0.5, (small, large)
