"""MbPA++ with a wider local-adaptation scope on the real text stream, against the budget's head.

    python experiments/text_classification/wider_scope.py --data-dir ../shared/data/text_real
        [--scope top1] [--orders i] [--seeds 0] [--output-dir runs] [--out table.md]

The CPU-budget protocol (``real_budget.yaml``) adapts only MbPA++'s classifier head at test
time; the paper adapts every weight (de Masson d'Autume et al., 2019, section 3.3), which costs
seconds per test example on 2 cores. This runs the budget's MbPA++ unchanged but for
``adapt_scope`` (default ``top1``: the top transformer layer and the head, whose last layer the
fast path computes at [CLS] alone) as a sweep of its own, ``<output-dir>/text_real_budget_<scope>/``
(resumable like ``lifelong sweep``; ``lifelong report`` reads it), and prints one row per scope:
mean and 95% CI of average accuracy, BWT and forgetting, then the paired difference of the
wider scope minus ``head`` over the orders × seeds both have run. The ``head`` rows are the
budget sweep's own MbPA++ runs (``<output-dir>/text_real_budget/``), run by
``lifelong sweep experiments/text_classification/real_budget.yaml``.

``--collected DIR`` tabulates the runs `experiments/collect_real_budget.sh` copied (``head``
from ``DIR/text``, the wider scope from ``DIR/text_<scope>``) and runs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Sequence
from pathlib import Path

from real_budget import add_grid_arguments, budget_sweep, collected, emit, run_all

from lifelong.experiment.reports.stats import compare, summary_rows, summary_table
from lifelong.experiment.rundir import RunRecord, find_runs
from lifelong.experiment.sweep import Sweep

STRATEGY = "mbpa++"
METRICS = ("average_accuracy", "bwt", "forgetting")


def at_scope(sweep: Sweep, scope: str) -> Sweep:
    """The budget sweep's MbPA++ alone, adapting ``scope`` at test time, in a folder of its own."""
    options = {name: dict(values) for name, values in sweep.base.strategy.options.items()}
    options.setdefault(STRATEGY, {})["adapt_scope"] = scope
    base = sweep.base.replace(strategy_options=options)
    return dataclasses.replace(
        sweep, name=f"{sweep.name}_{scope}", base=base, strategies=(STRATEGY,)
    )


def labelled(records: Sequence[RunRecord], scope: str) -> list[RunRecord]:
    """The MbPA++ runs among ``records``, their strategy named ``mbpa++ (<scope>)``."""
    return [
        dataclasses.replace(r, strategy=f"{STRATEGY} ({scope})")
        for r in records
        if r.strategy == STRATEGY
    ]


def table(head_root: Path, wide_root: Path, scope: str, grid: Collection[str] | None = None) -> str:
    """Markdown: a row per scope (mean [95% CI] per metric, runs), then wide − head, paired.

    Args:
        head_root: The budget sweep's folder (its MbPA++ runs adapt the head).
        wide_root: The wider scope's sweep folder.
        scope: The wider scope's name, e.g. ``top1``.
        grid: The run folder names of the grid (e.g. ``mbpa++_i_s0``); runs of other orders or
            seeds in either folder are left out (all of them if ``None``), so both rows count
            the same orders × seeds.

    """
    head = labelled(find_runs(head_root, names=grid), "head") if head_root.is_dir() else []
    wide = labelled(find_runs(wide_root, names=grid), scope) if wide_root.is_dir() else []
    lines = [
        "| MbPA++ adapts | average accuracy | BWT | forgetting | runs |",
        "|---|---|---|---|---|",
    ]
    records = head + wide
    if not records:
        return "\n".join(lines) + "\n"
    for _, strategy, runs, cells in summary_rows(summary_table(records, METRICS)):
        scope = strategy.split("(")[1].rstrip(")")
        lines.append(f"| {scope} | {' | '.join(cells)} | {runs} |")
    text = "\n".join(lines) + "\n"
    if head and wide:
        for c in compare(records, f"{STRATEGY} ({scope})", f"{STRATEGY} (head)"):
            text += f"\n{c.describe()}\n"
    return text


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scope", default="top1", help="adapt_scope: top<N>, all or lora")
    add_grid_arguments(parser)
    args = parser.parse_args(argv)

    budget = budget_sweep(args, [STRATEGY])
    sweep = at_scope(budget, args.scope)
    grid = {p.run_dir.name for p in budget.points()}
    if args.collected:
        dest = Path(args.collected)
        text = table(collected(dest, budget), collected(dest, sweep), args.scope, grid)
    else:
        run_all([sweep])
        text = table(budget.root, sweep.root, args.scope, grid)
    emit(text, args.out)


if __name__ == "__main__":
    main()
