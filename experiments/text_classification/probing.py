"""Where the forgetting is: linear probes after each task, on the real text stream.

    python experiments/text_classification/probing.py --data-dir ../shared/data/text_real
        [--strategies seq,replay,mbpa++,er] [--orders i,ii] [--seeds 0] [--output-dir runs]
        [--out table.md] [--collected results/real_budget]

The CPU-budget protocol (``real_budget.yaml``) with ``--probe`` (`lifelong.probing`: a logistic
regression on the encoder's pooled vectors of each seen task's training rows, scored on its
test rows, after each task; Tao et al., ICLR 2023). Runs go to
``<output-dir>/text_real_budget_probe/`` (collected into ``results/real_budget/text_probe``):
the probes change nothing the run learns, so their accuracy matrices are the budget runs' own.
The table splits each strategy's forgetting into the probe's (representation forgetting) and
the rest (head and decision drift), mean [95% CI] over the runs, with the pre-trained
encoder's probe accuracy and the final one.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Sequence
from pathlib import Path

from real_budget import add_grid_arguments, budget_sweep, collected, emit, run_all, summaries

from lifelong.experiment.reports import PROBING_METRICS

METRICS = ("average_accuracy", *PROBING_METRICS)


def table(root: Path, grid: Collection[str] | None = None) -> str:
    """Markdown rows: strategy, runs, then mean [95% CI] of each metric; then one row over every
    run (``all``): how much of the forgetting is the representation's, whatever the strategy.
    ``grid`` keeps only those run folders (the strategies, orders and seeds asked for)."""
    header = "| strategy | runs | " + " | ".join(METRICS) + " |"
    lines = [header, "|---|---|" + "---|" * len(METRICS)]
    rows = summaries(root, METRICS, grid)
    if len(rows) > 1:
        rows += summaries(root, METRICS, grid, pooled="all")
    for strategy, runs, cells in rows:
        lines.append(f"| {strategy} | {runs} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategies", default="seq,replay,mbpa++,er")
    add_grid_arguments(parser)
    args = parser.parse_args(argv)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    budget = budget_sweep(args, strategies, probe=True)
    sweep = dataclasses.replace(budget, name=f"{budget.name}_probe")
    if args.collected:
        root = collected(Path(args.collected), sweep)
    else:
        run_all([sweep])
        root = sweep.root
    emit(table(root, {p.run_dir.name for p in sweep.points()}), args.out)


if __name__ == "__main__":
    main()
