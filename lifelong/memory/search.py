"""Where episodic memory's nearest-neighbour search runs: FAISS on the CPU, or on the run's device.

`EpisodicMemory` keeps its keys in a NumPy array and searches them through an index object
with FAISS's interface (``ntotal``, ``is_trained``, ``train``, ``add``, ``search``). Which
index depends on the device the run computes on (`lifelong.runtime`) and on what is installed:

* CPU: FAISS's index (``index_factory``), exact ``Flat`` L2 by default, as in MbPA++'s
  reference implementation (EM-in-LLL ``memory.py``, ``faiss.IndexFlatL2``);
* CUDA, with ``faiss-gpu`` installed (the ``gpu`` extra): the same FAISS index moved to the GPU
  (``faiss.index_cpu_to_gpu``);
* CUDA without ``faiss-gpu``, or no FAISS at all: `TorchFlatIndex`, an exact L2 search as one
  matmul and a top-k on the device, which returns FAISS's ``Flat`` neighbours (tested on the
  CPU against FAISS).
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

import numpy as np
import torch

Backend = Literal["auto", "faiss", "torch"]


class TorchFlatIndex:
    """Exact squared-L2 search over keys held on a torch device (FAISS ``IndexFlatL2``'s API).

    Distances are ‖q‖² + ‖k‖² − 2 q·k in fp32 with autocast off (a run in bf16 still searches
    in fp32), like FAISS's own exact search; queries are processed in chunks so the (q, N)
    distance matrix stays under ``chunk_bytes``.

    Args:
        dim: Key width.
        device: Where the keys live and the search runs.
        chunk_bytes: Bound on one chunk's distance matrix, in bytes.

    """

    is_trained = True

    def __init__(self, dim: int, device: torch.device | str, chunk_bytes: int = 1 << 30) -> None:
        self.d = dim
        self.device = torch.device(device)
        self.chunk_bytes = chunk_bytes
        self._keys = torch.zeros((0, dim), dtype=torch.float32, device=self.device)  # (N, d)
        self._norms = torch.zeros(0, dtype=torch.float32, device=self.device)  # (N,)

    @property
    def ntotal(self) -> int:
        """Keys in the index."""
        return int(self._keys.shape[0])

    def train(self, keys: np.ndarray) -> None:
        """Nothing to train (exact search)."""

    def add(self, keys: np.ndarray) -> None:
        """Append keys (n, d)."""
        new = torch.as_tensor(np.ascontiguousarray(keys, dtype=np.float32), device=self.device)
        self._keys = torch.cat([self._keys, new])
        self._norms = torch.cat([self._norms, (new * new).sum(dim=1)])

    @torch.no_grad()
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest keys of each query: squared distances and ids, (q, k) each."""
        q = torch.as_tensor(np.ascontiguousarray(queries, dtype=np.float32), device=self.device)
        rows = max(1, self.chunk_bytes // (4 * max(1, self.ntotal)))
        distances, ids = [], []
        with torch.autocast(device_type=self.device.type, enabled=False):
            for s in range(0, len(q), rows):
                part = q[s : s + rows]  # (c, d)
                d2 = (part * part).sum(1, keepdim=True) + self._norms - 2.0 * part @ self._keys.T
                top = torch.topk(d2.clamp_min_(0.0), k, dim=1, largest=False, sorted=True)
                distances.append(top.values)
                ids.append(top.indices)
        return (
            torch.cat(distances).cpu().numpy(),  # (q, k)
            torch.cat(ids).cpu().numpy().astype(np.int64),  # (q, k)
        )


def faiss_installed() -> bool:
    """Whether a FAISS build (``faiss-cpu`` or ``faiss-gpu``) can be imported."""
    return importlib.util.find_spec("faiss") is not None


def faiss_has_gpu() -> bool:
    """Whether the installed FAISS is a GPU build with a visible GPU (the ``gpu`` extra)."""
    if not faiss_installed():
        return False
    import faiss

    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def choose_backend(device: torch.device, index: str, backend: Backend = "auto") -> str:
    """Which search serves a memory: ``"faiss"``, ``"faiss-gpu"`` or ``"torch"``.

    ``auto``: FAISS on the CPU; on CUDA, FAISS's GPU build when installed, else the exact torch
    search on the device; the torch search also wherever FAISS is not installed.

    Raises:
        ValueError: An approximate index (IVF, HNSW, ...) where FAISS is missing, or asked of
            the torch search, which is exact only.

    """
    if backend == "torch" or (backend == "auto" and not faiss_installed()):
        if index != "Flat":
            why = "FAISS is not installed" if not faiss_installed() else "backend 'torch'"
            raise ValueError(
                f"index {index!r}: {why}; the torch search is exact ('Flat') only "
                "(install the cpu or gpu extra for FAISS's approximate indexes)"
            )
        return "torch"
    if device.type == "cuda":
        if faiss_has_gpu():
            return "faiss-gpu"
        return "torch" if index == "Flat" and backend == "auto" else "faiss"
    return "faiss"


def build_index(dim: int, spec: str, device: torch.device, backend: str) -> Any:
    """An empty index of ``spec`` for the backend `choose_backend` picked."""
    if backend == "torch":
        return TorchFlatIndex(dim, device)
    import faiss  # heavy: loaded on the first search, not when lifelong is imported

    index = faiss.index_factory(dim, spec, faiss.METRIC_L2)
    if backend == "faiss-gpu":
        gpu = device.index or 0
        if gpu not in _GPU_RESOURCES:  # one per GPU, kept for the process: FAISS's own advice
            _GPU_RESOURCES[gpu] = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(_GPU_RESOURCES[gpu], gpu, index)
    return index


_GPU_RESOURCES: dict[int, Any] = {}
