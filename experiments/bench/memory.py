"""Benchmark `EpisodicMemory.nearest` (FAISS exact L2) against a brute-force torch baseline.

Both search the same 100,000 random keys of width 384 with the same 1,000 queries for k = 32,
side by side in one run; the result is the ratio of their times (timings on shared machines are
noisy, so only the ratio is meaningful). The neighbour sets are checked to agree.

    python experiments/bench/memory.py [--keys 100000] [--dim 384] [--queries 1000] [--k 32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from lifelong.memory import EpisodicMemory, ExampleRecords


def torch_nearest(keys: torch.Tensor, queries: torch.Tensor, k: int) -> torch.Tensor:
    """Brute force: all squared L2 distances (q, n), then top-k smallest."""
    d = (queries**2).sum(1, keepdim=True) - 2 * queries @ keys.T + (keys**2).sum(1)  # (q, n)
    return d.topk(k, dim=1, largest=False).indices


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--hnsw",
        action="store_true",
        help="also time an approximate HNSW32 memory and report its recall",
    )
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    keys = rng.normal(size=(args.keys, args.dim)).astype(np.float32)
    queries = rng.normal(size=(args.queries, args.dim)).astype(np.float32)
    memory = EpisodicMemory(args.dim)
    examples = ExampleRecords.build(label=[[0]] * args.keys)  # the values do not matter here
    memory.write(examples, keys)
    memory.nearest(queries[:1], args.k)  # build the index outside the timing

    keys_t, queries_t = torch.from_numpy(keys), torch.from_numpy(queries)
    t_faiss = best_of(lambda: memory.nearest(queries, args.k), args.repeats)
    t_torch = best_of(lambda: torch_nearest(keys_t, queries_t, args.k), args.repeats)

    ours = memory.nearest(queries, args.k)[1]
    theirs = torch_nearest(keys_t, queries_t, args.k).numpy()
    overlap = np.mean([len(set(a) & set(b)) / args.k for a, b in zip(ours, theirs)])

    print(
        f"nearest: {args.keys:,} keys x {args.dim}, {args.queries:,} queries, k={args.k}, "
        f"{torch.get_num_threads()} threads, best of {args.repeats}"
    )
    print(f"  EpisodicMemory.nearest (FAISS IndexFlatL2): {t_faiss * 1e3:8.1f} ms")
    print(f"  brute-force torch (matmul + topk):          {t_torch * 1e3:8.1f} ms")
    print(f"  ratio torch / FAISS: {t_torch / t_faiss:.2f}x  (>1 means FAISS is faster)")
    print(f"  neighbour agreement: {overlap:.4f}")
    if args.hnsw:
        hnsw = EpisodicMemory(args.dim, index="HNSW32")
        hnsw.write(examples, keys)
        start = time.perf_counter()
        hnsw.nearest(queries[:1], args.k)
        build = time.perf_counter() - start
        t_hnsw = best_of(lambda: hnsw.nearest(queries, args.k), args.repeats)
        approx = hnsw.nearest(queries, args.k)[1]
        recall = np.mean([len(set(a) & set(b)) / args.k for a, b in zip(approx, theirs)])
        print(
            f"  EpisodicMemory(index='HNSW32').nearest:    {t_hnsw * 1e3:8.1f} ms "
            f"(build {build:.1f} s, recall@{args.k} {recall:.3f})"
        )
        print(f"  ratio torch / HNSW32: {t_torch / t_hnsw:.2f}x")


if __name__ == "__main__":
    main()
