"""``index: auto``'s recall on fresh queries: what its own check promised against what it serves.

`EpisodicMemory`'s default search checks an IVF index on stored keys it was not trained on and
uses the fewest probes whose recall@32 (mean less two standard errors) reaches 0.95, confirmed
on a second sample (`lifelong.memory.search.tune_nprobe`). This measures that promise where it
matters: on queries the memory has never seen. Keys are the memory bench's Gaussian mixture
fitted to the real keys (``experiments/bench/memory.py``: `real_keys`, `cached_mixture`); for
each size and draw, a memory is filled with the mixture's keys, searched once (choosing and
checking its index), then asked for the 32 nearest of ``--queries`` fresh mixture draws, which
are compared with exact search. Each line gives the choice and its checked recall, the fresh
queries' recall@32 by slots (the memory bench's measure) and by the check's own rule (a
neighbour as near as the exact 32nd, up to rounding, is found), and its speed against exact
search.

    python experiments/bench/auto_recall.py [--sizes 100k,1m] [--draws 3] [--queries 1000]
        [--fewrel-dir ../shared/data/fewrel_cfrl] [--cache-dir auto|off|DIR] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))  # the sibling memory bench
from memory import (  # noqa: E402
    FEWREL_CFRL,
    cached_mixture,
    filled_memory,
    parse_size,
    real_keys,
    recall_at,
)

from lifelong.memory.search import RECALL_TARGET, TorchFlatIndex  # noqa: E402


def measure(keys: np.ndarray, queries: np.ndarray, k: int) -> str:
    """One memory over ``keys``: its choice, and its recall and speed on ``queries``."""
    memory = filled_memory(keys, "cpu")
    memory.nearest(queries[:1], k)  # chooses, trains and checks the index
    start = time.perf_counter()
    found = memory.nearest(queries, k)[1]
    served = time.perf_counter() - start
    exact = TorchFlatIndex(keys.shape[1], "cpu")
    exact.add(keys)
    start = time.perf_counter()
    truth = exact.search(queries, k)[1]
    exact_s = time.perf_counter() - start
    recall = recall_at(found, truth)
    by_distance, _ = memory.recall(queries, k)  # the check's own rule
    verdict = "meets" if recall >= RECALL_TARGET else "BELOW"
    return (
        f"{len(keys):,} keys: {memory.index_choice.describe()}; fresh queries recall@{k} "
        f"{recall:.3f} by slots ({verdict} {RECALL_TARGET}), {by_distance:.3f} by distance; "
        f"{exact_s / served:.2f}x exact search"
    )


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100k,1m")
    parser.add_argument("--draws", type=int, default=3, help="mixture draws per size")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--components", type=int, default=64)
    parser.add_argument("--fewrel-dir", type=Path, default=FEWREL_CFRL)
    parser.add_argument("--cache-dir", default="auto")
    parser.add_argument("--quick", action="store_true", help="smoke test: sample keys, small")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    if args.quick:
        sizes, args.queries, args.components = [min(s, 3_000) for s in sizes], 50, 4
    from lifelong.tasks.cache import default_cache_dir

    cache = {"off": None, "auto": default_cache_dir() / "bench"}.get(
        args.cache_dir, Path(args.cache_dir)
    )
    fewrel = None if args.quick else args.fewrel_dir
    keys, _ = real_keys(fewrel, cache, "cpu", per_source=300 if args.quick else None)
    mixture = cached_mixture(keys, args.components, None if args.quick else cache)
    lines = [
        f"index: auto on fresh queries; mixture of {args.components} components fitted to "
        f"{len(keys):,} real keys; {args.queries:,} queries, k {args.k}; "
        f"{torch.get_num_threads()} thread(s)"
    ]
    print(lines[0], flush=True)
    for size in sizes:
        for draw in range(args.draws):
            base = mixture.sample(size, seed=10 + draw)
            queries = mixture.sample(args.queries, seed=1_000 + draw)
            lines.append(f"draw {draw}: " + measure(base, queries, args.k))
            print(lines[-1], flush=True)
    return lines


if __name__ == "__main__":
    main()
