"""Replay-rate ablation on the real text stream: accuracy of REPLAY and MbPA++ against the rate.

    python experiments/text_classification/replay_rate.py --data-dir ../shared/data/text_real
        [--ratios 0.025,0.05,0.1,0.2] [--strategies replay,mbpa++] [--orders i] [--seeds 0]
        [--output-dir runs] [--out table.md]

Starts from the CPU-budget protocol (``real_budget.yaml``: a replay event every 160 examples)
and changes only ``replay_ratio``, the fraction of the examples since the last event that an
event replays: 0.025, 0.05, 0.1 and 0.2 replay 4, 8, 16 and 32 stored examples per event
(2.5%, 5%, 10% and 20% of the stream). Each rate is its own sweep
(``<output-dir>/replay_rate_<ratio>/``; the budget's own rate is the budget sweep's folder,
``<output-dir>/text_real_budget/``, whose runs it reuses), so the script resumes like
``lifelong sweep`` and ``lifelong report`` reads its runs. It prints one row per (strategy,
rate): the mean and 95% CI of average accuracy and forgetting over the orders and seeds run,
so one can see whether the budget's rate (0.1) favours one strategy. Each row counts only the
runs of the grid asked for (``--strategies``, ``--orders``, ``--seeds``): the budget's folder
also holds the other strategies, orders and seeds of the main table.

``--collected DIR`` tabulates the runs `experiments/collect_real_budget.sh` copied (the
budget's rate from ``DIR/text``, the others from ``DIR/replay_rate_<ratio>``) and runs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Sequence
from pathlib import Path

from real_budget import add_grid_arguments, budget_sweep, collected, emit, run_all

from lifelong.experiment.reports.stats import summary_rows, summary_table
from lifelong.experiment.rundir import find_runs
from lifelong.experiment.sweep import Sweep

METRICS = ("average_accuracy", "forgetting")


def at_ratio(sweep: Sweep, ratio: float, strategies: list[str]) -> Sweep:
    """The budget sweep with every given strategy replaying ``ratio`` per event.

    At the budget's own rate (every given strategy already replays ``ratio``) it is the budget
    sweep itself, so the ablation reads the budget's runs instead of repeating them.
    """
    own = sweep.base.strategy.options
    if all(own.get(name, {}).get("replay_ratio") == ratio for name in strategies):
        return sweep
    options = {name: dict(values) for name, values in sweep.base.strategy.options.items()}
    for name in strategies:
        options.setdefault(name, {})["replay_ratio"] = ratio
    base = sweep.base.replace(strategy_options=options)
    return dataclasses.replace(sweep, name=f"replay_rate_{ratio:g}", base=base)


def table(roots: dict[float, Path], grid: Collection[str] | None = None) -> str:
    """Markdown rows: strategy, rate, then mean [95% CI] of each metric and the runs behind it.

    Args:
        roots: Each rate's sweep folder.
        grid: The run folder names of the grid (e.g. ``replay_i_s0``); runs of other
            strategies, orders or seeds in a folder are left out (all of them if ``None``).

    """
    lines = [
        "| strategy | replay_ratio | replayed per event | average accuracy | forgetting | runs |",
        "|---|---|---|---|---|---|",
    ]
    for ratio, root in roots.items():
        if not root.is_dir():  # a rate not run (yet)
            continue
        records = find_runs(root, names=grid)
        if not records:
            continue
        for _, strategy, runs, cells in sorted(summary_rows(summary_table(records, METRICS))):
            replayed = round(ratio * _replay_every(records, strategy))
            lines.append(f"| {strategy} | {ratio:g} | {replayed} | {' | '.join(cells)} | {runs} |")
    return "\n".join(lines) + "\n"


def _replay_every(records: list, strategy: str) -> int:
    """The strategy's replay interval in examples, as its runs were configured."""
    config = next(r.config for r in records if r.strategy == strategy)
    return int(config["strategy_options"][strategy]["replay_every"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ratios", default="0.025,0.05,0.1,0.2")
    parser.add_argument("--strategies", default="replay,mbpa++")
    add_grid_arguments(parser)
    args = parser.parse_args(argv)

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    budget = budget_sweep(args, strategies)
    sweeps = {
        ratio: at_ratio(budget, ratio, strategies) for ratio in map(float, args.ratios.split(","))
    }
    if args.collected:
        roots = {ratio: collected(Path(args.collected), sweep) for ratio, sweep in sweeps.items()}
    else:
        run_all(sweeps.values())
        roots = {ratio: sweep.root for ratio, sweep in sweeps.items()}
    emit(table(roots, {p.run_dir.name for p in budget.points()}), args.out)


if __name__ == "__main__":
    main()
