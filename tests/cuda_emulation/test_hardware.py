"""Faked hardware: what the run chooses on GPUs this machine does not have.

A pre-Ampere GPU (no bfloat16 units), faiss-gpu (which holds only exact and IVF indexes), and a
host with two GPUs shared by a sweep's workers.
"""

from pathlib import Path

import pytest
import torch

from lifelong.experiment.config import ConfigError, from_dict, preflight
from lifelong.memory import search
from lifelong.runtime import DeviceError, Runtime

GPUS = {  # name -> compute capability
    "Tesla V100-SXM2-16GB": (7, 0),
    "Tesla T4": (7, 5),
    "NVIDIA A100-SXM4-40GB": (8, 0),
    "NVIDIA H100 80GB HBM3": (9, 0),
}


def fake_gpus(monkeypatch, name, count=1):
    """``count`` CUDA devices named ``name`` (torch.cuda answers as on such a host)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: GPUS[name])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    # CUDA emulates bf16 on every GPU it supports: this is what made `auto` pick it on a V100
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)


@pytest.mark.parametrize("name", ["Tesla V100-SXM2-16GB", "Tesla T4"])
def test_auto_precision_is_fp32_where_bf16_would_be_emulated(name, monkeypatch):
    """Failure 6: `auto` asked is_bf16_supported(), true where bf16 is emulated (V100, T4)."""
    fake_gpus(monkeypatch, name)
    assert Runtime.resolve("cuda", "auto").precision == "fp32"
    assert Runtime.resolve("cuda", "fp16").precision == "fp16"
    with pytest.raises(DeviceError, match=r"compute capability 7\.\d\) has no bfloat16 units"):
        Runtime.resolve("cuda", "bf16")


@pytest.mark.parametrize("name", ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"])
def test_auto_precision_is_bf16_on_ampere_and_later(name, monkeypatch):
    fake_gpus(monkeypatch, name)
    assert Runtime.resolve("cuda", "auto").precision == "bf16"
    assert Runtime.resolve("cuda:0", "bf16").precision == "bf16"


class FakeGpuResources:
    pass


def fake_faiss_gpu(monkeypatch, refuses=("HNSW",)):
    """faiss-gpu's API on faiss-cpu: index_cpu_to_gpu refuses what the GPU build refuses."""
    faiss = pytest.importorskip("faiss")
    moved = []

    def index_cpu_to_gpu(resources, device, index):
        kind = type(index).__name__
        if any(word in kind for word in refuses):
            raise RuntimeError(f"Error in faiss::gpu::index_cpu_to_gpu: {kind} not supported")
        moved.append(kind)
        return index

    monkeypatch.setattr(faiss, "StandardGpuResources", FakeGpuResources, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1, raising=False)
    monkeypatch.setattr(faiss, "index_cpu_to_gpu", index_cpu_to_gpu, raising=False)
    monkeypatch.setattr(search, "_GPU_RESOURCES", {})
    return moved


def test_faiss_gpu_never_gets_an_index_it_cannot_hold(monkeypatch):
    """Failure 7: with faiss-gpu installed every index went to the GPU; HNSW32 raised at the
    first search, after a task of training."""
    moved = fake_faiss_gpu(monkeypatch)
    cuda = torch.device("cuda", 0)
    assert search.choose_backend(cuda, "HNSW32") == "faiss"  # FAISS on the CPU
    assert search.choose_backend(cuda, "IVF64,Flat") == "faiss-gpu"
    assert search.choose_backend(cuda, "Flat") == "faiss-gpu"
    search.build_index(16, "HNSW32", cuda, search.choose_backend(cuda, "HNSW32"))
    search.build_index(16, "IVF4,Flat", cuda, "faiss-gpu")
    assert moved == ["IndexIVFFlat"]


def test_preflight_tries_the_gpu_index_before_anything_loads(monkeypatch, tmp_path):
    fake_faiss_gpu(monkeypatch, refuses=("IVFPQ",))
    fake_gpus(monkeypatch, "NVIDIA H100 80GB HBM3")
    out = {"output_dir": str(tmp_path)}
    preflight(from_dict({"encoder": "tiny", "device": "cuda", "memory_index": "HNSW32", **out}))
    with pytest.raises(ConfigError, match=r"memory_index.*'IVF16,PQ8': faiss-gpu cannot hold"):
        preflight(
            from_dict({"encoder": "tiny", "device": "cuda", "memory_index": "IVF16,PQ8", **out})
        )


def report_visible_devices(config, run_dir, threads):
    """Stands in for a sweep point: which GPUs its worker sees, and when it ran."""
    import os
    import time

    from lifelong.experiment.sweep import PointResult

    began = time.time()
    time.sleep(0.5)  # long enough for both workers to hold a point at once
    seen = f"{os.environ.get('CUDA_VISIBLE_DEVICES')}|{config['device']}|{began}|{time.time()}"
    return PointResult(run_dir, "finished", error=seen)


