"""Tensors made where the run's device is: the CPU stands for a GPU as the ``meta`` device.

Tensors on ``meta`` have shapes and dtypes but no data, and any operation mixing them with CPU
tensors fails as mixing CUDA and CPU tensors does. Code that creates a tensor without naming a
device (an ``arange`` or ``eye`` on the CPU) next to device tensors fails here as on a GPU.
"""

import dataclasses

import pytest
import torch

from lifelong import registry
from lifelong.encoders.infinity_former import ContinuousSignal, update_design
from lifelong.experiment.checkpoint import load_checkpoint, save_checkpoint
from lifelong.learner import StreamPosition
from lifelong.runtime import Runtime, to_cpu
from lifelong.strategy import StrategyContext
from lifelong.streams.core import batches
from lifelong.tasks.prepared import on_device
from lifelong.training import seed_everything
from tests.conftest import tiny_classifier, toy_stream
from tests.cuda_emulation.devices import DeviceTensor, batch_on_gpu
from tests.lifelong.strategies.test_evaluation_leaves_training_alone import options_for


def test_the_infinity_former_design_is_made_on_the_memorys_device():
    """Failure 2: positions (arange) and the ridge (eye) were made on the CPU, next to the
    device buffers, at the first long-term-memory write."""
    signal = ContinuousSignal(16, (0.01, 0.05), ridge=0.5, tau=0.5, samples=8).to("meta")
    like = torch.empty(2, 4, 8, device="meta")
    design = signal.design(8, 4, like)  # (M + L, N)
    assert design.device.type == "meta" and design.shape == (12, 16)
    first = update_design(0, 4, 0.5, signal.centres, signal.widths, 0.5)
    assert first.device.type == "meta" and first.shape == (4, 16)


def reachable_tensors(root):
    """Every tensor reachable from ``root`` through the project's objects, with its path.

    Walks dicts, lists, tuples, dataclasses, modules (parameters, buffers, submodules),
    optimisers (their state) and the attributes of `lifelong`/`strategies` objects.
    """
    seen, stack = set(), [("strategy", root)]
    while stack:
        path, obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            yield path, obj
            continue
        if isinstance(obj, dict):
            items = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
        elif isinstance(obj, list | tuple):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
        elif isinstance(obj, torch.optim.Optimizer):
            items = [(f"{path}.state", list(obj.state.values()))]
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            items = [(f"{path}.{f.name}", getattr(obj, f.name)) for f in dataclasses.fields(obj)]
        elif isinstance(obj, torch.nn.Module) or type(obj).__module__.startswith(OURS):
            items = [(f"{path}.{k}", v) for k, v in vars(obj).items()]
        else:
            continue
        stack.extend(items)


OURS = ("lifelong", "tests")


@pytest.mark.filterwarnings("ignore:for .*copying from a non-meta parameter")
@pytest.mark.parametrize("name", registry.available())
def test_a_cpu_checkpoint_resumes_with_every_tensor_on_the_runs_device(name, task, tmp_path):
    """Failure 4: checkpoints loaded on the CPU left EWC's Fisher and anchor, pending episode
    batches (a dataclass `to_cpu` did not enter) and more on the CPU of a GPU run."""
    seed_everything(0)
    stream = toy_stream(n_train=20, n_test=8)
    context = StrategyContext(tiny_classifier(kind=task), task, lr=1e-3, batch_size=4, seed=0)
    trained = registry.build(name, context, options_for(name))
    getattr(trained, "on_stream_start", lambda stream: None)(stream)
    for i, t in enumerate(stream):  # a task boundary (EWC's Fisher), then episodes pending
        getattr(trained, "on_task_start", lambda i: None)(i)
        for chunk in list(batches(t.train, 4, shuffle=True, seed=i))[: 5 if i == 0 else 4]:
            trained.observe(task(chunk))
        if i == 0:
            getattr(trained, "on_task_end", lambda i: None)(i)
    save_checkpoint(tmp_path, trained, StreamPosition(task=1, step=3))

    meta = torch.device("meta")
    runtime = Runtime(meta, "fp32")
    model = tiny_classifier(kind=task).to(meta)
    context = StrategyContext(model, on_device(task, meta), lr=1e-3, batch_size=4, seed=0,
                              runtime=runtime)  # fmt: skip
    resumed = registry.build(name, context, options_for(name))
    resumed.load_state_dict(load_checkpoint(tmp_path).strategy)  # the file loads on the CPU
    elsewhere = [p for p, t in reachable_tensors(resumed) if t.device != meta and not step(p)]
    assert not elsewhere, elsewhere[:5]


def step(path):
    """An optimiser's step count: torch keeps it on the host unless the optimiser is
    ``capturable`` or ``fused`` (`torch.optim.Optimizer.load_state_dict`), on purpose."""
    return ".optimizer.state[" in path and path.endswith("['step']")


def test_to_cpu_enters_dataclasses(task):
    """A pending episode's `Batch` (a dataclass) was saved with its device tensors."""
    batch = batch_on_gpu(task(toy_stream().tasks[0].train[:3]))
    moved = to_cpu({"pending": [batch]})["pending"][0]
    assert type(moved.input_ids) is torch.Tensor and type(moved.labels) is torch.Tensor
    assert type(batch.input_ids) is DeviceTensor  # a copy
