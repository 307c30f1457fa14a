"""Run strategies on the same stream and seed, and print the metrics table the results page shows.

    python experiments/strategy_table.py [--config CONFIG] [--stream text|qa|fewrel]
        [--strategies seq,replay,...] [--output-dir runs] [--out table.md]
    python experiments/strategy_table.py --collected DIR [--strategies ...] [--out table.md]

Defaults to the embedded demo config (bundled sample, order i, MiniLM) and every registered
strategy; each run also writes its own run directory. Columns: the four metrics (from the F1
matrix on QA; ``n/a`` where a metric is undefined, as BWT, FWT and forgetting are for a joint
learner), the examples the strategy's memory holds at the end, the replays it took, the wall minutes
the run took (its ``metrics.json`` ``seconds``) and its CPU minutes (``cpu_seconds``, all
threads: unlike wall minutes they do not grow while the run waits for a core another process
holds, so they compare runs made on a busy machine; blank for runs written before they were
counted). ``--collected DIR`` runs nothing: it prints the same table from the finished runs
under DIR (one per strategy), in registry order.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lifelong import registry
from lifelong.experiment.config import DEMO_CONFIG, load_yaml
from lifelong.experiment.rundir import find_runs
from lifelong.experiment.runs import run
from lifelong.files import atomic_write_text

HEADER = (
    "| strategy | average accuracy | BWT | FWT | forgetting | memory examples | replays | min "
    "| CPU min |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def cell(value: float | None) -> str:
    """A metric in the table's format (n/a where undefined)."""
    return "n/a" if value is None else f"{value:.1f}"


def row(name: str, metrics: Mapping[str, Any]) -> str:
    """One strategy's row from its run's ``metrics.json``."""
    report = metrics.get("strategy") or {}
    replays = report.get("replays", report.get("replay_episodes", report.get("meta_replays")))
    cpu = metrics.get("cpu_seconds")
    return (
        f"| {name} | {cell(metrics['average_accuracy'])} | {cell(metrics.get('bwt'))} "
        f"| {cell(metrics.get('fwt'))} | {cell(metrics.get('forgetting'))} "
        f"| {metrics.get('memory_examples', '')} | {'' if replays is None else replays} "
        f"| {metrics['seconds'] / 60:.1f} | {'' if cpu is None else f'{cpu / 60:.1f}'} |"
    )


def collected(root: Path, names: Sequence[str] | None = None) -> str:
    """The table of the finished runs under ``root``, one row per strategy in registry order.

    Raises:
        SystemExit: ``root`` holds two runs of one strategy, or none of a strategy asked for.
    """
    runs = {}
    for record in find_runs(root):
        if record.strategy in runs:
            raise SystemExit(f"{root}: two runs of {record.strategy!r}; expected one a strategy")
        runs[record.strategy] = record
    order = [n for n in registry.available() if n in runs] + sorted(
        n for n in runs if n not in registry.available()
    )
    wanted = list(names) if names else order
    missing = [n for n in wanted if n not in runs]
    if missing:
        raise SystemExit(f"{root}: no finished run of {', '.join(missing)}")
    return "\n".join([HEADER, *(row(n, runs[n].metrics) for n in wanted)]) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(DEMO_CONFIG))
    parser.add_argument("--stream", choices=["text", "qa", "fewrel"])
    parser.add_argument("--strategies", help="comma-separated (default: all registered)")
    parser.add_argument("--output-dir", default="runs")
    parser.add_argument("--collected", type=Path, help="tabulate the finished runs under DIR")
    parser.add_argument("--out", help="also write the Markdown table here")
    args = parser.parse_args(argv)
    names = args.strategies.split(",") if args.strategies else None

    if args.collected:
        table = collected(args.collected, names)
        print(table, end="")
    else:
        base = load_yaml(args.config).replace(output_dir=args.output_dir, progress=False)
        if args.stream:
            base = base.replace(stream=args.stream)
        lines = [HEADER]
        for name in names or registry.available():
            lines.append(row(name, run(base.replace(strategy=name)).metrics))
            print(lines[-1], flush=True)
        table = "\n".join(lines) + "\n"
        print(f"\n{base.stream.name} stream:\n{table}")
    if args.out:
        atomic_write_text(args.out, table)


if __name__ == "__main__":
    main()
