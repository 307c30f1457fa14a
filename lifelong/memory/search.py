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

``index: auto`` (the default) picks the index by the memory's size with `choose_index`, from
measurements on real keys (``experiments/bench/memory.py``); the memory re-chooses as it grows
and checks an approximate index's recall on its own keys (those it was not trained on) before
it uses it (`tune_nprobe`); `query_recall` measures it on the queries a run serves.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
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

    @property
    def nbytes(self) -> int:
        """Bytes the index holds: keys and their norms."""
        return (self._keys.numel() + self._norms.numel()) * 4

    def reset(self) -> None:
        """Remove every key (FAISS's ``reset``)."""
        self._keys = self._keys[:0]
        self._norms = self._norms[:0]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest keys of each query: squared distances and ids, (q, k) each."""
        q = torch.as_tensor(np.ascontiguousarray(queries, dtype=np.float32), device=self.device)
        distances, ids = torch_knn(self._keys, q, k, self._norms, self.chunk_bytes)
        return distances.cpu().numpy(), ids.cpu().numpy().astype(np.int64)


@torch.no_grad()
def torch_knn(
    keys: torch.Tensor,
    queries: torch.Tensor,
    k: int,
    norms: torch.Tensor | None = None,
    chunk_bytes: int = 1 << 30,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact k nearest keys under squared L2, as one matmul and a top-k per chunk of queries.

    Args:
        keys: The keys, (N, d) fp32.
        queries: The queries, (q, d) fp32, on the keys' device.
        k: Neighbours per query (at most N).
        norms: ‖key‖², (N,), if already known.
        chunk_bytes: Bound on one chunk's (c, N) distance matrix, in bytes.

    Returns:
        Squared distances and key ids, (q, k) each, nearest first.

    """
    if not len(queries):
        return queries.new_zeros((0, k)), torch.zeros((0, k), dtype=torch.long)
    norms = (keys * keys).sum(1) if norms is None else norms  # (N,)
    rows = max(1, chunk_bytes // (4 * max(1, len(keys))))
    distances, ids = [], []
    with torch.autocast(device_type=keys.device.type, enabled=False):
        for s in range(0, len(queries), rows):
            part = queries[s : s + rows]  # (c, d)
            d2 = (part * part).sum(1, keepdim=True) + norms - 2.0 * part @ keys.T  # (c, N)
            top = torch.topk(d2.clamp_min_(0.0), k, dim=1, largest=False, sorted=True)
            distances.append(top.values)
            ids.append(top.indices)
    return torch.cat(distances), torch.cat(ids)  # (q, k) each


class TorchIVFIndex:
    """Inverted-file search over keys held on a torch device, a matmul per list.

    The keys are split into ``nlist`` lists by their nearest centroid (k-means on a sample,
    `train`); a query compares itself with the centroids and scans the keys of its ``nprobe``
    nearest lists only. FAISS's ``IVF{nlist},Flat`` does the same one query at a time; here
    the queries that probe a list are scanned together, as one matmul and one top-k, which on
    two CPU cores scanned a key 2.5 to 3 times faster than FAISS
    (``experiments/bench/memory.py``). With ``nprobe = nlist`` the search is exact.

    The lists are shared among as many Python threads as torch has intra-op threads, each
    running its operations on one thread: a thousand small multi-threaded operations stall
    where other processes share the cores (OpenMP threads spin waiting for each other; 7 s
    instead of 0.4 s for 1,000 queries over 100,000 keys on two busy cores), one-thread ones
    do not. Torch's intra-op thread count is therefore 1 during a search, and restored after.

    Keys added after the lists were last laid out wait in a tail that every query scans
    exactly; the tail joins the lists once it holds a 32nd of the keys, so adds stay cheap.

    Args:
        dim: Key width.
        nlist: Number of lists.
        device: Where the keys live and the search runs.
        nprobe: Lists scanned per query (FAISS's default: 1).
        seed: Seed of the k-means initialisation.

    """

    def __init__(
        self, dim: int, nlist: int, device: torch.device | str, nprobe: int = 1, seed: int = 0
    ) -> None:
        if nlist < 1:
            raise ValueError(f"nlist must be >= 1, got {nlist}")
        self.d, self.nlist, self.nprobe, self.seed = dim, nlist, nprobe, seed
        self.device = torch.device(device)
        self.centroids: torch.Tensor | None = None  # (nlist, d)
        self.reset()

    @property
    def is_trained(self) -> bool:
        """Whether the centroids are set (`train`)."""
        return self.centroids is not None

    @property
    def ntotal(self) -> int:
        """Keys in the index."""
        return int(self._ids.shape[0] + self._tail_ids.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes the index holds: keys, norms, ids and lists, the tail and the centroids."""
        held = [self._keys, self._norms, self._ids, self._lists, self._tail, self._tail_ids]
        held += [self.centroids] if self.centroids is not None else []
        return sum(t.numel() * t.element_size() for t in held)

    def reset(self) -> None:
        """Remove every key; the centroids stay."""
        empty = torch.zeros((0, self.d), dtype=torch.float32, device=self.device)
        self._keys, self._norms = empty, empty[:, 0]  # (N, d), (N,): list by list
        self._ids = torch.zeros(0, dtype=torch.long, device=self.device)  # (N,) key ids
        self._lists = self._ids  # (N,) the list of each key, ascending
        self._offsets = [0] * (self.nlist + 1)  # list l holds keys [o[l], o[l + 1])
        self._tail, self._tail_ids = empty, self._ids  # (t, d), (t,): added since the layout

    @torch.no_grad()
    def train(self, keys: np.ndarray, iterations: int = 10) -> None:
        """Set the centroids by k-means (Lloyd's iterations) over ``keys`` (n >= nlist, d)."""
        x = torch.as_tensor(np.ascontiguousarray(keys, dtype=np.float32), device=self.device)
        if len(x) < self.nlist:
            raise ValueError(f"training needs at least nlist={self.nlist} keys, got {len(x)}")
        gen = torch.Generator().manual_seed(self.seed)
        centroids = x[torch.randperm(len(x), generator=gen)[: self.nlist].to(self.device)].clone()
        for _ in range(iterations):
            nearest = torch_knn(centroids, x, 1)[1][:, 0]  # (n,)
            sums = torch.zeros_like(centroids).index_add_(0, nearest, x)  # (nlist, d)
            counts = torch.bincount(nearest, minlength=self.nlist)  # (nlist,)
            empty = counts == 0  # an empty list takes a random key as its centroid
            refill = torch.randint(len(x), (int(empty.sum()),), generator=gen).to(self.device)
            centroids = sums / counts.clamp(min=1)[:, None]
            centroids[empty] = x[refill]
        self.centroids = centroids

    def add(self, keys: np.ndarray) -> None:
        """Append keys (n, d), ids continuing from `ntotal`."""
        if self.centroids is None:
            raise RuntimeError("TorchIVFIndex: train it before adding keys")
        new = torch.as_tensor(np.ascontiguousarray(keys, dtype=np.float32), device=self.device)
        if not len(new):
            return
        ids = torch.arange(self.ntotal, self.ntotal + len(new), device=self.device)
        self._tail = torch.cat([self._tail, new])
        self._tail_ids = torch.cat([self._tail_ids, ids])
        if len(self._tail) * 32 >= len(self._ids):
            self._lay_out()

    @torch.no_grad()
    def _lay_out(self) -> None:
        """Move the tail into the lists and sort every key by list."""
        nearest = [torch_knn(self.centroids, part, 1)[1][:, 0] for part in _parts(self._tail)]
        lists = torch.cat([self._lists, *nearest])  # (N,)
        order = torch.argsort(lists, stable=True)
        self._keys = torch.cat([self._keys, self._tail])[order]
        self._ids = torch.cat([self._ids, self._tail_ids])[order]
        self._lists = lists[order]
        self._norms = (self._keys * self._keys).sum(1)
        counts = torch.bincount(self._lists, minlength=self.nlist).cumsum(0)
        self._offsets = [0, *counts.tolist()]
        self._tail, self._tail_ids = self._tail[:0], self._tail_ids[:0]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest keys found: squared distances and ids, (q, k) each.

        Where fewer than ``k`` keys lie in the lists scanned, the rest are ``inf`` and -1, as
        in FAISS.
        """
        q = torch.as_tensor(np.ascontiguousarray(queries, dtype=np.float32), device=self.device)
        parts = [self._search(part, k) for part in _parts(q, 1024)]
        distances = torch.cat([d for d, _ in parts])  # (q, k)
        ids = torch.cat([i for _, i in parts])  # (q, k)
        return distances.cpu().numpy(), ids.cpu().numpy().astype(np.int64)

    @torch.no_grad()
    def _search(self, q: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        nprobe = min(self.nprobe, self.nlist)
        found_d = torch.full((len(q), nprobe + 1, k), torch.inf, device=self.device)
        found_i = torch.full((len(q), nprobe + 1, k), -1, dtype=torch.long, device=self.device)
        if len(self._ids):
            probes = torch_knn(self.centroids, q, nprobe)[1].reshape(-1)  # (q * p,) lists
            pairs = torch.argsort(probes, stable=True)  # (query, probe) pairs, list by list
            ends = torch.bincount(probes, minlength=self.nlist).cumsum(0).tolist()
            scans = [  # (list, its pairs): the lists some query probes
                (lst, pairs[start:end])
                for lst, (start, end) in enumerate(zip([0, *ends[:-1]], ends))
                if end > start and self._offsets[lst + 1] > self._offsets[lst]
            ]
            scans.sort(key=lambda s: -len(s[1]) * (self._offsets[s[0] + 1] - self._offsets[s[0]]))
            threads = torch.get_num_threads()
            with _one_thread_per_op(), ThreadPoolExecutor(threads) as pool:
                shares = [scans[t::threads] for t in range(threads)]  # the longest dealt first
                done = [r for part in pool.map(lambda s: self._scan(q, s, k), shares) for r in part]
            if done:
                who, dist, ids = (torch.cat(x) for x in zip(*done))
                found_d[who // nprobe, who % nprobe] = dist
                found_i[who // nprobe, who % nprobe] = ids
        if len(self._tail):
            top_d, top_i = torch_knn(self._tail, q, min(k, len(self._tail)))
            found_d[:, nprobe, : top_d.shape[1]] = top_d
            found_i[:, nprobe, : top_d.shape[1]] = self._tail_ids[top_i]
        best = torch.topk(found_d.reshape(len(q), -1), k, dim=1, largest=False)  # (q, k)
        ids = torch.gather(found_i.reshape(len(q), -1), 1, best.indices)
        return best.values.clamp_min(0.0), ids

    def _scan(
        self, q: torch.Tensor, scans: list[tuple[int, torch.Tensor]], k: int
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Each list's k nearest keys for the pairs probing it: (pairs, distances, ids)."""
        nprobe, out = min(self.nprobe, self.nlist), []
        for lst, pairs in scans:
            a, b = self._offsets[lst], self._offsets[lst + 1]
            x = q[pairs // nprobe]  # (r, d)
            d2 = torch.addmm(self._norms[a:b], x, self._keys[a:b].T, alpha=-2.0)  # (r, n)
            d2 += (x * x).sum(1, keepdim=True)  # ‖q‖² + ‖k‖² − 2 q·k
            top = torch.topk(d2, min(k, b - a), dim=1, largest=False)  # (r, <=k)
            pad = k - top.values.shape[1]  # a list shorter than k: inf and -1, as FAISS
            out.append(
                (
                    pairs,
                    torch.nn.functional.pad(top.values, (0, pad), value=torch.inf),
                    torch.nn.functional.pad(self._ids[a + top.indices], (0, pad), value=-1),
                )
            )
        return out


@contextmanager
def _one_thread_per_op() -> Iterator[None]:
    """Torch's intra-op thread count set to 1 for the block, then restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _parts(x: torch.Tensor, rows: int = 65_536) -> list[torch.Tensor]:
    return [x[s : s + rows] for s in range(0, len(x), rows)] or [x]


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

    ``auto``: FAISS on the CPU; on CUDA, FAISS's GPU build when installed and the index has a
    GPU version (`gpu_capable`: exact and IVF; HNSW is searched by FAISS on the CPU), else the
    exact torch search on the device; the torch search also wherever FAISS is not installed.

    Raises:
        ValueError: An index other than ``Flat`` and ``IVF<n>,Flat`` (e.g. HNSW) where FAISS is
            missing, or asked of the torch search.

    """
    if backend == "torch" or (backend == "auto" and not faiss_installed()):
        if index != "Flat" and not torch_ivf_lists(index):
            why = "FAISS is not installed" if not faiss_installed() else "backend 'torch'"
            raise ValueError(
                f"index {index!r}: {why}; the torch search is 'Flat' (exact) or "
                "'IVF<n>,Flat' only (install the cpu or gpu extra for FAISS's other indexes)"
            )
        return "torch"
    if device.type == "cuda":
        if faiss_has_gpu() and gpu_capable(index):
            return "faiss-gpu"
        return "torch" if index == "Flat" and backend == "auto" else "faiss"
    return "faiss"


GPU_INDEX = re.compile(r"Flat|IVF\d+,(?:Flat|PQ\d+(?:x\d+)?|SQ(?:4|6|8|fp16))")
"""The FAISS factory strings faiss-gpu holds on a GPU: exact and IVF indexes (FAISS's wiki,
"Faiss on the GPU": ``GpuIndexFlat``, ``GpuIndexIVFFlat``, ``GpuIndexIVFPQ``,
``GpuIndexIVFScalarQuantizer``). HNSW, PQ without IVF and the rest have no GPU version:
``index_cpu_to_gpu`` raises on them, so they are searched by FAISS on the CPU."""


def gpu_capable(index: str) -> bool:
    """Whether faiss-gpu can hold an index of the factory string ``index`` (`GPU_INDEX`)."""
    return bool(GPU_INDEX.fullmatch(index))


def check_gpu_index(index: str, device: torch.device, dim: int = 384) -> None:
    """On a GPU with faiss-gpu, check that the index ``index`` really goes to the GPU.

    Run before anything loads (preflight): an index `choose_backend` sends to the GPU is built
    empty and copied there now, so a factory string the GPU build refuses fails here, in one
    line, not at the first search after a task of training.

    Raises:
        ValueError: faiss-gpu refused the index (naming it and the reason).

    """
    if (
        device.type != "cuda"
        or index in (AUTO, TORCH)
        or choose_backend(device, index) != ("faiss-gpu")
    ):
        return
    try:
        build_index(dim, index, device, "faiss-gpu")
    except Exception as err:  # faiss raises RuntimeError (or its own) from C++
        raise ValueError(
            f"index {index!r}: faiss-gpu cannot hold it on {device} "
            f"({str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__})"
        ) from None


def torch_ivf_lists(spec: str) -> int:
    """The list count of an ``IVF<n>,Flat`` spec (`TorchIVFIndex`), else 0."""
    match = re.fullmatch(r"IVF(\d+),Flat", spec)
    return int(match.group(1)) if match else 0


def build_index(dim: int, spec: str, device: torch.device, backend: str) -> Any:
    """An empty index of ``spec`` for the backend `choose_backend` picked."""
    if backend == "torch":
        lists = torch_ivf_lists(spec)
        return TorchIVFIndex(dim, lists, device) if lists else TorchFlatIndex(dim, device)
    import faiss  # heavy: loaded on the first search, not when lifelong is imported

    index = faiss.index_factory(dim, spec, faiss.METRIC_L2)
    if backend == "faiss-gpu":
        gpu = device.index or 0
        if gpu not in _GPU_RESOURCES:  # one per GPU, kept for the process: FAISS's own advice
            _GPU_RESOURCES[gpu] = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(_GPU_RESOURCES[gpu], gpu, index)
    return index


_GPU_RESOURCES: dict[int, Any] = {}


# ---------------------------------------------------------------------------------------------
# index: auto
# ---------------------------------------------------------------------------------------------

AUTO = "auto"
"""The ``index`` value that lets the memory choose (`choose_index`)."""

TORCH = "torch"
"""The ``index`` value for the exact torch search on the run's device (`TorchFlatIndex`)."""

RECALL_TARGET = 0.95
"""The least recall@`CHECK_K` an approximate index must show before `index: auto` uses it."""

CHECK_K = 32
"""Neighbours per query of the recall check: MbPA++'s K (de Masson d'Autume et al., 2019)."""

CHECK_QUERIES = 256
"""Stored keys searched by the recall check (each for its neighbours among the others)."""

APPROXIMATE_FROM = 50_000
"""Keys from which `choose_index` tries an IVF index on the CPU (below: exact search).

At 50,000 mixture keys the checked IVF (256 lists, nprobe 80) found 0.973 of the 32 nearest
at 1.47 times exact speed. At 20,000, a quarter of 128 lists found only 0.920 (at 1.77
times), so the check would need more lists for a smaller gain, and exact search of 20,000
keys takes 0.28 s per 1,000 queries on two cores (``experiments/bench/memory.py``)."""


REGROW = 2.0
"""`index: auto` chooses again (and retrains an IVF index) when the memory has grown this much."""

TRAIN_PER_LIST = 64
"""Keys per inverted list an IVF index is trained on (a sample: FAISS wants at least 39)."""


@dataclass(frozen=True)
class IndexChoice:
    """What serves a memory's search: an index, where it runs, and how it is searched.

    Attributes:
        spec: FAISS ``index_factory`` string; ``"Flat"`` is exact (the torch backend knows
            ``"Flat"`` and ``"IVF<n>,Flat"``).
        backend: ``"faiss"``, ``"faiss-gpu"`` or ``"torch"`` (`choose_backend`).
        probes: IVF chosen by `choose_index`: the ``nprobe`` values to try, ascending (the
            fewest whose recall passes `tune_nprobe`'s check is used); empty otherwise.
        nprobe: The ``nprobe`` in use (0: not set here).
        recall: The recall@`CHECK_K` `tune_nprobe` measured (``None``: not measured).

    """

    spec: str
    backend: str
    probes: tuple[int, ...] = ()
    nprobe: int = 0
    recall: float | None = None

    @property
    def exact(self) -> bool:
        """Whether the search is exact."""
        return self.spec == "Flat"

    def describe(self) -> str:
        """The choice in words, for the run log."""
        family = "torch" if self.backend == TORCH else "FAISS"
        where = " on the GPU" if self.backend == "faiss-gpu" else ""
        if self.exact:
            return "torch exact" if self.backend == TORCH else f"FAISS Flat{where} (exact)"
        text = f"{family} {self.spec}{where}" + (f", nprobe {self.nprobe}" if self.nprobe else "")
        if self.recall is not None:
            text += f", recall@{CHECK_K} {self.recall:.3f} on {CHECK_QUERIES} held-out keys"
        return text


def check_index(index: str, dim: int | None = None) -> None:
    """Raise `ValueError` unless ``index`` names a search a memory can use.

    ``auto``, ``torch`` and ``Flat`` are always valid; anything else must be a FAISS
    ``index_factory`` string FAISS builds for keys of width ``dim`` (if ``None``: for one of the
    usual encoder widths, 384, 768 or 1024), which needs FAISS installed.
    """
    if not isinstance(index, str) or not index.strip():
        raise ValueError(f"index {index!r}: expected auto, torch, Flat or a FAISS factory string")
    if index in (AUTO, TORCH, "Flat"):
        return
    if not faiss_installed():
        raise ValueError(
            f"index {index!r} needs FAISS, which is not installed (install the cpu or gpu "
            "extra), or use auto, torch or Flat"
        )
    import faiss

    errors = []
    for width in (dim,) if dim else (384, 768, 1024):
        try:
            faiss.index_factory(width, index, faiss.METRIC_L2)
            return
        except RuntimeError as err:
            errors.append(str(err).strip().splitlines()[-1])
    widths = dim or "384, 768 or 1024"
    raise ValueError(
        f"index {index!r}: not a FAISS index_factory string for keys of width {widths} "
        f"({errors[-1]}); expected auto, torch, Flat or e.g. IVF1024,Flat or HNSW32"
    )


def ivf_lists(size: int) -> int:
    """Inverted lists of an IVF index over ``size`` keys: the power of two nearest √size.

    √size balances the two halves of a query (comparing with the list centroids, and scanning
    the lists probed); training cost grows with lists², so `TRAIN_PER_LIST` keys per list are
    sampled to train on.
    """
    return 2 ** max(4, round(math.log2(math.sqrt(max(size, 1)))))


def probe_schedule(lists: int) -> tuple[int, ...]:
    """The ``nprobe`` values `tune_nprobe` tries: from 1/16 to 3/8 of the lists.

    The ladder is fine between 1/8 and 1/4 of the lists, where recall@32 crossed 0.95 on a
    million mixture keys (0.945 at 128 of 1,024 lists, 0.975 at 192; the check chose 160).
    Its top, 3/8, scans 1.5 times the keys a quarter does, which searched 2.3 and 1.9 times
    faster than exact search at 100,000 and 50,000 keys (``experiments/bench/memory.py``),
    so every value tried is faster than exact search from `APPROXIMATE_FROM` keys on; an
    index needing more lists than 3/8 falls back to exact search.
    """
    fractions = (1 / 16, 3 / 32, 1 / 8, 5 / 32, 3 / 16, 7 / 32, 1 / 4, 5 / 16, 3 / 8)
    return tuple(sorted({max(1, round(lists * f)) for f in fractions}))


def choose_index(size: int, device: torch.device, backend: Backend = "auto") -> IndexChoice:
    """The rule of ``index: auto``: which search serves a memory of ``size`` keys.

    * CUDA: exact search on the device (FAISS's GPU build when installed, else `TorchFlatIndex`)
      at every size, as before ``auto`` (unmeasured here: the bench ran on two CPU cores);
    * CPU, fewer than `APPROXIMATE_FROM` keys: exact search, `TorchFlatIndex`;
    * CPU, from `APPROXIMATE_FROM` keys: ``IVF{ivf_lists(size)},Flat`` (`TorchIVFIndex`) with
      the ``nprobe`` values of `probe_schedule`, which the memory checks on its own keys
      (`tune_nprobe`): it uses the fewest probes whose recall@32 is at least `RECALL_TARGET`,
      and exact search where none is, so an approximate index never serves below the target.
      Measured: 2.2 times exact speed at 100,000 mixture keys (recall@32 0.971), 6.4 times at
      1,000,000 (0.958).

    ``backend="faiss"`` makes the same choices with FAISS's indexes (``Flat``,
    ``IVF{n},Flat``); ``backend="torch"`` is the default's. Why torch: FAISS's IVF scans a
    key 2.5 to 3 times slower than `TorchIVFIndex` (at a million keys and recall 0.975, 12.4 s
    against 3.9 s per 1,000 queries: 1.7 times exact speed, never 5). FAISS's exact ``Flat``
    was 2 to 3 times faster than the torch one in the bench, which sets
    ``OMP_WAIT_POLICY=PASSIVE``; with OpenMP's default policy, which runs keep, it was 0.7
    times the torch one (2.0 s against 1.4 s over 100,000 keys) while another process shared
    the two cores. Exact search below `APPROXIMATE_FROM` keys costs at most 0.7 s per 1,000
    queries either way; ``memory_index: Flat`` asks for FAISS's.
    """
    if device.type == "cuda":
        return IndexChoice("Flat", choose_backend(device, "Flat", backend))
    family = "faiss" if backend == "faiss" else TORCH
    if size < APPROXIMATE_FROM:
        return IndexChoice("Flat", family)
    lists = ivf_lists(size)
    return IndexChoice(f"IVF{lists},Flat", family, probes=probe_schedule(lists))


def exact_choice(choice: IndexChoice) -> IndexChoice:
    """The exact search standing in for ``choice`` where its recall falls short."""
    return IndexChoice("Flat", choice.backend)


def train_ids(size: int, lists: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted slots of at most `TRAIN_PER_LIST` keys per list among ``size`` (without replacement).

    All of them when there are no more; an IVF index is trained on these keys.
    """
    n = min(size, TRAIN_PER_LIST * lists)
    return np.arange(size) if n == size else np.sort(rng.choice(size, n, replace=False))


def sampled_recall(
    index: Any,
    keys: np.ndarray,
    ids: np.ndarray,
    exact: tuple[np.ndarray, np.ndarray],
    k: int = CHECK_K,
) -> tuple[float, float]:
    """Recall@k of ``index`` on the stored keys ``keys[ids]`` against their exact neighbours.

    Each query's own slot is left out of both its exact and its approximate neighbours (at
    test time a query is not in memory). A neighbour the index returns counts as found when it
    is no farther than the exact k-th one, up to float rounding (`FLOAT_SLACK`): among keys at
    equal distance any k are the k nearest, so counting slots would call an exact search that
    breaks ties the other way a miss. (ann-benchmarks' recall, ``metrics.py``, also counts
    neighbours up to 1 + 1e-3 times the k-th distance; in 384 dimensions, where distances
    crowd together, that counted near neighbours that are not ties: the check read 0.967 on
    100,000 mixture keys where fresh queries found 0.952 of their 32 nearest by slots, so a
    tie here is an equal distance and nothing wider.) It matters for text: a character
    LM's keys repeat (the contexts of "the " do). On 300,000 keys of ``lifelong lm``'s
    ``transformer`` (Tiny Shakespeare, 300 steps), recall@32 by slots stayed at 0.955 from 32
    to 192 probes of 512 lists, so `index: auto` fell back to exact search, while recall by
    distance was 1.000 from 32 probes on (0.77 at 1 probe, 0.97 at 4).

    Args:
        index: The index over ``keys``.
        keys: Every stored key, (n, d).
        ids: The slots searched, (c,).
        exact: Their exact k + 1 nearest squared distances and slots, (c, k + 1) each
            (`exact_neighbours`).
        k: Neighbours compared per query.

    Returns:
        The mean recall over the queries and its standard error.

    """
    return _recall(index, keys[ids], exact, k, own=ids)


def query_recall(index: Any, keys: np.ndarray, queries: np.ndarray, k: int) -> tuple[float, float]:
    """Recall@k of ``index`` (holding ``keys``, (n, d)) on queries that are not stored, (q, d).

    The recall a search shows on the queries it will serve (held-out text's contexts, test
    examples), against exact search over ``keys``, by `sampled_recall`'s rule (a neighbour no
    farther than the exact k-th one, up to rounding, is found).

    Returns:
        The mean recall over the queries and its standard error.

    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    k = min(k, len(keys))
    keys_t = torch.from_numpy(np.ascontiguousarray(keys, dtype=np.float32))
    distances, slots = torch_knn(keys_t, torch.from_numpy(queries), k)
    return _recall(index, queries, (distances.numpy(), slots.numpy()), k, own=None)


def _recall(
    index: Any,
    queries: np.ndarray,
    exact: tuple[np.ndarray, np.ndarray],
    k: int,
    own: np.ndarray | None,
) -> tuple[float, float]:
    """Mean recall@k and its standard error; ``own``: each query's slot, left out (or None)."""
    extra = 0 if own is None else 1
    distances, slots = index.search(queries, k + extra)  # (c, k [+ 1]) each
    exact_d, exact_slots = exact
    norms = (queries.astype(np.float64) ** 2).sum(1)  # (c,): the scale of rounding error
    owns = np.full(len(queries), -1) if own is None else own
    recalls = []
    for d, s, ed, es, mine, norm in zip(distances, slots, exact_d, exact_slots, owns, norms):
        kth = _without(ed, es, mine, k)[-1]  # the exact k-th distance, own slot left out
        bound = kth + FLOAT_SLACK * norm  # a tie: equal up to rounding
        found = _without(d, s, mine, k)
        recalls.append(sum(1 for x in found if x <= bound) / k)
    return float(np.mean(recalls)), float(np.std(recalls) / math.sqrt(len(recalls)))


FLOAT_SLACK = 1e-5
"""Absolute slack per unit of ‖q‖²: squared distances computed as ‖q‖² + ‖k‖² − 2 q·k in fp32
by two different searches differ by this much between equal keys."""


def exact_neighbours(keys: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact ``k`` nearest squared distances and slots of the stored keys ``keys[ids]``.

    Returns:
        ``(distances, slots)``, (c, k) each, nearest first, each key's own slot included.

    """
    keys_t = torch.from_numpy(np.ascontiguousarray(keys))  # no copy
    distances, slots = torch_knn(keys_t, keys_t[torch.from_numpy(ids)], k)
    return distances.numpy(), slots.numpy()


def _without(distances: np.ndarray, slots: np.ndarray, own: int, k: int) -> list[float]:
    """The first ``k`` distances of slots other than ``own`` (and other than FAISS's -1)."""
    return [float(d) for d, s in zip(distances, slots) if s != own and s >= 0][:k]


def check_ids(
    size: int, trained: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint samples of `CHECK_QUERIES` slots, none among the ``trained`` ones.

    A stored key the centroids were not trained on is, to the trained index, like a fresh
    query from the memory's distribution: the stored keys are exchangeable, and leaving the
    query's own slot out makes the rest a memory it is not in. The first sample chooses
    ``nprobe``, the second confirms the choice (`tune_nprobe`). Where too few keys are left
    the samples share the untrained keys (or, with none, draw from all).
    """
    pool = np.setdiff1d(np.arange(size), trained, assume_unique=True)
    pool = pool if len(pool) else np.arange(size)
    n = min(2 * CHECK_QUERIES, len(pool))
    drawn = rng.choice(pool, n, replace=False)
    if n < 2 * CHECK_QUERIES:  # too few for two disjoint samples: both use all
        return np.sort(drawn), np.sort(drawn)
    return np.sort(drawn[:CHECK_QUERIES]), np.sort(drawn[CHECK_QUERIES:])


def tune_nprobe(
    index: Any,
    keys: np.ndarray,
    choice: IndexChoice,
    rng: np.random.Generator,
    trained: np.ndarray | None = None,
) -> IndexChoice | None:
    """The fewest ``nprobe`` of ``choice.probes`` whose recall passes, set on ``index``.

    Queries are stored keys the index was not trained on (``trained``: the slots of its
    training sample; `check_ids`), searched for their neighbours among the others
    (`sampled_recall`), so that they stand for fresh queries from the tasks the memory holds.
    A value passes when the mean recall@`CHECK_K` less two standard errors is at least
    `RECALL_TARGET`. The fewest passing ``nprobe`` is found on one sample of
    `CHECK_QUERIES` keys and confirmed on a second, disjoint one (the value chosen because it
    passed on the first is favoured by that sample's luck: Cawley & Talbot 2010's selection
    bias); where the confirmation fails, the next value up is tried on the second sample.
    The recall reported is the confirming sample's. Queries unlike anything stored (from a
    task never written) may find fewer of their neighbours.

    Returns:
        ``choice`` with ``nprobe`` and the measured recall, or ``None`` where no value passes.

    """
    k = min(CHECK_K, len(keys) - 1)
    trained = np.zeros(0, np.int64) if trained is None else trained
    choose, confirm = check_ids(len(keys), trained, rng)

    def passes(ids: np.ndarray, exact: tuple[np.ndarray, np.ndarray], at: int) -> float | None:
        index.nprobe = choice.probes[at]
        recall, error = sampled_recall(index, keys, ids, exact, k)
        return recall if recall - 2 * error >= RECALL_TARGET else None

    exact = exact_neighbours(keys, choose, k + 1)
    first, low, high = None, 0, len(choice.probes) - 1
    while low <= high:  # recall only grows with nprobe: bisect for the fewest that pass
        middle = (low + high) // 2
        if passes(choose, exact, middle) is not None:
            first, high = middle, middle - 1
        else:
            low = middle + 1
    if first is None:
        return None
    exact = exact_neighbours(keys, confirm, k + 1)
    for at in range(first, len(choice.probes)):
        recall = passes(confirm, exact, at)
        if recall is not None:
            index.nprobe = choice.probes[at]
            return replace(choice, nprobe=choice.probes[at], recall=recall)
    return None
