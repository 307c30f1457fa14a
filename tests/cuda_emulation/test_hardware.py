"""Faked hardware: what the run chooses on GPUs this machine does not have.

A pre-Ampere GPU (no bfloat16 units), faiss-gpu (which holds only exact and IVF indexes), and a
host with two GPUs shared by a sweep's workers.
"""

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
