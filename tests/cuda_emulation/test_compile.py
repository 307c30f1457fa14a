"""``--compile`` compiles a few graphs once and reuses them: the recompile budget.

The encoder is compiled with a counting backend (it runs the captured graph eagerly, so the test
measures dynamo's work, not inductor's), and each strategy trains and evaluates through the
learner: batches of varying size and length, grad and no-grad, local adaptation and
meta-learning under ``torch.func``.
"""

import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters

from lifelong import registry
from lifelong.learner import run_stream
from lifelong.runtime import compile_module, compile_report
from lifelong.strategy import StrategyContext
from lifelong.training import seed_everything
from tests.conftest import tiny_classifier, toy_stream
from tests.lifelong.strategies.test_evaluation_leaves_training_alone import options_for

GRAPHS = 4  # forward with and without grad, in training and evaluation mode


@pytest.mark.parametrize(
    "name, options",
    [
        ("seq", {}),
        ("replay", {}),
        ("mbpa++", {"adapt_path": "reference"}),
        ("mbpa++", {"adapt_path": "fast"}),
        ("maml-er", {}),
    ],
    ids=["seq", "replay", "mbpa++-reference", "mbpa++-fast", "maml-er"],
)
def test_a_compiled_encoder_compiles_a_few_graphs_and_never_falls_back(name, options, task, caplog):
    """Failure 5: HFEncoder.forward recompiled on length, batch size and grad mode, and under
    torch.func (MbPA++'s reference path, MAML-ER) until dynamo's limit, then ran eager."""
    torch._dynamo.reset()
    counters.clear()
    seed_everything(0)
    model = tiny_classifier(kind=task)
    backend = CompileCounter()
    compile_module(model.encoder, backend=backend)
    context = StrategyContext(model, task, lr=1e-3, batch_size=4, seed=0)
    strategy = registry.build(name, context, {**options_for(name), **options})
    stream = toy_stream(n_train=22, n_test=9)  # a last batch of another size
    result = run_stream(stream, strategy, task, batch_size=4, eval_batch_size=4, progress=False)
    report = compile_report()
    if name == "seq":  # the cost meter counts the compiled model's calls, from outside it
        train = sum(len(t.train) for t in stream.tasks)
        assert (
            result.cost["train"]["forward_rows"] == result.cost["train"]["backward_rows"] == train
        )
    assert backend.frame_count <= GRAPHS and report["graphs"] <= GRAPHS, report
    assert report["failed"] == 0, dict(counters["unimplemented"])
    assert "cache_size_limit" not in caplog.text and "recompile_limit" not in caplog.text
