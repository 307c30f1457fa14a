"""Sorting accuracy of the memory modules against the number of segments (Memoria's Table 4).

Each module is trained as a causal LM on the ∞-former sorting task (`lifelong.lm.sorting`),
reading a sequence of ``segments x segment_length`` tokens segment by segment; only the last
segment runs with a graph, the earlier ones only build the memory (Memformer, whose writer
learns only through the memory, back-propagates through every segment: see `grad_segments`).
The table reports the teacher-forced accuracy over the 20 target tokens on held-out sequences
(chance 5%); rows are numbers of segments, columns modules. ``transformer`` is the memory-less
baseline (it sees the last segment only); ``full-attention`` (not in the default list) is the
same Transformer given the whole sequence as one segment, an upper reference.

The defaults are CPU scale: segments of 32 tokens (the last holds 11 input tokens, SEP and the
20 targets), 2/4/8 segments (43/107/235 input tokens), d 64, 4 heads, 2 layers, 400 Adam steps of
32 fresh sequences, lr 5e-3 with 100 warm-up steps and cosine decay; two cells at a time in
forked processes of one thread each (``--jobs 2 --threads 1``). With 20 warm-up steps Memoria
stayed on the uniform-prediction plateau (loss ln 20) at 8 segments, as it did at lr 5e-3 with
another seed; 100 warm-up steps got it and ∞-former off it, so 100 is the default for all.

    python experiments/lm/sorting_table.py [--modules transformer memformer ...] [--segments 2 4 8]
        [--segment-length 32] [--steps 400] [--out table.md|table.csv]

``--task recall`` runs the long-range recall task instead (`lifelong.lm.recall`: three facts in
the first segment, the question at the end of the last; chance 1/16), on which every module
trains with a graph through all the segments (the memory must learn to keep the facts), and
``--curriculum`` gives every module RMT's curriculum over the number of segments.
``experiments/lm/recall_table.py`` is this script with ``--task recall``.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import MEMORY_MODULES, build_memory_module
from lifelong.encoders.rmt import curriculum_segments
from lifelong.encoders.segments import Transformer
from lifelong.lm.recall import RecallGenerator, RecallTask
from lifelong.lm.sorting import (
    VOCAB_SIZE,
    SortingLM,
    evaluate_sorting,
    sequence_length,
    train_sorting,
)

FULL_ATTENTION = "full-attention"
KNOWN = [*MEMORY_MODULES, FULL_ATTENTION]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=("sorting", "recall"), default="sorting")
    parser.add_argument(
        "--curriculum", action="store_true", help="RMT's curriculum over segments, every module"
    )
    parser.add_argument("--modules", nargs="+", default=list(MEMORY_MODULES), choices=KNOWN)
    parser.add_argument("--segments", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--segment-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--grad-segments", type=int, default=1)
    parser.add_argument("--eval-examples", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (0: leave as is); tiny models "
        "gain little from more, and an oversubscribed CPU slows them by orders of magnitude",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="cells trained in parallel processes (one per core)"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the table (.md/.csv)")
    args = parser.parse_args(argv)
    if any(k < 1 for k in args.segments):
        parser.error("--segments must be positive")
    if args.task == "sorting" and args.segment_length < 21:
        parser.error("--segment-length must be >= 21 (SEP + 20 targets sit in the last segment)")
    if args.task == "recall" and args.segment_length < RecallTask().min_length():
        parser.error(f"--segment-length must be >= {RecallTask().min_length()} for recall")
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    if args.out is not None and args.out.suffix not in (".md", ".csv"):
        parser.error("--out must end in .md or .csv")
    return args


def build_model(name: str, segments: int, args: argparse.Namespace) -> SortingLM:
    """The LM for one cell; ``full-attention`` reads the whole sequence as one segment."""
    torch.manual_seed(args.seed)
    length = segments * args.segment_length if name == FULL_ATTENTION else args.segment_length
    vocab = RecallTask().vocab_size if args.task == "recall" else VOCAB_SIZE
    config = ModuleConfig(
        vocab_size=vocab,
        d_model=args.d_model,
        heads=args.heads,
        layers=args.layers,
        ffn=2 * args.d_model,
        dropout=0.0,
        max_positions=length,
        causal=True,
    )
    if name == FULL_ATTENTION:
        module = Transformer(config)
    else:
        module = build_memory_module(name, config, args.segment_length)
    steps = grad_segments(name, segments, args)
    return SortingLM(module, length, grad_segments=steps, vocab_size=vocab)


def grad_segments(name: str, segments: int, args: argparse.Namespace) -> int:
    """Segments trained with a graph: Memformer's writer only learns through the memory, so it
    trains over the whole sequence (its paper's time horizon is 8 segments, here at most the
    sequence); the others over the last ``--grad-segments`` (1, as the ∞-former sorting code)."""
    if args.task == "recall":  # every module: the facts are only in the first segment
        return segments
    return max(args.grad_segments, segments) if name == "memformer" else args.grad_segments


def run_cell(name: str, segments: int, args: argparse.Namespace) -> float | None:
    """Train and evaluate one module at one number of segments; None if it is unavailable."""
    try:
        model = build_model(name, segments, args)
    except ImportError as error:
        print(f"skipping {name}: {error}", file=sys.stderr)
        return None
    n = sequence_length(segments, args.segment_length) if args.task == "sorting" else 0
    train_data, test_data = task_data(segments, args)
    start = time.perf_counter()
    losses = train_sorting(
        model,
        n,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup=args.warmup,
        seed=args.seed,
        data=train_data,
    )
    accuracy = evaluate_sorting(model, n, examples=args.eval_examples, data=test_data)
    print(
        f"{name:>16} segments={segments:<3} n={n:<5} loss {losses[-1]:.3f} "
        f"accuracy {100 * accuracy:.2f}%  ({time.perf_counter() - start:.1f}s)",
        file=sys.stderr,
    )
    return accuracy


def task_data(segments: int, args: argparse.Namespace) -> tuple[object, object]:
    """Training and held-out generators of the recall task (None, None: sorting's own)."""
    if args.task == "sorting":
        return None, None
    schedule = None
    if args.curriculum:

        def schedule(step: int) -> int:
            return curriculum_segments(step, args.steps, segments)

    task, length = RecallTask(), args.segment_length
    train = RecallGenerator(task, segments, length, seed=args.seed, curriculum=schedule)
    return train, RecallGenerator(task, segments, length, seed=10_000)


def markdown_table(results: dict[tuple[int, str], float | None], args: argparse.Namespace) -> str:
    header = "| Segments | " + " | ".join(args.modules) + " |"
    rule = "|---|" + "---|" * len(args.modules)
    rows = [header, rule]
    for k in args.segments:
        cells = [_cell(results.get((k, name))) for name in args.modules]
        rows.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def write_csv(path: Path, results: dict[tuple[int, str], float | None]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["segments", "module", "accuracy"])
        for (k, name), value in results.items():
            writer.writerow([k, name, "" if value is None else f"{value:.4f}"])


def run_cells(args: argparse.Namespace) -> dict[tuple[int, str], float | None]:
    """Every (segments, module) cell, in ``--jobs`` forked processes when more than one."""
    cells = [(k, name) for name in args.modules for k in args.segments]
    if args.jobs == 1 or len(cells) == 1:
        return {(k, name): _run(name, k, args) for k, name in cells}
    longest_first = sorted(cells, key=lambda cell: -cell[0])  # balances the workers
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        futures = {cell: pool.submit(_run, cell[1], cell[0], args) for cell in longest_first}
        return {cell: futures[cell].result() for cell in cells}


def _run(name: str, segments: int, args: argparse.Namespace) -> float | None:
    if args.threads:
        torch.set_num_threads(args.threads)
    return run_cell(name, segments, args)


def main(argv: Sequence[str] | None = None) -> dict[tuple[int, str], float | None]:
    args = parse_args(argv)
    start = time.perf_counter()
    results = run_cells(args)
    table = markdown_table(results, args)
    if args.task == "recall":
        task = RecallTask()
        what = (
            f"Recall accuracy (%) of the asked value ({task.facts} facts in segment 1, the "
            f"question at the end; every module trained through all segments"
            f"{', with the curriculum' if args.curriculum else ''})"
        )
        chance = f"{100 * task.chance:.2f}%"
    else:
        what, chance = "Sorting accuracy (%) over the 20 targets", "5%"
    settings = (
        f"{what}; segment length {args.segment_length}, "
        f"d {args.d_model}, {args.layers} layers, {args.steps} steps x {args.batch_size}, "
        f"lr {args.lr}, seed {args.seed}; chance {chance}; {time.perf_counter() - start:.0f}s."
    )
    print(f"{settings}\n\n{table}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if args.out.suffix == ".csv":
            write_csv(args.out, results)
        else:
            args.out.write_text(f"{settings}\n\n{table}\n")
    return results


if __name__ == "__main__":
    main()
