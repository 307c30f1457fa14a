"""The forgetting/transfer table over runs (`report_table`) and its formatters.

See `lifelong.experiment.reports` for the table's shape.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from lifelong.experiment.rundir import (
    RunDirError,
    RunRecord,
    _is_number,
    as_records,
    run_settings,
)
from lifelong.streams.core import CUSTOM_PREFIX
from lifelong.streams.registry import STREAMS

log = logging.getLogger(__name__)

DEFAULT_METRICS = ("pooled_accuracy", "average_accuracy", "bwt", "fwt", "forgetting")
"""The metrics `report_table` reports unless told otherwise (keys of ``metrics.json``)."""

COST_METRICS = ("memory_examples", "memory_mb", "tflops", "minutes", "cpu_minutes")
"""What a run cost, beside its metrics in the summary: examples in memory at the end, the
bytes it holds beside its model (MB) and its compute (10^12 FLOPs; both measured, or derived for
runs written before they were counted: `lifelong.experiment.reports.costs`), wall
minutes (``minutes`` is ``metrics.json``'s ``seconds`` / 60, summed over resumed sittings) and
CPU minutes (``cpu_seconds`` / 60, all threads, likewise summed), which do not grow while a
run waits for a core another process holds (runs written before they were counted lack them)."""

METRIC_LABELS = {
    "pooled_accuracy": "pooled accuracy",
    "average_accuracy": "average accuracy",
    "bwt": "BWT",
    "fwt": "FWT",
    "forgetting": "forgetting",
    "memory_examples": "memory (examples)",
    "memory_mb": "memory (MB)",
    "probe_forgetting": "representation forgetting (probe)",
    "probe_share": "representation share of forgetting (%)",
    "head_forgetting": "head forgetting (the rest)",
    "probe_before": "probe accuracy, pre-trained",
    "probe_average_accuracy": "probe accuracy, final",
    "tflops": "compute (TFLOPs)",
    "minutes": "minutes per run",
    "cpu_minutes": "CPU minutes per run",
}
"""Human labels of metric keys; any other key is printed as it is."""


def score_name(stream: str) -> str:
    """What a stream's main metric is called: ``accuracy``, or ``F1`` for QA (its spec's)."""
    spec = STREAMS.get(stream)
    return spec.score_name if spec is not None else "accuracy"


def metric_label(metric: str, stream: str | None = None) -> str:
    """A metric key as a report names it on ``stream`` (``average_accuracy`` on QA: average F1)."""
    label = METRIC_LABELS.get(metric, metric)
    name = score_name(stream) if stream is not None else "accuracy"
    return label.replace("accuracy", name) if metric in POOLED_OR_AVERAGE else label


POOLED_OR_AVERAGE = ("pooled_accuracy", "average_accuracy")
"""The keys that hold the stream's main metric (accuracy, or F1 on QA), pooled or averaged."""


def shown_metrics(stream: str, metrics: Sequence[str]) -> tuple[str, ...]:
    """``metrics`` as ``stream``'s report shows them.

    The pooled accuracy is reported where it is the headline (FewRel: Holla et al. 2020
    report the accuracy on all relations' test sentences as one); elsewhere it repeats the
    average over tasks (equal test sets) and is shown only when asked for alone.
    """
    spec = STREAMS.get(stream)
    if len(metrics) == 1 or spec is None or spec.headline_metric == "pooled_accuracy":
        return tuple(metrics)
    return tuple(m for m in metrics if m != "pooled_accuracy")


STATS = ("mean", "std", "n")
AVERAGE = "average"
FORMATS = ("markdown", "latex", "csv")

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_K = TypeVar("_K")


