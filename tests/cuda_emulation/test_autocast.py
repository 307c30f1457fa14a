"""Every strategy, task kind, adaptation scope and memory encoder under CUDA's autocast rules.

CPU autocast runs ``exp``, ``softmax``, ``layer_norm``, ``sum``... in the low precision; CUDA
autocast runs them in float32 (`autocast_rules`). Code that mixes the two (a bf16 buffer
``index_add_``-ed with an fp32 ``exp``) passes every CPU test and fails at step 1 on a GPU. Here
CPU autocast follows CUDA's lists, and each combination trains and evaluates in bf16 and fp16.
"""

import dataclasses

import numpy as np
import pytest
import torch

from lifelong import registry
from lifelong.encoders import load_run_encoder
from lifelong.encoders.names import MEMORY_FAMILIES
from lifelong.experiment.config import from_dict
from lifelong.experiment.runs import build_model
from lifelong.learner import run_stream
from lifelong.runtime import Runtime
from lifelong.strategy import StrategyContext, supports
from lifelong.streams.fewrel import hashed_bag_of_words
from lifelong.streams.registry import build_stream, stream_spec
from lifelong.tasks.prepared import on_device
from lifelong.training import seed_everything
from tests.cuda_emulation.autocast_rules import check_tables_against_installed_torch
from tests.lifelong.strategies.test_evaluation_leaves_training_alone import options_for

PRECISIONS = ("bf16", "fp16")
KINDS = {  # task kind -> (stream, run-config keys)
    "classification": ("text", {"tasks": ["ag_news", "yelp"], "train_size": 8, "test_size": 4}),
    "relation-binary": ("fewrel", {"fewrel_tasks": 2, "train_size": 1, "test_size": 1}),
    "relation-softmax": (
        "fewrel",
        {"fewrel_tasks": 2, "train_size": 1, "test_size": 1, "pair_loss": "softmax"},
    ),
    "qa": (
        "qa",
        {"tasks": ["squad", "quac"], "train_size": 4, "test_size": 2}
        | {"max_length": 96, "doc_stride": 32, "max_query_length": 24},
    ),
}
_STREAMS = {}


def stream_of(kind):
    """The kind's small stream, built once (FewRel clusters names by hashed words: no model)."""
    name, keys = KINDS[kind]
    if kind not in _STREAMS:
        shared = {k: v for k, v in keys.items() if k in ("tasks", "train_size", "test_size")}
        shared |= {k: v for k, v in keys.items() if k == "fewrel_tasks"}
        stream = build_stream(stream_spec(name, **shared), embed=hashed_bag_of_words)
        tasks = tuple(dataclasses.replace(t, train=t.train[:6], test=t.test[:3]) for t in stream)
        _STREAMS[kind] = dataclasses.replace(stream, tasks=tasks)  # a FewRel cluster: 6 + 3
    return _STREAMS[kind]


def runs_on(strategy, kind):
    """Whether ``strategy`` runs on the task kind of ``KINDS[kind]`` (ncm, ranpac: classification
    only; their refusal elsewhere is tested in tests/lifelong/experiment/test_cli.py)."""
    return supports(registry.get(strategy), "relation" if kind.startswith("relation") else kind)


STRATEGY_KINDS = [(s, k) for s in registry.available() for k in KINDS if runs_on(s, k)]
"""Every strategy with every task kind it runs on."""


def train_and_evaluate(strategy, kind, precision, encoder="tiny", **options):
    seed_everything(0)
    name, keys = KINDS[kind]
    config = from_dict({"stream": name, "encoder": encoder, "max_length": 48, **keys})
    if encoder in MEMORY_FAMILIES or encoder.startswith("memoria"):
        config = config.replace(segment_length=16)
    stream = stream_of(kind)
    model, task = build_model(
        config.encoder, config.task_settings(), stream, seed=config.training.seed
    )
    runtime = Runtime(torch.device("cpu"), precision)
    task = on_device(task, runtime.device)
    context = StrategyContext(model, task, lr=1e-3, batch_size=4, seed=0, runtime=runtime)
    built = registry.build(strategy, context, {**options_for(strategy), **options})
    result = run_stream(
        stream, built, task, batch_size=4, eval_batch_size=4, progress=False, runtime=runtime
    )
    assert np.isfinite(result.accuracy).all()
    return result