def test_concurrent_sweep_workers_on_a_two_gpu_host_each_have_their_own(tmp_path, monkeypatch):
    """Failure 8: GPUs were assigned by point index, so concurrent points shared a GPU; the
    local backend ignored --gpus-per-run; the assigned cuda:N was saved in the run's config."""
    from lifelong.experiment import sweep as sweeps

    monkeypatch.setattr(sweeps, "_visible_gpus", lambda: 2)
    payloads = [({"device": "auto"}, str(tmp_path / f"p{i}"), 1) for i in range(6)]
    devices = sweeps.worker_devices(2, sweeps._visible_gpus())
    results = sweeps._run_on_pool(payloads, 2, None, devices, work=report_visible_devices)
    runs = [r.error.split("|") for r in results]
    assert {gpu for gpu, *_ in runs} == {"0", "1"}
    assert {device for _, device, *_ in runs} == {"auto"}  # the config keeps its device
    for i, (gpu, _, start, end) in enumerate(runs):  # points running at once: other GPUs
        for other, _, start2, end2 in runs[i + 1 :]:
            if float(start) < float(end2) and float(start2) < float(end):
                assert gpu != other
    shared = sweeps.worker_devices(4, 2, 0.5)
    assert sorted(shared) == ["0", "0", "1", "1"]


def test_sweep_points_keep_their_device_in_their_config(tmp_path, monkeypatch):
    from lifelong.experiment import sweep as sweeps
    from tests.lifelong.experiment.test_sweep import tiny_sweep

    monkeypatch.setattr(sweeps, "_visible_gpus", lambda: 2)
    seen = []

    def pool(payloads, *args):
        seen.extend(payloads)
        return [sweeps.PointResult(Path(run_dir), "finished") for _, run_dir, _ in payloads]

    monkeypatch.setattr(sweeps, "_run_on_pool", pool)
    sweeps.run_sweep(tiny_sweep(tmp_path), jobs=2)
    assert [config["device"] for config, *_ in seen] == ["auto", "auto"]


def test_a_gpu_batch_is_copied_from_pinned_memory_on_a_side_stream(task, monkeypatch):
    """Failure 10: prefetched batches were copied from pageable memory on the default stream,
    so the copy could not overlap the model's work."""
    from lifelong.batch import Batch
    from lifelong.runtime import to_device

    calls = []

    class Stream:
        def __init__(self, device):
            calls.append(("stream", str(device)))

        def synchronize(self):
            calls.append(("synchronize",))

    class Using:
        def __init__(self, stream):
            self.stream = stream

        def __enter__(self):
            calls.append(("on side stream",))

        def __exit__(self, *exc):
            calls.append(("off side stream",))

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", Using)
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device: "default")
    monkeypatch.setattr(Batch, "pin_memory", lambda self: calls.append(("pin",)) or self)
    monkeypatch.setattr(
        Batch,
        "to",
        lambda self, device, non_blocking=False: calls.append(("copy", non_blocking)) or self,
    )
    monkeypatch.setattr(Batch, "record_stream", lambda self, s: calls.append(("record", s)))
    batch = task(toy_examples())
    to_device(batch, torch.device("cuda", 0))
    to_device(batch, torch.device("cuda", 0))  # the thread's stream is made once
    assert calls[:7] == [
        ("stream", "cuda:0"),
        ("on side stream",),
        ("pin",),
        ("copy", True),
        ("off side stream",),
        ("synchronize",),
        ("record", "default"),
    ]
    assert calls.count(("stream", "cuda:0")) == 1


def toy_examples():
    from tests.conftest import toy_stream

    return toy_stream().tasks[0].train[:3]


def test_deterministic_mode_sets_cublas_workspace_unless_given(monkeypatch):
    from lifelong.training import seed_everything

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    seed_everything(0)
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    seed_everything(0)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_lora_chunk_is_sized_from_free_gpu_memory(monkeypatch):
    from types import SimpleNamespace

    from lifelong.mechanisms.lowrank import lora_chunk

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (16 * 2**30, 16 * 2**30))
    minilm = SimpleNamespace(hidden_size=384, num_layers=6)
    bert_base = SimpleNamespace(hidden_size=768, num_layers=12)
    cuda = torch.device("cuda", 0)
    small, base = lora_chunk(minilm, 32, 128, cuda), lora_chunk(bert_base, 32, 128, cuda)
    assert small == 7 and base == 1  # 16 GB: not the fixed 16 sized for MiniLM
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 2**30, 80 * 2**30))
    assert lora_chunk(bert_base, 32, 128, cuda) == 9 and lora_chunk(minilm, 32, 64, cuda) == 64
