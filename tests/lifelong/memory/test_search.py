"""The device search returns FAISS's exact neighbours; the backend is chosen by device and index."""

import numpy as np
import pytest
import torch

from lifelong.memory import EpisodicMemory, ReservoirWrite
from lifelong.memory import search as search_module
from lifelong.memory.search import TorchFlatIndex, build_index, choose_backend
from tests.conftest import write
from tests.lifelong.memory.test_episodic import filled


def keys_and_queries(n=3000, d=32, q=64, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(n, d)).astype(np.float32),
        rng.normal(size=(q, d)).astype(np.float32),
    )


def test_torch_search_gives_the_neighbours_of_faiss_flat_l2():
    keys, queries = keys_and_queries()
    faiss_index = build_index(32, "Flat", torch.device("cpu"), "faiss")
    torch_index = TorchFlatIndex(32, "cpu", chunk_bytes=4 * 3000 * 10)  # 10 queries a chunk
    for index in (faiss_index, torch_index):
        index.add(keys[:2000])
        index.add(keys[2000:])  # added in two parts, as memory grows
    d_faiss, i_faiss = faiss_index.search(queries, 32)
    d_torch, i_torch = torch_index.search(queries, 32)
    assert torch_index.ntotal == faiss_index.ntotal == 3000
    np.testing.assert_array_equal(i_torch, i_faiss)
    np.testing.assert_allclose(d_torch, d_faiss, rtol=1e-4, atol=1e-4)


def test_torch_search_runs_in_fp32_under_a_bf16_autocast():
    keys, queries = keys_and_queries(n=500, d=16, q=8)
    index = TorchFlatIndex(16, "cpu")
    index.add(keys)
    plain = index.search(queries, 10)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        mixed = index.search(queries, 10)
    np.testing.assert_array_equal(mixed[1], plain[1])
    assert mixed[0].dtype == np.float32


def test_a_memory_searching_with_torch_follows_writes_and_overwrites_like_faiss():
    def reservoir(backend):
        memory = EpisodicMemory(2, policy=ReservoirWrite(capacity=3), seed=0, backend=backend)
        write(memory, [np.array([1])] * 3, np.zeros(3), np.array([[0, 0], [10, 0], [20, 0]]))
        first = memory.nearest(np.array([[19.0, 0.0]]), 1)
        for _ in range(50):
            write(memory, [np.array([2])], np.ones(1), np.array([[100.0, 100.0]]))
        return first, memory.nearest(np.array([[100.0, 100.0], [0.0, 0.0]]), 3)

    (first_t, after_t), (first_f, after_f) = reservoir("torch"), reservoir("faiss")
    np.testing.assert_array_equal(first_t[1], first_f[1])
    np.testing.assert_array_equal(after_t[1], after_f[1])
    np.testing.assert_allclose(after_t[0], after_f[0])


def test_a_restored_memory_keeps_its_device_and_backend():
    memory, *_ = filled(n=40, d=8, backend="torch")
    again = EpisodicMemory(8, backend="torch")
    again.load_state_dict(memory.state_dict())
    assert again.backend == "torch" and len(again) == 40
    queries = np.random.default_rng(2).normal(size=(5, 8)).astype(np.float32)
    np.testing.assert_array_equal(again.nearest(queries, 4)[1], memory.nearest(queries, 4)[1])


def test_backends_are_chosen_by_device_index_and_what_is_installed(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)  # a device name needs no GPU
    assert choose_backend(cpu, "Flat") == "faiss"
    assert choose_backend(cpu, "Flat", "torch") == "torch"
    monkeypatch.setattr(search_module, "faiss_has_gpu", lambda: False)
    assert choose_backend(cuda, "Flat") == "torch"  # exact search on the GPU itself
    assert choose_backend(cuda, "HNSW32") == "faiss"  # approximate: FAISS on the CPU
    monkeypatch.setattr(search_module, "faiss_has_gpu", lambda: True)
    assert choose_backend(cuda, "Flat") == "faiss-gpu"
    with pytest.raises(ValueError, match="'HNSW32'.*'Flat' .exact. or 'IVF<n>,Flat' only"):
        choose_backend(cpu, "HNSW32", "torch")
    assert choose_backend(cpu, "IVF64,Flat", "torch") == "torch"  # TorchIVFIndex
    monkeypatch.setattr(search_module, "faiss_installed", lambda: False)
    assert choose_backend(cpu, "Flat") == "torch"  # no FAISS at all: still searches
    assert choose_backend(cpu, "IVF64,Flat") == "torch"
    with pytest.raises(ValueError, match="FAISS is not installed"):
        choose_backend(cpu, "HNSW32")


@pytest.mark.cuda
def test_a_memory_on_cuda_finds_the_neighbours_of_the_cpu_faiss_index():
    keys, queries = keys_and_queries(n=20_000, d=64, q=256)
    on_gpu = EpisodicMemory(64, device="cuda")
    on_cpu = EpisodicMemory(64, device="cpu")
    tokens = [np.array([1], dtype=np.int32)] * len(keys)
    for memory in (on_gpu, on_cpu):
        write(memory, tokens, np.zeros(len(keys)), keys)
    (gpu_d, gpu_i), (cpu_d, cpu_i) = on_gpu.nearest(queries, 32), on_cpu.nearest(queries, 32)
    # the same distances to fp32 error; the same ids wherever neighbours are not tied within it
    np.testing.assert_allclose(gpu_d, cpu_d, rtol=1e-4, atol=1e-4)
    gaps = np.diff(cpu_d, axis=1)  # (q, 31)
    clear = np.ones_like(cpu_i, dtype=bool)
    clear[:, 1:] &= gaps > 1e-3
    clear[:, :-1] &= gaps > 1e-3
    np.testing.assert_array_equal(gpu_i[clear], cpu_i[clear])
