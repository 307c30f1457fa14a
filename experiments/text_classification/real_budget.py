"""The CPU-budget protocol (``real_budget.yaml``) as the checks on it start from it.

`replay_rate.py`, `wider_scope.py` and `long_inputs.py` each run variants of the budget sweep
(another replay rate, adaptation scope or reader), each in a folder of its own, and tabulate
them. What they share is here: the grid's command-line options, the budget sweep at that grid,
running sweeps, printing and writing the table, and where `experiments/collect_real_budget.sh`
copies a sweep's runs.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from lifelong.experiment.reports.stats import summary_rows, summary_table
from lifelong.experiment.rundir import find_runs
from lifelong.experiment.sweep import Sweep, load_sweep, run_sweep
from lifelong.files import atomic_write_text

BUDGET = Path(__file__).with_name("real_budget.yaml")
"""The budget protocol's sweep (name ``text_real_budget``)."""

_SWEEP = "text_real_budget"
_COPY = "text"  # what collect_real_budget.sh calls the budget sweep's folder, and its variants'


def add_grid_arguments(parser: argparse.ArgumentParser, *, collected: bool = True) -> None:
    """The options every check takes: data, grid, output folder, table file (``--collected``)."""
    parser.add_argument("--data-dir", help="the real text data (replaces the config's)")
    parser.add_argument("--orders", default="i")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--output-dir", default="runs")
    parser.add_argument("--out", help="also write the Markdown table here")
    if collected:
        parser.add_argument(
            "--collected",
            help="tabulate collect_real_budget.sh's copies in this folder; run nothing",
        )


def budget_sweep(args: argparse.Namespace, strategies: Sequence[str], **changes: object) -> Sweep:
    """The budget sweep at the options' grid, output folder and data, plus ``changes``.

    Args:
        args: Parsed options of `add_grid_arguments` (``--orders``, ``--seeds`` comma lists).
        strategies: The strategies of the grid.
        **changes: Further run-config changes (e.g. ``train_size``), as `Sweep.with_run`'s.

    Returns:
        The sweep; its folder is ``<output-dir>/text_real_budget``.

    """
    budget = load_sweep(BUDGET)
    budget = dataclasses.replace(budget, base=budget.base.replace(output_dir=args.output_dir))
    if args.data_dir:
        changes = {"data_dir": args.data_dir, **changes}
    if changes:
        budget = budget.with_run(**changes)
    seeds = [int(s) for s in args.seeds.split(",")]
    return budget.with_grid(list(strategies), args.orders.split(","), seeds)


def run_all(sweeps: Iterable[Sweep]) -> None:
    """Run every sweep (finished runs are skipped), a line per run: status, folder, error."""
    for sweep in sweeps:
        for result in run_sweep(sweep):
            print(f"{result.status:<9} {result.run_dir}  {result.error or ''}", flush=True)


def emit(text: str, out: str | None) -> None:
    """Print the table and, given ``out``, write it there atomically."""
    print("\n" + text)
    if out:
        atomic_write_text(out, text)


def summaries(
    root: Path, metrics: Sequence[str], grid: Collection[str] | None = None, *, pooled: str = ""
) -> list[tuple[str, int, list[str]]]:
    """Per strategy of the runs in ``root`` (none if it is missing): its name, runs, and the
    mean [95% CI] of each metric as `lifelong report` prints it; ``grid`` keeps only those run
    folders (a sweep's folder may hold other strategies, orders or seeds); ``pooled`` names one
    row over every run instead."""
    records = find_runs(root, names=grid) if root.is_dir() else []
    if pooled:
        records = [dataclasses.replace(r, strategy=pooled) for r in records]
    rows = summary_rows(summary_table(records, metrics)) if records else []
    return [(strategy, runs, cells) for _, strategy, runs, cells in sorted(rows)]


def collected(dest: Path, sweep: Sweep) -> Path:
    """Where `experiments/collect_real_budget.sh` copies ``sweep``'s runs under ``dest``.

    The budget sweep's folder ``text_real_budget`` becomes ``text`` and a variant's
    ``text_real_budget_<suffix>`` becomes ``text_<suffix>``; other sweeps keep their names
    (``replay_rate_<ratio>``).
    """
    name = sweep.name
    if name == _SWEEP or name.startswith(_SWEEP + "_"):
        name = _COPY + name[len(_SWEEP) :]
    return dest / name