def report_table(
    runs: Sequence[str | Path] | Sequence[RunRecord] | str | Path,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> pd.DataFrame:
    """Metrics over seeds, per stream, strategy and order: the library call behind the report.

    See the module docstring for the table's shape. Runs pooled as seeds of one cell should
    differ only in the seed; a warning is logged when they differ in a setting or share a seed.

    Args:
        runs: Paths to search (see `find_runs`) or records.
        metrics: ``metrics.json`` keys, one row each; ``"a.b"`` reads ``metrics["a"]["b"]``
            (e.g. ``"strategy.write_rate"``). A run without the key does not count towards n.

    Returns:
        Index (stream, strategy, metric); columns (order, stat) with stat mean, std, n.

    Raises:
        RunDirError: No run is found, a run is malformed, or no run has one of ``metrics``.

    """
    records = as_records(runs)
    metrics = tuple(metrics)
    check_metrics(records, metrics)
    _warn_pooled(records)
    orders = sorted({r.order for r in records}, key=lambda o: (o.startswith(CUSTOM_PREFIX), o))
    index, rows = [], []
    for (stream, strategy), group in _group(records, lambda r: (r.stream, r.strategy)).items():
        for metric in shown_metrics(stream, metrics):
            index.append((stream, strategy, metric))
            rows.append(_table_row(group, metric, orders))
    columns = pd.MultiIndex.from_product([[*orders, AVERAGE], STATS], names=["order", "stat"])
    table = pd.DataFrame(
        rows,
        index=pd.MultiIndex.from_tuples(index, names=["stream", "strategy", "metric"]),
        columns=columns,
    )
    return table.astype({c: "int64" if c[1] == "n" else "float64" for c in columns})


def _group(records: Iterable[RunRecord], key: Callable[[RunRecord], _K]) -> dict[_K, list]:
    groups: dict[_K, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


MINUTES = {"minutes": "seconds", "cpu_minutes": "cpu_seconds"}
"""Minute keys a report derives from ``metrics.json``'s second counts (key -> seconds key)."""


SCALED = {"tflops": ("total_flops", 1e12), "memory_mb": ("memory_bytes", 1e6)}
"""Cost keys a report derives from ``metrics.json``'s (key -> its key and the unit), measured
or, for runs that did not measure them, derived (`lifelong.experiment.reports.costs`)."""


SHARES = {"probe_share": ("probe_forgetting", "forgetting")}
"""Percentages a report derives from two ``metrics.json`` keys (key -> part, whole): the share of
a run's forgetting that is its encoder's (the probe's forgetting over the model's, Tao et al.,
ICLR 2023, §4); undefined where the run forgot nothing."""


def _metric(record: RunRecord, key: str) -> float | None:
    if key in SHARES and key not in record.metrics:
        part, whole = (_metric(record, k) for k in SHARES[key])
        return None if part is None or whole is None or whole <= 0 else 100 * part / whole
    if key in SCALED and key not in record.metrics:
        from lifelong.experiment.reports.costs import cost_value

        source, unit = SCALED[key]
        value = cost_value(record, source)
        return None if value is None else value / unit
    if key in MINUTES and key not in record.metrics:
        seconds = _metric(record, MINUTES[key])
        return None if seconds is None else seconds / 60
    value: Any = record.metrics
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if _is_number(value) and math.isfinite(value) else None


def _has(record: RunRecord, key: str) -> bool:
    """Whether ``metrics.json`` has the key (null included: undefined for this run)."""
    if key in SHARES and key not in record.metrics:
        return all(_has(record, k) for k in SHARES[key])
    if key in SCALED and key not in record.metrics:
        return _metric(record, key) is not None
    if key in MINUTES and key not in record.metrics:
        return _has(record, MINUTES[key])
    value: Any = record.metrics
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def check_metrics(records: Sequence[RunRecord], metrics: Sequence[str]) -> None:
    """Refuse a metric no run's ``metrics.json`` has (``a.b`` reads a nested key).

    Raises:
        RunDirError: Naming the metric and the numeric keys the runs have.

    """
    for metric in metrics:
        if not any(_has(r, metric) for r in records):
            keys = sorted(
                {k for r in records for k, v in r.metrics.items() if v is None or _is_number(v)}
                | ({*MINUTES} if any("seconds" in r.metrics for r in records) else set())
            )
            raise RunDirError(
                f"metric {metric!r}: no run's metrics.json has it; numeric keys: {', '.join(keys)}"
                " (a nested one as a.b, e.g. strategy.write_rate)"
            )


def _table_row(group: list[RunRecord], metric: str, orders: list[str]) -> list[float]:
    row: list[float] = []
    order_means = []
    for order in orders:
        values = [_metric(r, metric) for r in group if r.order == order]
        values = [v for v in values if v is not None]
        mean, std = _mean_std(values)
        row += [mean, std, len(values)]
        if values:
            order_means.append(mean)
    return row + [*_mean_std(order_means), len(order_means)]


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    std = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
    return float(np.mean(values)), std


def _warn_pooled(records: list[RunRecord]) -> None:
    for (stream, strategy, order), group in _group(records, lambda r: r.key).items():
        where = f"{strategy} on {stream}, order {order}"
        seeds = [r.seed for r in group]
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        if repeated:
            log.warning("%s: several runs with seed(s) %s, each counted as a seed", where, repeated)
        settings = [run_settings(r) for r in group if r.config]
        differing = sorted({k for s in settings for k in s if s.get(k) != settings[0].get(k)})
        if differing:
            log.warning("%s: runs pooled as seeds differ in %s", where, ", ".join(differing))


# --- formatters -----------------------------------------------------------------------------


@dataclass
class _Block:
    """One stream's slice of the table, ready to print."""

    stream: str
    orders: list[str]  # the orders with runs in this stream, then "average"
    rows: list[tuple[str, str, list[tuple[float, float, int]]]]  # strategy, metric, cells


def _blocks(table: pd.DataFrame) -> list[_Block]:
    blocks = []
    for stream in table.index.get_level_values("stream").unique():
        sub = table.xs(stream, level="stream")
        orders = _orders_with_runs(sub)
        rows = [
            (strategy, metric, [_cell(sub, (strategy, metric), o) for o in orders])
            for strategy, metric in sub.index
        ]
        blocks.append(_Block(str(stream), orders, rows))
    return blocks


def _orders_with_runs(table: pd.DataFrame) -> list[str]:
    orders = table.columns.get_level_values("order").unique()
    return [o for o in orders if o == AVERAGE or (table[(o, "n")] > 0).any()]


def _cell(table: pd.DataFrame, row: tuple[str, str], order: str) -> tuple[float, float, int]:
    return (
        float(table.at[row, (order, "mean")]),
        float(table.at[row, (order, "std")]),
        int(table.at[row, (order, "n")]),
    )


def _number(value: float, minus: str = "-") -> str:
    text = f"{value:.1f}"
    if text == "-0.0":
        text = "0.0"
    return minus + text[1:] if text.startswith("-") else text


def _format_cell(
    cell: tuple[float, float, int], *, pm: str = "±", minus: str = "-", missing: str = "–"
) -> str:
    mean, std, n = cell
    if n == 0 or math.isnan(mean):
        return missing
    if math.isnan(std):  # one seed (or one order): no spread to show
        return _number(mean, minus)
    return f"{_number(mean, minus)} {pm} {_number(std, minus)}"


def _seed_counts(block: _Block) -> str:
    counts = {c[2] for _, _, cells in block.rows for c in cells[:-1] if c[2] > 0}
    low, high = min(counts, default=0), max(counts, default=0)
    return str(low) if low == high else f"{low}–{high}"


def to_markdown(table: pd.DataFrame) -> str:
    """The table as Markdown: a ``## <stream>`` section and a pipe table per stream.

    Cells read ``85.4 ± 1.2`` (mean ± sample std over seeds); a single seed shows the mean
    alone; ``–`` marks an order without runs.

    Args:
        table: A `report_table` frame.

    Returns:
        The Markdown text.

    """
    sections = []
    for block in _blocks(table):
        header = ["strategy", "metric", *block.orders]
        lines = [
            f"## {block.stream}",
            "",
            f"Mean ± sample standard deviation over seeds ({_seed_counts(block)} per cell); "
            f"{AVERAGE}: mean of the order means ± their standard deviation across orders. "
            f"{score_name(block.stream).capitalize()} in %, BWT, FWT and forgetting in points.",
            "",
            _md_row(header),
            _md_row(["---", "---"] + ["---:"] * len(block.orders)),
        ]
        previous = None
        for strategy, metric, cells in block.rows:
            shown = strategy if strategy != previous else ""
            previous = strategy
            label = metric_label(metric, block.stream)
            lines.append(_md_row([shown, label, *map(_format_cell, cells)]))
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", r"\|") for c in cells) + " |"


def latex_escape(text: str) -> str:
    r"""``text`` with LaTeX's special characters (``& % $ # _ { } ~ ^ \``) escaped."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(table: pd.DataFrame) -> str:
    r"""The table as LaTeX: one booktabs ``tabular`` per stream (needs ``\usepackage{booktabs}``).

    Cells read ``85.4 $\pm$ 1.2``; names are escaped; ``--`` marks an order without runs.

    Args:
        table: A `report_table` frame.

    Returns:
        The LaTeX source.

    """
    return "\n".join(_latex_block(block) for block in _blocks(table))


def _latex_block(block: _Block) -> str:
    width = len(block.orders)
    lines = [
        f"% {block.stream}: mean $\\pm$ sample std over seeds ({_seed_counts(block)} per cell)",
        r"\begin{tabular}{ll" + "r" * width + "}",
        r"\toprule",
        rf"\multicolumn{{2}}{{l}}{{stream: {latex_escape(block.stream)}}} & "
        rf"\multicolumn{{{width}}}{{c}}{{order}} \\",
        rf"\cmidrule(lr){{3-{2 + width}}}",
        " & ".join(["strategy", "metric", *map(latex_escape, block.orders)]) + r" \\",
    ]
    previous = None
    for strategy, metric, cells in block.rows:
        if strategy != previous:
            lines.append(r"\midrule")
        texts = [_format_cell(c, pm=r"$\pm$", minus="$-$", missing="--") for c in cells]
        shown = latex_escape(strategy) if strategy != previous else ""
        label = latex_escape(metric_label(metric, block.stream))
        lines.append(" & ".join([shown, label, *texts]) + r" \\")
        previous = strategy
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def to_csv(table: pd.DataFrame) -> str:
    """The table as CSV text: columns stream, strategy, metric, then one per order and average.

    Cells read ``85.4 ± 1.2`` like the Markdown; an order without runs is empty. For the raw
    numbers use ``report_table(...).to_csv()``.

    Args:
        table: A `report_table` frame.

    Returns:
        The CSV text (UTF-8 when written).

    """
    orders = _orders_with_runs(table)
    rows = [
        {
            "stream": stream,
            "strategy": strategy,
            "metric": metric_label(metric, stream),
            **{
                o: _format_cell(_cell(table, (stream, strategy, metric), o), missing="")
                for o in orders
            },
        }
        for stream, strategy, metric in table.index
    ]
    buf = io.StringIO()
    frame = pd.DataFrame(rows, columns=["stream", "strategy", "metric", *orders])
    frame.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


FORMATTERS: dict[str, Callable[[pd.DataFrame], str]] = {
    "markdown": to_markdown,
    "latex": to_latex,
    "csv": to_csv,
}
