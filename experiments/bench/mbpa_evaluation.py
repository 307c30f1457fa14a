"""A text budget run's MbPA++ evaluations, whole, with the three exact savings and without.

`experiments/bench/evaluation.py` times each saving of an MbPA++ evaluation against its anchor
on its own; this times what a budget run spends evaluating. It builds MbPA++ with the text
budget's options (`experiments/text_classification/real_budget.yaml`: head scope, K = 32,
L = 30, batches of 64, MiniLM at 64 tokens), writes the training rows of order i into its
episodic memory (every one, as ``write_prob`` 1 does; 2,000 a dataset by default, the budget's
10,000), then runs the stream's evaluations (``--evaluations``, five on a five-task stream:
`lifelong.learner.evaluate_all_metrics` over every test set, as the learner calls it after
each task, the neighbours' cached prefixes forgotten before each as a task's training makes
them stale) two ways, in alternating rounds on the same model and memory:

* **before**: the key network's padded forward pass, the head-stage prefix with its whole last
  layer, and the test inputs keyed at every evaluation (the code before issue 67's savings);
* **now**: packed keys with the last layer at [CLS] alone (`KeyEncoder`), the prefix likewise
  (`frozen_prefix`'s ``pooled_only``), each test batch keyed once (`QueryKeys`).

It prints each way's median seconds for the evaluations, the ratio, the share of the
evaluation time saved, and each way's mean accuracy (the savings change values by float
rounding only, so the accuracies agree unless a rounding moves a neighbour).

    python experiments/bench/mbpa_evaluation.py [--data-dir ../shared/data/text_real]
        [--train-size 2000] [--test-size 300] [--evaluations 5] [--rounds 1]
        [--encoder minilm]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

import lifelong.mechanisms.neighbours as neighbours_module
import lifelong.memory.keys as keys_module
from lifelong import registry
from lifelong.experiment.config import from_dict
from lifelong.experiment.runs import build_model
from lifelong.learner import evaluate_all_metrics
from lifelong.memory import WriteAll
from lifelong.memory.keys import QueryKeys
from lifelong.strategy import StrategyContext
from lifelong.streams import batches, text_classification_stream

BUDGET_OPTIONS = {  # real_budget.yaml's mbpa++ options
    "replay_every": 160,
    "replay_ratio": 0.1,
    "adapt_scope": "head",
    "optimizer_per_task": True,
    "schedule_steps": 125,
}
EVAL_BATCH = 64  # real_budget.yaml: training.eval_batch_size
MAX_LENGTH = 64  # real_budget.yaml: task.max_length


@contextlib.contextmanager
def before_the_savings(writer: object) -> Iterator[None]:
    """The evaluation as it computed before issue 67: padded keys, the whole last layer in the
    head-stage prefix, every test batch keyed at every evaluation."""
    packs, pooled, queries = (
        keys_module.packs_keys,
        neighbours_module.reads_pooled_only,
        writer.queries,
    )
    keys_module.packs_keys = lambda device: False
    neighbours_module.reads_pooled_only = lambda head: False
    writer.queries = writer.key_encoder  # the same call, nothing kept
    try:
        yield
    finally:
        keys_module.packs_keys = packs
        neighbours_module.reads_pooled_only = pooled
        writer.queries = queries


def build(data_dir: Path | None, train_size: int, test_size: int, encoder: str):
    """MbPA++ at the budget's options, its memory holding every training row, and the stream."""
    stream = text_classification_stream(
        "i", data_dir=data_dir, train_size=train_size, test_size=test_size
    )
    config = from_dict(dict(encoder=encoder, max_length=MAX_LENGTH, seed=0))
    model, kind = build_model(config.encoder, config.task_settings(), stream, seed=0)
    context = StrategyContext(model, kind, lr=3e-5, batch_size=16, seed=0)
    strategy = registry.build("mbpa++", context, dict(BUDGET_OPTIONS))
    writer = strategy.replay.writer
    writer.memory.policy = WriteAll()
    for task in stream:
        for chunk in batches(task.train, EVAL_BATCH):
            writer.write(kind(chunk))
    return strategy, writer, stream, kind


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--train-size", type=int, default=2000, help="rows a dataset (budget's)")
    parser.add_argument("--test-size", type=int, default=300, help="rows a dataset (budget's)")
    parser.add_argument("--evaluations", type=int, default=5, help="one after each task")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of each way")
    parser.add_argument("--encoder", default="minilm", help="minilm (the bench), tiny (tests)")
    args = parser.parse_args(argv)
    for flag in ("train_size", "test_size", "evaluations", "rounds"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    torch.manual_seed(0)
    strategy, writer, stream, kind = build(
        args.data_dir, args.train_size, args.test_size, args.encoder
    )

    def evaluations() -> list[float]:
        means = []
        for _ in range(args.evaluations):
            # in a run each evaluation follows a task's training: the weights have moved, so
            # the neighbours' cached prefixes are recomputed (the frozen key network's keys
            # of the test inputs are not)
            strategy.adapter.reset_cache()
            scores = evaluate_all_metrics(strategy, stream, kind, batch_size=EVAL_BATCH,
                                          progress=False)  # fmt: skip
            means.append(float(np.mean(scores["accuracy"])))
        return means

    seconds: dict[str, list[float]] = {"before": [], "now": []}
    accuracy: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for way in seconds:
            writer.queries = QueryKeys(writer.key_encoder)  # as a fresh run: nothing keyed yet
            start = time.perf_counter()
            if way == "before":
                with before_the_savings(writer):
                    accuracy[way] = evaluations()
            else:
                accuracy[way] = evaluations()
            seconds[way].append(time.perf_counter() - start)
    before, now = (statistics.median(seconds[w]) for w in ("before", "now"))
    tests = sum(len(task.test) for task in stream)
    lines = [
        f"MbPA++ (budget options), memory of {len(writer.memory):,} training rows, "
        f"{args.evaluations} evaluations of {tests:,} test rows, {args.encoder}, "
        f"{torch.get_num_threads()} thread(s), median of {args.rounds} alternating round(s)",
        "",
        "| evaluations | seconds | mean accuracy, last evaluation |",
        "|---|---:|---:|",
        f"| before the savings | {before:.1f} | {accuracy['before'][-1]:.1f} |",
        f"| now | {now:.1f} | {accuracy['now'][-1]:.1f} |",
        "",
        f"before / now: {before / now:.2f}x; the evaluations' time falls by "
        f"{100 * (1 - now / before):.1f}%",
    ]
    print("\n".join(lines), flush=True)
    return lines


if __name__ == "__main__":
    main()
