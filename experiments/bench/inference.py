"""Benchmark inference: Meta-MbPA's coarse adaptation and OML-ER's meta-test vs MbPA++.

One model, one memory, the same test examples for every path. The model is MiniLM trained with
sparse replay over the bundled sample (order i): this script measures the cost of inference,
not what each strategy's own training would reach. The memory is what Meta-MbPA keeps: the
training stream offered to a diversity writer (`DiversityWrite`, β = 10) at ``--memory-rate``.
Test examples are drawn evenly from the five test sets and predicted as one test set.

* MbPA++ reference: per test example, L = 30 SGD steps on all weights over its K = 32 nearest
  memories, predict, reset (the paper's procedure; `LocalAdapter.reference_logits`).
* Meta-MbPA coarse adaptation: L = 30 steps on all weights, once for the whole test set, over
  the pool of the test inputs' K nearest memories (weighted by retrieval count), then predict.
* OML-ER meta-test: one SGD step on the head per each of m = 5 random memory batches of 16,
  once for the test set, then predict.

The speed-up of coarse adaptation grows with the number of test inputs per distinct pooled
memory (about n·K / pool size): the script prints the pool size.

    python experiments/bench/inference.py [--examples 64] [--memory-rate 0.05]
"""

from __future__ import annotations

import argparse
import time

import torch
from local_adaptation import test_batch, train  # the sibling benchmark's setup

from lifelong.batch import Batch
from lifelong.mechanisms.adaptation import AdaptationOptions, LocalAdapter
from lifelong.memory import DiversityWrite, EpisodicMemory
from lifelong.strategies.meta_mbpa import MetaMbPA, MetaMbPAOptions
from lifelong.strategies.oml_er import OMLER, OMLEROptions
from lifelong.strategy import StrategyContext
from lifelong.training import seed_everything


def diversity_memory(writer, stream, task, rate: float, seed: int) -> EpisodicMemory:
    """The training stream written through the diversity policy (Meta-MbPA's memory)."""
    memory = EpisodicMemory(writer.key_encoder.dim, policy=DiversityWrite(rate=rate), seed=seed)
    for part in stream:
        for s in range(0, len(part.train), 16):
            batch = task(list(part.train[s : s + 16]))
            memory.write(batch.examples.only(task.stored_fields), writer.keys(batch.examples))
    return memory


def timed(fn, batch: Batch) -> tuple[float, float]:
    """Seconds and accuracy (%) of a function from a batch to labels."""
    start = time.perf_counter()
    labels = fn(batch)
    seconds = time.perf_counter() - start
    return seconds, float((labels == batch.labels).float().mean()) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--memory-rate", type=float, default=0.05)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    seed_everything(args.seed)
    trained, stream, task = train(args.seed)
    model, writer = trained.trainer.model, trained.replay.writer
    writer.memory = diversity_memory(writer, stream, task, args.memory_rate, args.seed)
    memory = writer.memory
    print(f"memory: {len(memory)} of 1500 stream examples (diversity writes)", flush=True)
    batch = test_batch(stream, task, args.examples, args.seed)
    context = StrategyContext(model, task, lr=1e-4, seed=args.seed)

    reference = LocalAdapter(
        model, writer, AdaptationOptions(k=args.k, steps=args.steps, adapt_path="reference")
    )
    meta = MetaMbPA(context, MetaMbPAOptions(k=args.k, steps=args.steps))
    meta.replay.writer = writer  # the same memory for every path
    oml = OMLER(context, OMLEROptions())
    oml.replay.writer = writer

    pool = len(meta.pool([batch])[0])
    rows = {}
    rows["MbPA++ reference"] = timed(lambda b: reference.logits(b).argmax(-1), batch)
    print(f"  reference done in {rows['MbPA++ reference'][0]:.0f} s", flush=True)
    rows["Meta-MbPA coarse"] = timed(lambda b: meta.predict_set([b])[0].argmax(-1), batch)
    rows["OML-ER meta-test"] = timed(lambda b: oml.predict_set([b])[0].argmax(-1), batch)
    with torch.no_grad():
        rows["no adaptation"] = timed(lambda b: model.eval()(*b.inputs()).argmax(-1), batch)

    n = len(batch)
    print(
        f"\nInference on MiniLM, K={args.k}, L={args.steps}, {n} test examples, memory "
        f"{len(memory)}, coarse pool {pool} distinct memories, {torch.get_num_threads()} threads"
    )
    print(f"{'path':<20}{'ex/s':>10}{'vs reference':>14}{'accuracy':>10}")
    ref_rate = n / rows["MbPA++ reference"][0]
    for name, (seconds, accuracy) in rows.items():
        rate = n / seconds
        print(f"{name:<20}{rate:10.3g}{rate / ref_rate:13.1f}x{accuracy:9.1f}%")
    assert meta.counts.coarse_adaptations == 1 and oml.counts.meta_tests == 1  # once per set


if __name__ == "__main__":
    main()
