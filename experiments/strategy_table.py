"""Run every registered strategy on the same stream and seed, and print the metrics table.

    python experiments/strategy_table.py [--config CONFIG] [--strategies seq,replay,...]
        [--out table.md]

Defaults to the embedded demo config (bundled sample, order i, MiniLM); each run also writes its
own run directory. The Markdown table is what the README shows.
"""

from __future__ import annotations

import argparse
import time

from lifelong import registry
from lifelong.config import DEMO_CONFIG, load_yaml
from lifelong.runs import run
from lifelong.utils import atomic_write_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(DEMO_CONFIG))
    parser.add_argument("--strategies", help="comma-separated (default: all registered)")
    parser.add_argument("--output-dir", default="runs")
    parser.add_argument("--out", help="also write the Markdown table here")
    args = parser.parse_args()

    base = load_yaml(args.config).replace(output_dir=args.output_dir, progress=False)
    names = args.strategies.split(",") if args.strategies else registry.names()
    lines = [
        "| strategy | average accuracy | BWT | FWT | forgetting | minutes |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        start = time.perf_counter()
        m = run(base.replace(strategy=name)).metrics
        minutes = (time.perf_counter() - start) / 60
        lines.append(
            f"| {name} | {m['average_accuracy']:.1f} | {m['bwt']:.1f} | {m['fwt']:.1f} "
            f"| {m['forgetting']:.1f} | {minutes:.1f} |"
        )
        print(lines[-1], flush=True)
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        atomic_write_text(args.out, table)


if __name__ == "__main__":
    main()
