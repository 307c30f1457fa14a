"""Statistics over runs: means with confidence intervals, and paired comparisons of strategies.

Continual-learning results move a lot with the task order and the seed, so one run says little
about a difference between two strategies. Here every run of a strategy on a stream is one
sample (all orders × seeds of it), and:

* `summary_table`: per (stream, strategy, metric), the mean over runs, the sample standard
  deviation, and a 95% confidence interval of the mean (Student's t with n − 1 degrees of
  freedom: ``mean ± t · s / √n``);
* `compare`: strategy A against strategy B on the runs they share, paired by (order, seed) —
  the same task order and seed, so the same data and initial weights — as the mean paired
  difference with a 95% interval (t on the differences, or a percentile bootstrap of their mean)
  and whether the interval excludes zero;
* `pairwise_table`: `compare` for every pair of strategies of a stream.

A difference "holds" when its interval excludes zero; an interval that includes zero leaves it
"not resolved" (the runs cannot tell the two apart), which is not evidence of no difference.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from lifelong.experiment.reports.tables import (
    DEFAULT_METRICS,
    _group,
    _metric,
    metric_label,
    shown_metrics,
)
from lifelong.experiment.rundir import RunDirError, RunRecord
from lifelong.streams.registry import STREAMS

log = logging.getLogger(__name__)

CONFIDENCE = 0.95
"""The confidence level of every interval here."""


def headline_metric(stream: str) -> str:
    """The metric a stream's papers compare strategies by: its spec's ``headline_metric``.

    Lifelong FewRel's is the pooled test set's accuracy; ``average_accuracy`` for the others
    and for a stream no spec knows.
    """
    spec = STREAMS.get(stream)
    return spec.headline_metric if spec is not None else "average_accuracy"


BOOTSTRAP_SAMPLES = 10_000
"""Resamples of a percentile-bootstrap interval (seeded: the same runs give the same interval)."""

Method = Literal["t", "bootstrap"]


@dataclass(frozen=True)
class Interval:
    """A mean over runs with its 95% confidence interval.

    Attributes:
        mean: The mean.
        std: The sample standard deviation (NaN with one value).
        low: Lower end of the interval (NaN with fewer than two values).
        high: Upper end.
        n: The number of values.

    """

    mean: float
    std: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        """``(high − low) / 2``: the ± of a t interval."""
        return (self.high - self.low) / 2

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly above or wholly below zero."""
        return self.low > 0 or self.high < 0


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean, sample std and the Student-t interval of the mean (NaN ends with n < 2)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, 1)
    std = float(x.std(ddof=1))
    half = float(scipy_stats.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return Interval(mean, std, mean - half, mean + half, n)


BOOTSTRAP_MIN_PAIRS = 10
"""Fewer paired runs than this, and a percentile bootstrap's interval is too narrow to trust.

The percentile interval of a mean is narrower than the t interval at small n: the resampled
means spread with variance (n − 1)/n · s²/n, and their percentiles are the normal's, not t's
(Efron & Tibshirani, 1993, ch. 13-14). `Comparison.describe` then reports the t interval and its
verdict beside it."""


def bootstrap_interval(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> Interval:
    """Mean and the percentile-bootstrap interval of the mean (resampling the values)."""
    x = np.asarray(values, dtype=float)
    base = t_interval(x, confidence)
    if len(x) < 2:
        return base
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(base.mean, base.std, float(low), float(high), len(x))


def interval(values: Sequence[float], method: Method = "t") -> Interval:
    """`t_interval` or `bootstrap_interval` by ``method``."""
    if method == "t":
        return t_interval(values)
    if method == "bootstrap":
        return bootstrap_interval(values)
    raise ValueError(f"method {method!r}: expected t or bootstrap")


# --- over runs ------------------------------------------------------------------------------


def summary_table(
    records: Sequence[RunRecord], metrics: Sequence[str] = DEFAULT_METRICS
) -> pd.DataFrame:
    """Every metric over all runs (orders × seeds) of each strategy, with its 95% t interval.

    Args:
        records: Finished runs (`lifelong.experiment.rundir.find_runs`).
        metrics: ``metrics.json`` keys (``"a.b"`` for nested ones).

    Returns:
        Index (stream, strategy, metric), columns ``mean``, ``std``, ``low``, ``high``, ``n``
        (runs with the metric), ``orders`` and ``seeds`` (distinct ones among them).

    """
    rows, index = [], []
    for (stream, strategy), group in _by_strategy(records).items():
        for metric in shown_metrics(stream, metrics):
            found = [(r, v) for r in group if (v := _metric(r, metric)) is not None]
            ci = t_interval([v for _, v in found])
            orders = len({r.order for r, _ in found})
            seeds = len({r.seed for r, _ in found})
            rows.append([ci.mean, ci.std, ci.low, ci.high, ci.n, orders, seeds])
            index.append((stream, strategy, metric))
    columns = ["mean", "std", "low", "high", "n", "orders", "seeds"]
    frame = pd.DataFrame(
        rows,
        index=pd.MultiIndex.from_tuples(index, names=["stream", "strategy", "metric"]),
        columns=columns,
    )
    return frame.astype({"n": "int64", "orders": "int64", "seeds": "int64"})


@dataclass(frozen=True)
class Comparison:
    """Strategy ``a`` minus strategy ``b`` on one stream, paired by (order, seed).

    Attributes:
        stream: The stream.
        a: The first strategy.
        b: The second.
        metric: The metric compared.
        difference: The mean paired difference ``a − b`` with its interval.
        method: ``"t"`` or ``"bootstrap"``.
        pairs: The (order, seed) pairs both have, sorted.
        t_difference: With ``"bootstrap"`` on fewer than `BOOTSTRAP_MIN_PAIRS` pairs: the t
            interval of the same differences, reported beside it; else None.

    """

    stream: str
    a: str
    b: str
    metric: str
    difference: Interval
    method: str
    pairs: tuple[tuple[str, int], ...]
    t_difference: Interval | None = None

    @property
    def verdict(self) -> str:
        """``"a > b"``, ``"a < b"`` (the interval excludes zero) or ``"not resolved"``."""
        return self._verdict(self.difference)

    def _verdict(self, d: Interval) -> str:
        if math.isnan(d.low):
            return "not resolved"
        if d.low > 0:
            return f"{self.a} > {self.b}"
        if d.high < 0:
            return f"{self.a} < {self.b}"
        return "not resolved"

    def describe(self) -> str:
        """One line: the difference, its interval, the pairs and the verdict."""
        d = self.difference
        label = metric_label(self.metric, self.stream)
        if d.n == 0:
            return f"{self.stream}: {self.a} vs {self.b}: no (order, seed) in common"
        spread = (
            f"95% CI [{d.low:+.1f}, {d.high:+.1f}] ({self.method})"
            if not math.isnan(d.low)
            else "no interval (one pair)"
        )
        line = (
            f"{self.stream}: {label} {self.a} − {self.b} = {d.mean:+.1f} points, {spread}, "
            f"{d.n} paired runs: {self.verdict}"
        )
        t = self.t_difference
        if t is not None and not math.isnan(t.low):
            line += (
                f" (warning: a bootstrap over fewer than {BOOTSTRAP_MIN_PAIRS} pairs is too "
                f"narrow; t: [{t.low:+.1f}, {t.high:+.1f}], {self._verdict(t)})"
            )
        return line


def compare(
    records: Sequence[RunRecord],
    a: str,
    b: str,
    metric: str = "average_accuracy",
    *,
    method: Method = "t",
    stream: str | None = None,
) -> list[Comparison]:
    """Paired differences of ``a`` and ``b`` on every stream where both ran (or ``stream``).

    Runs pair when they share the stream, the order and the seed. A run without the metric
    (null, e.g. BWT of one task) pairs with nothing.

    Raises:
        RunDirError: ``a`` or ``b`` has no run (on ``stream``), naming the strategies found.

    """
    runs = [r for r in records if stream is None or r.stream == stream]
    names = sorted({r.strategy for r in runs})
    for name in (a, b):
        if name not in names:
            where = f" on stream {stream!r}" if stream else ""
            raise RunDirError(f"no run of strategy {name!r}{where}; strategies: {names}")
    out = []
    for s in sorted({r.stream for r in runs}):
        left = _values(runs, s, a, metric)
        right = _values(runs, s, b, metric)
        if not left or not right:
            continue
        pairs = tuple(sorted(set(left) & set(right)))
        diffs = [left[p] - right[p] for p in pairs]
        t = (
            t_interval(diffs)
            if method == "bootstrap" and len(diffs) < BOOTSTRAP_MIN_PAIRS
            else None
        )
        out.append(Comparison(s, a, b, metric, interval(diffs, method), method, pairs, t))
    return out


def pairwise_table(
    records: Sequence[RunRecord],
    metric: str | None = None,
    *,
    method: Method = "t",
) -> pd.DataFrame:
    """`compare` for every pair of strategies of each stream.

    ``metric`` defaults to each stream's own (`headline_metric`: FewRel's pooled accuracy).

    Returns:
        One row per (stream, a, b) with ``a`` before ``b`` in order of first appearance:
        columns ``metric``, ``difference`` (mean of a − b), ``low``, ``high``, ``pairs`` and
        ``verdict``.

    """
    rows, index = [], []
    for (stream,), group in _group(records, lambda r: (r.stream,)).items():
        strategies = list(dict.fromkeys(r.strategy for r in group))
        measure = metric or headline_metric(stream)
        for a, b in combinations(strategies, 2):
            for c in compare(group, a, b, measure, method=method, stream=stream):
                d = c.difference
                rows.append([measure, d.mean, d.low, d.high, d.n, c.verdict])
                index.append((stream, a, b))
    frame = pd.DataFrame(
        rows,
        index=pd.MultiIndex.from_tuples(index, names=["stream", "a", "b"]),
        columns=["metric", "difference", "low", "high", "pairs", "verdict"],
    )
    return frame.astype({"pairs": "int64"})


def _values(
    runs: Sequence[RunRecord], stream: str, strategy: str, metric: str
) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    taken: dict[tuple[str, int], RunRecord] = {}
    for r in runs:
        if r.stream == stream and r.strategy == strategy:
            value = _metric(r, metric)
            if value is None:
                continue
            pair = (r.order, r.seed)
            if pair in taken:  # said, not silent: the later run is the one paired
                log.warning(
                    "%s on %s, order %s, seed %d: pairing %s, not %s (the later of two runs; "
                    "name the run directories to choose)",
                    strategy, stream, r.order, r.seed, r.run_dir, taken[pair].run_dir,
                )  # fmt: skip
            out[pair], taken[pair] = value, r
    return out


def _by_strategy(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    return _group(records, lambda r: (r.stream, r.strategy))


# --- formatting -----------------------------------------------------------------------------


def summary_rows(
    table: pd.DataFrame, metrics: Sequence[str] | None = None
) -> list[tuple[str, str, int, list[str]]]:
    """`summary_table`'s strategies as printable rows, in the table's order.

    Args:
        table: A `summary_table`.
        metrics: The metrics to print, in order (default: the table's own).

    Returns:
        ``(stream, strategy, runs, cells)`` per strategy, each cell ``mean [low, high]`` (the
        mean alone for one run, ``–`` without a value).

    """
    rows = []
    for stream in table.index.get_level_values("stream").unique():
        sub = table.xs(stream, level="stream")
        names = metrics or list(dict.fromkeys(sub.index.get_level_values("metric")))
        for strategy in dict.fromkeys(sub.index.get_level_values("strategy")):
            cells = [_ci_cell(sub.loc[(strategy, m)], count=is_count(m)) for m in names]
            runs = int(sub.loc[(strategy, names[0]), "n"])
            rows.append((stream, strategy, runs, cells))
    return rows


def summary_markdown(table: pd.DataFrame) -> str:
    """`summary_table` as Markdown: one table per stream, cells ``mean [low, high]``."""
    sections = []
    for stream in table.index.get_level_values("stream").unique():
        sub = table.xs(stream, level="stream")
        metrics = list(dict.fromkeys(sub.index.get_level_values("metric")))
        header = ["strategy", "runs", *[metric_label(m, stream) for m in metrics]]
        lines = [
            f"## {stream}: over all runs",
            "",
            "Mean over every run (orders × seeds) and its 95% confidence interval (Student's t; "
            "one run: the mean alone).",
            "",
            "| " + " | ".join(header) + " |",
            "| " + " | ".join(["---", "---:"] + ["---:"] * len(metrics)) + " |",
        ]
        for _, strategy, runs, cells in summary_rows(table.loc[[stream]], metrics):
            lines.append("| " + " | ".join([strategy, str(runs), *cells]) + " |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def pairwise_markdown(table: pd.DataFrame) -> str:
    """`pairwise_table` as Markdown: the metric, a − b, its interval, the pairs and the verdict."""
    lines = [
        "## Paired differences (a − b, 95% CI over shared order × seed runs)",
        "",
        "| stream | metric | a | b | a − b | 95% CI | pairs | verdict |",
        "| --- | --- | --- | --- | ---: | --- | ---: | --- |",
    ]
    for (stream, a, b), row in table.iterrows():
        ci = "–" if math.isnan(row["low"]) else f"[{row['low']:+.1f}, {row['high']:+.1f}]"
        label = metric_label(row["metric"], stream)
        lines.append(
            f"| {stream} | {label} | {a} | {b} | {row['difference']:+.1f} | {ci} "
            f"| {int(row['pairs'])} | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def is_count(metric: str) -> bool:
    """Whether a ``metrics.json`` key counts things (examples in memory, replays, ...)."""
    return metric.split(".")[-1].endswith(("examples", "replays", "updates", "writes"))


def _ci_cell(row: pd.Series, *, count: bool = False) -> str:
    if row["n"] == 0 or math.isnan(row["mean"]):
        return "–"
    digits = 0 if count else 1  # counts as whole numbers
    if count and row["std"] == 0 and float(row["mean"]).is_integer():  # the same in every run
        return f"{int(row['mean'])}"
    if math.isnan(row["low"]):
        return f"{row['mean']:.{digits}f}"
    return f"{row['mean']:.{digits}f} [{row['low']:.{digits}f}, {row['high']:.{digits}f}]"
