"""ER's memory size on the real text stream: M = 200 (Avalanche's) against the budget's 10,000.

    python experiments/text_classification/er_memory.py --data-dir ../shared/data/text_real
        [--sizes 200,10000] [--orders i,ii,iii,iv] [--seeds 0,1] [--output-dir runs]
        [--out table.md] [--collected results/real_budget]

Starts from the CPU-budget protocol (``real_budget.yaml``) and changes only ER's
``memory_size``. The budget's own size (10,000, the memory MbPA++ keeps) runs in the budget
sweep's folder (``<output-dir>/text_real_budget/``, collected into ``results/real_budget/text``);
any other size M in ``<output-dir>/text_real_budget_er<M>/`` (collected into
``results/real_budget/text_er<M>``). M = 200 is ``avalanche:replay``'s memory on the same
stream, so that row and ER's differ only in how the buffer is kept (a reservoir against
Avalanche's experience-balanced buffer) and in what is joined to each batch. The table gives
each size's average accuracy and forgetting, mean [95% CI] over the runs.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from real_budget import add_grid_arguments, budget_sweep, collected, emit, run_all, summaries

from lifelong.experiment.sweep import Sweep

METRICS = ("average_accuracy", "forgetting")


def at_size(sweep: Sweep, size: int) -> Sweep:
    """The budget sweep with ER holding ``size`` examples (the budget sweep at its own size)."""
    options = {name: dict(values) for name, values in sweep.base.strategy.options.items()}
    if options.get("er", {}).get("memory_size") == size:
        return sweep
    options.setdefault("er", {})["memory_size"] = size
    base = sweep.base.replace(strategy_options=options)
    return dataclasses.replace(sweep, name=f"{sweep.name}_er{size}", base=base)


def table(roots: dict[int, Path], grid: set[str]) -> str:
    """Markdown rows: memory size, then mean [95% CI] of each metric and the runs behind it."""
    lines = ["| memory_size | average accuracy | forgetting | runs |", "|---|---|---|---|"]
    for size, root in roots.items():
        for _, runs, cells in summaries(root, METRICS, grid):
            lines.append(f"| {size} | {' | '.join(cells)} | {runs} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="200,10000")
    add_grid_arguments(parser)
    args = parser.parse_args(argv)
    budget = budget_sweep(args, ["er"])
    sweeps = {size: at_size(budget, size) for size in map(int, args.sizes.split(","))}
    if args.collected:
        roots = {size: collected(Path(args.collected), s) for size, s in sweeps.items()}
    else:
        run_all(sweeps.values())
        roots = {size: sweep.root for size, sweep in sweeps.items()}
    emit(table(roots, {p.run_dir.name for p in budget.points()}), args.out)


if __name__ == "__main__":
    main()
