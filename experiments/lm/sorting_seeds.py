"""The sorting (or recall) table over seeds, from the per-seed tables `sorting_table.py` wrote.

    python experiments/lm/sorting_seeds.py results/sorting/sorting_s0.md \
        results/sorting/sorting_s1.md [--out table.md]

Each input is one seed's ``--out`` table (rows: numbers of segments; columns: modules; cells:
accuracy %, two decimals). The output has a row per module (in the inputs' column order): the
mean accuracy over the seeds at each number of segments, the drop from the fewest to the most
segments, and each seed's accuracy at the most, so every number the encoders page prints of the
benchmark is this script's output on committed files.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

Cells = dict[tuple[str, int], float]


def read_table(text: str) -> tuple[list[str], list[int], Cells]:
    """Modules, numbers of segments and accuracies of one `sorting_table.py` markdown table."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    if len(lines) < 3 or not lines[0].startswith("| Segments |"):
        raise ValueError("not a sorting_table.py table (expected a '| Segments |' header)")
    modules = [c.strip() for c in lines[0].strip().strip("|").split("|")][1:]
    segments, cells = [], {}
    for line in lines[2:]:
        values = [c.strip() for c in line.strip().strip("|").split("|")]
        segments.append(int(values[0]))
        for module, value in zip(modules, values[1:]):
            if value != "n/a":
                cells[(module, int(values[0]))] = float(value)
    return modules, segments, cells


def seed_of(path: Path, text: str) -> int:
    """The seed a table was trained with (its settings line says ``seed N``)."""
    found = re.search(r"\bseed (\d+)\b", text)
    if found is None:
        raise ValueError(f"{path}: no 'seed N' in its settings line")
    return int(found.group(1))


def table(paths: Sequence[Path]) -> str:
    """The markdown table over the seeds of ``paths`` (see the module docstring)."""
    runs = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        runs.append((seed_of(path, text), *read_table(text)))
    runs.sort(key=lambda run: run[0])
    modules = list(dict.fromkeys(m for _, ms, _, _ in runs for m in ms))
    segments = sorted({k for _, _, ks, _ in runs for k in ks})
    low, high = segments[0], segments[-1]
    seeds = [seed for seed, *_ in runs]
    header = (
        "| module | "
        + " | ".join(f"{k} segments" for k in segments)
        + f" | drop, {low} → {high} | "
        + " | ".join(f"seed {s}, {high}" for s in seeds)
        + " |"
    )
    lines = [header, "|---|" + "---:|" * (len(segments) + 1 + len(seeds))]
    for module in modules:
        means = {k: _mean([cells.get((module, k)) for *_, cells in runs]) for k in segments}
        drops = [_difference(c.get((module, low)), c.get((module, high))) for *_, c in runs]
        drop = _mean(drops)  # each seed's own drop: a seed missing a cell adds none
        per_seed = [cells.get((module, high)) for *_, cells in runs]
        row = [_cell(means[k]) for k in segments] + [_cell(drop)] + [_cell(v) for v in per_seed]
        lines.append(f"| `{module}` | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    text = table(args.tables)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return text


if __name__ == "__main__":
    main()
