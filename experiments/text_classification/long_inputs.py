"""Long inputs on the real text stream: memory-augmented readers against truncation and each other.

    python experiments/text_classification/long_inputs.py --data-dir ../shared/data/text_real
        [--strategy replay] [--orders i] [--seeds 0] [--train-size N] [--output-dir runs]
        [--readers minilm-128,minilm-512,rmt-minilm-64] [--out table.md]

The CPU-budget protocol (``real_budget.yaml``) truncates every row to 64 tokens; half of the
real Yelp reviews and a third of the Yahoo answers are longer than 128 MiniLM tokens. This runs
the budget's ``--strategy`` on the same stream with each reader, each a sweep of its own
(``<output-dir>/text_real_budget_long_<reader>/``, resumable like ``lifelong sweep``). The
default readers:

* ``minilm-128``: MiniLM reading each row truncated to 128 tokens (the papers' length:
  de Masson d'Autume et al., 2019, section 4);
* ``minilm-512``: MiniLM reading up to 512 tokens, its position limit, in one pass;
* ``rmt-minilm-64``: ``rmt-minilm`` reading the same 512 tokens as 64-token segments, its 10
  memory tokens carried from segment to segment (Bulatov et al., 2023; `lifelong.encoders.rmt`).

ERNIE-Doc's retrospective feed (Ding et al. 2021, section 3.1) is measured by three more, all
randomly initialised (`TEXT_MODULE_SIZES`, the from-scratch learning rate 1e-3), reading 256
tokens as 32-token segments:

* ``ernie-doc-32``: ERNIE-Doc as designed, two passes (the second from the first's memory);
* ``ernie-doc-32-once``: the same module read once (``document_passes: 1``), no feed;
* ``transformer-xl-32``: Transformer-XL, whose recurrence ERNIE-Doc's enhances.

It prints one row per reader (mean and 95% CI of average accuracy, BWT and forgetting, and
minutes per run), then the paired differences of `PAIRS` over the orders × seeds both have run.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path

from real_budget import add_grid_arguments, budget_sweep, emit, run_all

from lifelong.experiment.reports.stats import compare, summary_rows, summary_table
from lifelong.experiment.rundir import RunRecord, find_runs
from lifelong.experiment.sweep import Sweep

METRICS = ("average_accuracy", "bwt", "forgetting")

_FROM_SCRATCH: dict[str, object] = {"segment_length": 32, "max_length": 256, "lr": 1e-3}
"""A randomly initialised module's reading: 256 tokens as 8 segments, a from-scratch rate."""

READERS: dict[str, dict[str, object]] = {
    "minilm-128": {"encoder": "minilm", "max_length": 128},
    "minilm-512": {"encoder": "minilm", "max_length": 512},
    "rmt-minilm-64": {"encoder": "rmt-minilm", "segment_length": 64, "max_length": 512},
    "ernie-doc-32": {**_FROM_SCRATCH, "encoder": "ernie-doc"},
    "ernie-doc-32-once": {**_FROM_SCRATCH, "encoder": "ernie-doc", "document_passes": 1},
    "transformer-xl-32": {**_FROM_SCRATCH, "encoder": "transformer-xl"},
}
"""Each reader's run-config changes to the budget (every other setting is the budget's)."""

DEFAULT_READERS = ("minilm-128", "minilm-512", "rmt-minilm-64")

PAIRS: tuple[tuple[str, str], ...] = (
    ("rmt-minilm-64", "minilm-128"),
    ("rmt-minilm-64", "minilm-512"),
    ("ernie-doc-32", "ernie-doc-32-once"),  # the retrospective feed
    ("ernie-doc-32-once", "transformer-xl-32"),  # the enhanced (same-layer) recurrence
    ("ernie-doc-32", "transformer-xl-32"),  # both
)
"""Paired differences printed (first minus second) where both readers have runs."""


def reading(sweep: Sweep, reader: str, strategy: str) -> Sweep:
    """The budget sweep's ``strategy`` alone, read by ``reader``, in a folder of its own."""
    base = sweep.base.replace(**READERS[reader])
    return dataclasses.replace(
        sweep, name=f"{sweep.name}_long_{reader}", base=base, strategies=(strategy,)
    )


def labelled(records: Sequence[RunRecord], reader: str) -> list[RunRecord]:
    """``records`` with their strategy named ``<strategy> (<reader>)``."""
    return [dataclasses.replace(r, strategy=f"{r.strategy} ({reader})") for r in records]


def table(roots: dict[str, Path], strategy: str) -> str:
    """Markdown: a row per reader (mean [95% CI] per metric, minutes, runs), then the pairs."""
    found = {
        reader: labelled([r for r in find_runs(root) if r.strategy == strategy], reader)
        for reader, root in roots.items()
        if root.is_dir()
    }
    lines = [
        f"| {strategy} reads | average accuracy | BWT | forgetting | minutes per run | runs |",
        "|---|---|---|---|---|---|",
    ]
    records = [r for runs in found.values() for r in runs]
    if not records:
        return "\n".join(lines) + "\n"
    minutes = {
        reader: statistics.fmean(r.metrics["seconds"] / 60 for r in runs)
        for reader, runs in found.items()
        if runs and all("seconds" in r.metrics for r in runs)
    }
    for _, label, runs, cells in summary_rows(summary_table(records, METRICS)):
        reader = label.split("(")[1].rstrip(")")
        spent = f"{minutes[reader]:.1f}" if reader in minutes else "–"
        lines.append(f"| {reader} | {' | '.join(cells)} | {spent} | {runs} |")
    text = "\n".join(lines) + "\n"
    for first, second in PAIRS:
        if found.get(first) and found.get(second):
            for c in compare(records, f"{strategy} ({first})", f"{strategy} ({second})"):
                text += f"\n{c.describe()}\n"
    return text


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", default="replay")
    parser.add_argument("--train-size", type=int, help="training rows per task (budget's: 2000)")
    parser.add_argument(
        "--readers", default=",".join(DEFAULT_READERS), help=f"any of {', '.join(READERS)}"
    )
    add_grid_arguments(parser, collected=False)
    args = parser.parse_args(argv)
    readers = [r.strip() for r in args.readers.split(",") if r.strip()]
    unknown = [r for r in readers if r not in READERS]
    if unknown or not readers:
        parser.error(f"--readers: unknown {unknown[0] if unknown else '(none)'!r}; "
                     f"known: {', '.join(READERS)}")  # fmt: skip

    changes = {"train_size": args.train_size} if args.train_size else {}
    budget = budget_sweep(args, [args.strategy], **changes)
    sweeps = {reader: reading(budget, reader, args.strategy) for reader in readers}
    run_all(sweeps.values())
    emit(table({reader: sweep.root for reader, sweep in sweeps.items()}, args.strategy), args.out)


if __name__ == "__main__":
    main()
