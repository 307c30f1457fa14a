"""NCM and RanPAC after SEQ*'s first-task warm-up, against the same on the pre-trained encoder.

    python experiments/text_classification/warmed_prototypes.py --data-dir ../shared/data/text_real
        [--fraction 0.375] [--strategies ncm,ranpac] [--orders i,ii,iii,iv] [--seeds 0,1]
        [--output-dir runs] [--out table.md] [--collected results/real_budget]

Starts from the CPU-budget protocol (``real_budget.yaml``) and sets ``warmup_fraction`` (SEQ*'s
0.375: the first 3/8 of the first task's mini-batches train the whole model before the encoder
is frozen, `lifelong.mechanisms.warmup`). The warmed runs go to
``<output-dir>/text_real_budget_warm/`` (collected into ``results/real_budget/text_warm``); the
unwarmed ones are the budget sweep's own. The table gives each strategy's average accuracy and
forgetting with and without the warm-up, mean [95% CI] over the runs, beside SEQ and SEQ*.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from real_budget import add_grid_arguments, budget_sweep, collected, emit, run_all, summaries

from lifelong.experiment.sweep import Sweep

METRICS = ("average_accuracy", "forgetting")
COMPARED = ("seq", "seq-star")  # the budget sweep's rows the warm-up is judged against


def warmed(sweep: Sweep, fraction: float, strategies: Sequence[str]) -> Sweep:
    """The budget sweep with each strategy warming up on ``fraction`` of the first task."""
    options = {name: dict(values) for name, values in sweep.base.strategy.options.items()}
    for name in strategies:
        options.setdefault(name, {})["warmup_fraction"] = fraction
    base = sweep.base.replace(strategy_options=options)
    return dataclasses.replace(sweep, name=f"{sweep.name}_warm", base=base)


def table(roots: dict[str, Path], grid: set[str]) -> str:
    """Markdown rows: strategy, warm-up, then mean [95% CI] of each metric and the runs."""
    lines = [
        "| strategy | warm-up | average accuracy | forgetting | runs |",
        "|---|---|---|---|---|",
    ]
    for label, root in roots.items():
        for strategy, runs, cells in summaries(root, METRICS, grid):
            lines.append(f"| {strategy} | {label} | {' | '.join(cells)} | {runs} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fraction", type=float, default=0.375)
    parser.add_argument("--strategies", default="ncm,ranpac")
    add_grid_arguments(parser)
    args = parser.parse_args(argv)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    budget = budget_sweep(args, [*strategies, *COMPARED])
    warm = warmed(budget_sweep(args, strategies), args.fraction, strategies)
    if args.collected:
        roots = {"none": collected(Path(args.collected), budget)}
        roots[f"{args.fraction:g}"] = collected(Path(args.collected), warm)
    else:
        run_all([budget, warm])
        roots = {"none": budget.root, f"{args.fraction:g}": warm.root}
    emit(table(roots, {p.run_dir.name for p in budget.points()}), args.out)


if __name__ == "__main__":
    main()
