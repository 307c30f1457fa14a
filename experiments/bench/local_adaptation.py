"""Benchmark MbPA++ local adaptation: the paper's per-example reference path vs the fast paths.

One run, one model, one memory, the same test examples for every row. The model is MiniLM
trained (sparse replay) over the bundled sample in order i, with every training example in
episodic memory; the test examples are drawn evenly from the five test sets. Every path adapts
with K = 32 neighbours and L = 30 steps (λ = 1e-3). For each path the script prints
examples/second, the speed-up over the reference, the accuracy, and the compute bound: the
reference's token-layers divided by the path's token-layers.

The bound counts token-layers: one transformer layer applied to one token position, a
training step counting 3 (forward + backward ≈ 3 forwards). The reference pads each test
example's K neighbours to the longest of them, so per test example it computes
L·3·n·K·t_max + n·t_x, with n layers and t_x the test input's length. The fast path with N
adapted layers (n for "all", 0 for "head") runs one example at a time on the real tokens only
(see `HFEncoder.run_stages(packed=True)`): (n − N)·Σ_u t_u once for the U distinct neighbours'
frozen prefixes (cached), plus per test example (n − N)·t_x + L·3·N·Σ_k t_k + N·t_x, except
that a classification head reads [CLS] alone, so the last layer computes its output there only
(``pooled_only``): a row of t tokens costs that layer t/6 + 5/6 token-layers (keys and values
of every token, 2 of a layer's 12 d² per token; query, attention output and feed-forward block
for [CLS] alone) instead of t.
The low-rank path (``lora<r>``, `lifelong.mechanisms.lowrank`) adapts every layer but never a base
weight, so its backward pass computes activation gradients only, and a step counts 2: per test
example L·2·n·Σ_k t_k + n·t_x (the rank-r products, r ≪ d, are left out of the count).

A row named with ``@bf16`` (e.g. ``lora8@bf16``) runs under bf16 autocast, as a run with
``precision: bf16`` evaluates (`lifelong.runtime.Runtime.autocast`); the reference is always
fp32, the paper's path. The bound counts work, not its precision, so a bf16 row can pass it:
on a CPU with AVX512-BF16 (or AMX) a bf16 matmul runs several times faster than an fp32 one.

    python experiments/bench/local_adaptation.py [--examples 64] [--k 32] [--steps 30]
        [--scopes all,top1,head,lora4,lora8,lora16,lora8vmap,lora8@bf16,all@bf16,lora8:4]
        [--device cpu|cuda|auto] [--state trained.pt]
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.experiment.config import from_dict
from lifelong.experiment.runs import build_model
from lifelong.mechanisms.adaptation import AdaptationOptions, LocalAdapter
from lifelong.mechanisms.scopes import check_scope
from lifelong.runtime import CPU, Runtime, to_cpu
from lifelong.serialization import load_data
from lifelong.strategies.mbpa_plus_plus import MbPAPlusPlus, MbPAPlusPlusOptions
from lifelong.strategy import StrategyContext
from lifelong.streams import batches, text_classification_stream
from lifelong.tasks.prepared import on_device
from lifelong.training import seed_everything


def train(
    seed: int, runtime: Runtime = CPU, state: Path | None = None
) -> tuple[MbPAPlusPlus, object, object]:
    """MiniLM after MbPA++'s sparse-replay pass over the sample (order i); memory holds all.

    MbPA++ (not REPLAY, whose memory stores no keys) so that the memory is keyed for search.
    With ``state``, the trained strategy is read from that file when it exists (a bench run
    on the same seed saved it) and written there otherwise.
    """
    config = from_dict(dict(encoder="minilm", lr=1e-4, batch_size=16, seed=seed))
    stream = text_classification_stream("i")
    model, kind = build_model(
        config.encoder, config.task_settings(), stream, seed=config.training.seed
    )
    task = on_device(kind, runtime.device)
    context = StrategyContext(
        model.to(runtime.device), task, lr=config.training.lr, seed=seed, runtime=runtime
    )
    strategy = MbPAPlusPlus(context, MbPAPlusPlusOptions(replay_every=100, replay_ratio=0.3))
    if state is not None and state.is_file():
        strategy.load_state_dict(read_state(state))
        return strategy, stream, task
    for i, part in enumerate(stream):
        for chunk in batches(part.train, config.training.batch_size, shuffle=True, seed=seed + i):
            strategy.observe(task(chunk))
    if state is not None:
        torch.save(to_cpu(strategy.state_dict()), state)
    return strategy, stream, task


def read_state(path: Path) -> dict:
    """A saved strategy state, read as data only (a planted file runs nothing: refused)."""
    return load_data(path, what="bench state")


def test_batch(stream, task, n: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    per_task = -(-n // len(stream))
    picked = [
        e
        for t in stream
        for e in rng.choice(np.array(t.test, dtype=object), per_task, replace=False)
    ]
    return task(list(picked[:n]))


def token_layers(
    scope: str,
    n: int,
    steps: int,
    test_lengths: list[int],
    neighbour_lengths: list[list[int]],
    distinct_lengths: list[int],
) -> float:
    """Token-layers one path computes for the whole run (see the module docstring).

    Args:
        scope: ``"reference"``, the fast path's adapt_scope, or ``"lora"``.
        n: Encoder layers.
        steps: L.
        test_lengths: Tokens of each test input.
        neighbour_lengths: Tokens of each test input's K neighbours.
        distinct_lengths: Tokens of each distinct retrieved neighbour.

    """
    pairs = list(zip(test_lengths, neighbour_lengths))
    if scope == "reference":
        return sum(steps * 3 * n * len(ks) * max(ks) + n * tx for tx, ks in pairs)
    if scope == "lora":
        return sum(steps * 2 * n * sum(ks) + n * tx for tx, ks in pairs)
    adapted = {"all": n, "head": 0}[scope] if scope in ("all", "head") else int(scope[3:])
    frozen = n - adapted
    cached = frozen * sum(distinct_lengths)

    def adapted_layers(lengths: list[int]) -> float:  # the last layer at [CLS] alone
        if adapted == 0:
            return 0.0
        return sum((adapted - 1) * t + t / 6 + 5 / 6 for t in lengths)

    return cached + sum(
        frozen * tx + steps * 3 * adapted_layers(ks) + adapted_layers([tx]) for tx, ks in pairs
    )


class Run(NamedTuple):
    """One row of the bench: a path, its scope and how it batches and computes."""

    path: str
    scope: str
    rank: int = 8
    batching: str = "packed"
    precision: str = "fp32"
    chunk: int | None = None

    @property
    def label(self) -> str:
        text = f"{self.path} {self.scope}" + (f" r={self.rank}" if self.scope == "lora" else "")
        text += " (vmap)" if self.batching == "vmap" else ""
        text += "" if self.chunk is None else f" x{self.chunk}"
        return text + ("" if self.precision == "fp32" else f" {self.precision}")


def parse_runs(scopes: str, num_layers: int) -> list[Run]:
    """``--scopes`` as the runs after the reference (which is always fp32).

    ``lora<r>`` is the low-rank scope at rank r on the packed tokens, ``lora<r>vmap`` the same
    batched with ``torch.func.vmap`` (`LocalAdapter.lora_logits`). A suffix ``@bf16`` (or
    ``@fp16``) runs that row under the run config's mixed precision (``Runtime.autocast``):
    e.g. ``lora8@bf16``, ``all@bf16``. A suffix ``:<n>`` before any ``@`` sets that row's
    ``fast_chunk`` (test examples adapted in one batched computation; ``--chunk`` for the rows
    without one):
    ``lora8:4`` packs four examples' neighbours into each base matmul, ``all:4`` vmaps four
    examples' weight copies, ``all:2@bf16`` both. The label then shows ``x<n>``.
    """
    runs = [Run("reference", "all")]
    for text in scopes.split(","):
        named, _, precision = text.partition("@")
        scope, _, chunked = named.partition(":")
        if chunked and not chunked.isdigit():
            raise SystemExit(f"--scopes {text!r}: the chunk must be a whole number")
        chunk = int(chunked) if chunked else None
        precision = precision or "fp32"
        if precision not in ("fp32", "bf16", "fp16"):
            raise SystemExit(f"--scopes {text!r}: precision must be fp32, bf16 or fp16")
        match = re.fullmatch(r"lora(\d+)(vmap)?", scope)
        if match:
            batching = "vmap" if match.group(2) else "packed"
            runs.append(Run("fast", "lora", int(match.group(1)), batching, precision, chunk))
            continue
        check_scope(scope, num_layers)  # fail early on a bad scope
        runs.append(Run("fast", scope, precision=precision, chunk=chunk))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--adapt-lr", type=float, default=1e-3)
    parser.add_argument(
        "--scopes",
        default="all,top1,head,lora4,lora8,lora16,lora8vmap,lora8@bf16,all@bf16",
        help="comma-separated rows after the reference (see the module docstring)",
    )
    parser.add_argument("--chunk", type=int, default=0, help="fast_chunk (0: each path's default)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--state", type=Path, help="read the trained model and memory from here, or save them"
    )
    args = parser.parse_args()

    runtime = Runtime.resolve(args.device, "fp32")
    seed_everything(args.seed)
    start = time.perf_counter()
    strategy, stream, task = train(args.seed, runtime, args.state)
    print(
        f"trained MiniLM on the sample in {time.perf_counter() - start:.0f} s; "
        f"memory holds {len(strategy.replay.memory)} examples; device {runtime.describe()}",
        flush=True,
    )
    model, writer = strategy.trainer.model, strategy.replay.writer
    batch = test_batch(stream, task, args.examples, args.seed)
    n = model.encoder.num_layers
    runs = parse_runs(args.scopes, n)

    def options(path: str, scope: str, rank: int, chunk: int | None = None) -> AdaptationOptions:
        return AdaptationOptions(
            k=args.k,
            steps=args.steps,
            adapt_lr=args.adapt_lr,
            adapt_scope=scope,
            adapt_path=path,
            adapt_rank=rank,
            fast_chunk=args.chunk if chunk is None else chunk,
        )

    slots = LocalAdapter(model, writer, options("fast", "all", 8)).neighbours(batch)
    distinct = sorted(set(slots.reshape(-1).tolist()))
    stored = writer.memory.get(np.array(distinct)).examples["tokens"]
    size = {s: len(t) for s, t in zip(distinct, stored)}
    lengths = (
        batch.attention_mask.sum(dim=1).tolist(),
        [[size[s] for s in row] for row in slots.tolist()],
        list(size.values()),
    )
    with torch.no_grad():
        plain = model.eval()(*batch.inputs()).argmax(-1) == batch.labels

    results = {}
    for row in runs:
        precise = Runtime.resolve(str(runtime.device), row.precision)
        adapter = LocalAdapter(
            model,
            writer,
            options(row.path, row.scope, row.rank, row.chunk),
            loss_scale=precise.inner_loss_scale,
        )  # fp16 steps loss-scaled as the strategies' are
        runtime.synchronize()
        t0 = time.perf_counter()
        with precise.autocast():
            if row.batching == "vmap":
                logits = adapter.lora_logits(batch, adapter.neighbours(batch), batching="vmap")
            else:
                logits = adapter.logits(batch)
        runtime.synchronize()
        seconds = time.perf_counter() - t0
        accuracy = float((logits.argmax(-1) == batch.labels).float().mean()) * 100
        chosen = adapter.path(batch.input_ids.device).__name__
        redirected = row.path == "fast" and chosen == "reference_logits"
        kind = row.scope if row.path == "fast" and not redirected else "reference"
        results[row.label] = (kind, seconds, accuracy)
        rate = len(batch) / seconds
        note = "  (the reference path: `LocalAdapter.path`)" if redirected else ""
        print(f"  {row.label:<24} {rate:9.3f} ex/s  acc {accuracy:5.1f}%{note}", flush=True)

    ref_seconds = results["reference all"][1]
    ref_work = token_layers("reference", n, args.steps, *lengths)
    print(
        f"\nLocal adaptation on MiniLM ({n} layers), K={args.k}, L={args.steps}, "
        f"{len(batch)} test examples ({len(distinct)} distinct neighbours), "
        f"device {runtime.describe()}, {torch.get_num_threads()} CPU threads"
    )
    print(f"{'path':<28}{'ex/s':>9}{'speed-up':>10}{'bound':>9}{'accuracy':>10}")
    no_adaptation = float(plain.float().mean()) * 100
    print(f"{'no adaptation':<28}{'':>9}{'':>10}{'':>9}{no_adaptation:9.1f}%")
    for label, (kind, seconds, accuracy) in results.items():
        work = token_layers(kind, n, args.steps, *lengths)
        print(
            f"{label:<28}{len(batch) / seconds:9.3f}{ref_seconds / seconds:9.1f}x"
            f"{ref_work / work:8.1f}x{accuracy:9.1f}%"
        )


if __name__ == "__main__":
    main()