def test_the_rules_are_cuda_autocasts_for_the_installed_torch():
    assert check_tables_against_installed_torch() == {"missing": [], "extra": []}


def test_the_rules_make_the_gpu_only_failure_happen_on_the_cpu(cuda_rules):
    acc = torch.zeros(3, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.exp(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.float32
        with pytest.raises(RuntimeError, match="same scalar type"):
            acc.index_add_(0, torch.tensor([0]), torch.exp(torch.ones(1, dtype=torch.bfloat16)))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("strategy", "kind"), STRATEGY_KINDS)
def test_every_strategy_and_task_kind_trains_and_evaluates(strategy, kind, precision, cuda_rules):
    """Failure 3 among them: FewRel's softmax pair loss under bf16 (index_add_ of exp)."""
    train_and_evaluate(strategy, kind, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("scope", ["all", "head", "top1", "lora"])
@pytest.mark.parametrize("strategy, path", [("mbpa++", "reference"), ("mbpa++", "fast"),
                                            ("mbpa", "fast"), ("meta-mbpa", "fast")])  # fmt: skip
def test_every_adaptation_scope_and_path_adapts(strategy, path, scope, precision, cuda_rules):
    options = {"adapt_scope": scope, "adapt_path": path}
    if strategy == "meta-mbpa":
        options.pop("adapt_path")
    train_and_evaluate(strategy, "classification", precision, **options)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("encoder", [*MEMORY_FAMILIES, "memoria-tiny"])
def test_every_memory_encoder_trains_and_evaluates(encoder, precision, cuda_rules):
    train_and_evaluate("replay", "classification", precision, encoder=encoder)


@pytest.mark.parametrize(
    "flags",
    [
        ["--stream", "fewrel", "--pair-loss", "softmax", "--fewrel-tasks", "2"]
        + ["--train-size", "1", "--test-size", "1"],
        ["--stream", "qa", "--tasks", "squad,quac", "--train-size", "4", "--test-size", "2"]
        + ["--max-length", "160", "--doc-stride", "32"],
    ],
    ids=["fewrel-softmax", "qa"],
)
def test_bf16_runs_complete_under_cudas_rules(flags, tmp_path, cuda_rules, capsys):
    """The issue's acceptance runs: FewRel with the softmax pair loss, and QA, in bf16."""
    from lifelong.experiment.cli import main

    args = ["run", "--encoder", "tiny", "--precision", "bf16", "--device", "cpu"]
    args += ["--no-progress", "--output-dir", str(tmp_path), "--batch-size", "4"]
    assert main([*args, *flags]) == 0, capsys.readouterr().err[-2000:]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("encoder", [*MEMORY_FAMILIES, "memoria-tiny"])
def test_memory_encoders_carry_memory_across_segments(encoder, precision, cuda_rules):
    """`test_memory_augmented_encoders_train_on_cuda_in_bf16` on the CPU: three segments.

    The later segments read and write memory written under autocast; the ∞-former's LTM update
    failed here only on an H100 before the emulation used CUDA's full table.
    """
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    encoder_module = load_run_encoder(encoder, seed=0, segment_length=16).train()
    ids = torch.randint(5, 1000, (2, 40), generator=torch.Generator().manual_seed(0))  # (b, t)
    with torch.autocast(device_type="cpu", dtype=dtype):
        out = encoder_module(ids, torch.ones_like(ids))
        out.pooled.float().sum().backward()
    assert torch.isfinite(out.pooled).all()
    assert any(p.grad is not None for p in encoder_module.parameters())


def test_index_copy_does_not_promote_under_cudas_rules(cuda_rules):
    """CPU autocast promotes ``index_copy``'s inputs; CUDA autocast does not, and raises."""
    target, rows = torch.zeros(3, 4), torch.tensor([0])  # fp32
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        source = torch.ones(1, 4) @ torch.eye(4)  # matmul: bf16 under autocast
        with pytest.raises(RuntimeError, match="same dtype"):
            target.index_copy(0, rows, source)
