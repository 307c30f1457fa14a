"""Run strategies on the same stream and seed, and print the metrics table the README shows.

    python experiments/strategy_table.py [--config CONFIG] [--stream text|qa|fewrel]
        [--strategies seq,replay,...] [--output-dir runs] [--out table.md]

Defaults to the embedded demo config (bundled sample, order i, MiniLM) and every registered
strategy; each run also writes its own run directory. Columns: the four metrics (from the F1
matrix on QA), the examples the strategy's memory holds at the end, the replays it took, and
the wall time.
"""

from __future__ import annotations

import argparse
import time

from lifelong import registry
from lifelong.experiment.config import DEMO_CONFIG, load_yaml
from lifelong.experiment.runs import run
from lifelong.files import atomic_write_text


def cell(value: float | None) -> str:
    """A metric in the table's format (n/a where undefined)."""
    return "n/a" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(DEMO_CONFIG))
    parser.add_argument("--stream", choices=["text", "qa", "fewrel"])
    parser.add_argument("--strategies", help="comma-separated (default: all registered)")
    parser.add_argument("--output-dir", default="runs")
    parser.add_argument("--out", help="also write the Markdown table here")
    args = parser.parse_args()

    base = load_yaml(args.config).replace(output_dir=args.output_dir, progress=False)
    if args.stream:
        base = base.replace(stream=args.stream)
    names = args.strategies.split(",") if args.strategies else registry.available()
    lines = [
        "| strategy | average | BWT | FWT | forgetting | memory examples | replays | min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        start = time.perf_counter()
        m = run(base.replace(strategy=name)).metrics
        minutes = (time.perf_counter() - start) / 60
        report = m.get("strategy", {})
        replays = report.get("replays", report.get("replay_episodes", report.get("meta_replays")))
        lines.append(
            f"| {name} | {cell(m['average_accuracy'])} | {cell(m['bwt'])} | {cell(m['fwt'])} "
            f"| {cell(m['forgetting'])} | {m.get('memory_examples', '')} "
            f"| {'' if replays is None else replays} | {minutes:.1f} |"
        )
        print(lines[-1], flush=True)
    table = "\n".join(lines) + "\n"
    print(f"\n{base.stream.name} stream ({m['metric']}):\n{table}")
    if args.out:
        atomic_write_text(args.out, table)


if __name__ == "__main__":
    main()
