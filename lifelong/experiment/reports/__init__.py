"""Forgetting and transfer reports over finished runs: tables (Markdown, LaTeX, CSV) and plots.

A finished run directory (written by `lifelong.experiment.rundir.write_results`) holds
``config.yaml``, ``accuracy.csv`` and ``metrics.json``; ``metrics.json`` is written last, so a
directory without it is an unfinished run and is skipped. `find_runs` collects finished runs
anywhere under the given paths (`lifelong.experiment.rundir`), `report_table` aggregates them over
seeds and the formatters render that table (`tables`), the plot functions draw accuracy matrices
and per-task curves (`plots`), `stats` gives every metric over all runs with its 95% confidence
interval and paired comparisons of strategies, and `write_report` writes it all.

The table (`report_table`) has one row per (stream, strategy, metric) and one column per
(order, stat):

* index: ``MultiIndex`` with levels ``("stream", "strategy", "metric")``; streams and strategies
  in order of first appearance in the runs (`find_runs` sorts runs by directory), metrics in
  the order asked for.
* columns: ``MultiIndex`` with levels ``("order", "stat")``; orders sorted (paper orders
  ``i``..``iv`` first, then custom task lists), then ``"average"``; stats ``"mean"``,
  ``"std"`` and ``"n"``.
* per order: mean and sample standard deviation (``ddof=1``) over seeds and the number of
  seeds ``n``; with one seed the std is NaN (unknown, not zero); with none, mean and std are
  NaN and ``n`` is 0.
* ``"average"``: the mean of the per-order means, their sample standard deviation across
  orders, and ``n`` = the number of orders averaged (orders without runs are left out).

A run's order label is its config's ``order`` (``"i"``..``"iv"``), or ``"custom:"`` followed by
the comma-joined task names when the config sets ``tasks`` (which overrides the order); FewRel
runs are labelled ``"clusters-<cluster_order>"`` (their ``average`` column is then the mean over
shuffled cluster orders, as the papers report).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lifelong.experiment.reports.costs import pareto_markdown, pareto_table, plot_pareto
from lifelong.experiment.reports.plots import (
    plot_accuracy_matrix,
    plot_summary,
    plot_task_curves,
    safe_name,
    write_plots,
)
from lifelong.experiment.reports.stats import (
    Comparison,
    Interval,
    compare,
    headline_metric,
    pairwise_markdown,
    pairwise_table,
    summary_markdown,
    summary_table,
)
from lifelong.experiment.reports.tables import (
    COST_METRICS,
    DEFAULT_METRICS,
    FORMATS,
    FORMATTERS,
    check_metrics,
    latex_escape,
    report_table,
    to_csv,
    to_latex,
    to_markdown,
)
from lifelong.experiment.rundir import (
    RunDirError,
    RunRecord,
    as_records,
    find_runs,
    load_run,
    unfinished_runs,
)
from lifelong.files import atomic_write_text

ReportError = RunDirError
"""A run directory is malformed, or there is nothing to report."""

__all__ = [
    "pareto_markdown",
    "pareto_table",
    "plot_pareto",
    "Comparison",
    "COST_METRICS",
    "DEFAULT_METRICS",
    "FORMATS",
    "FORMATTERS",
    "Interval",
    "ReportError",
    "RunRecord",
    "command",
    "compare",
    "find_runs",
    "latex_escape",
    "load_run",
    "pairwise_table",
    "plot_accuracy_matrix",
    "plot_summary",
    "plot_task_curves",
    "report_table",
    "safe_name",
    "summary_table",
    "to_csv",
    "to_latex",
    "to_markdown",
    "write_plots",
    "write_report",
]


def write_report(
    runs: Sequence[str | Path] | Sequence[RunRecord] | str | Path,
    out_dir: str | Path,
    *,
    plots: bool = True,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> dict[str, Path]:
    """Write ``report.md``, ``report.tex``, ``report.csv`` and ``plots/*.png`` into ``out_dir``.

    Args:
        runs: Paths to search (see `find_runs`) or records.
        out_dir: Where to write (created if needed); files are written atomically.
        plots: Whether to draw the plots (needs matplotlib).
        metrics: The metrics to report (see `report_table`).

    Returns:
        Each written file by its path relative to ``out_dir`` (e.g. ``"report.md"``,
        ``"plots/replay_text_i_matrix.png"``).

    Raises:
        ReportError: No finished run under the paths (they are named), or a malformed run.

    """
    records = as_records(runs)
    return _write_report(records, report_table(records, metrics=metrics), Path(out_dir), plots)


def _write_report(
    records: list[RunRecord], table: pd.DataFrame, out_dir: Path, plots: bool
) -> dict[str, Path]:
    images = write_plots(records, out_dir / "plots") if plots else []
    texts = {
        "report.md": _markdown_report(table, records, images, out_dir),
        "report.tex": to_latex(table),
        "report.csv": to_csv(table),
    }
    written = {}
    for name, text in texts.items():
        atomic_write_text(out_dir / name, text)
        written[name] = out_dir / name
    written.update({p.relative_to(out_dir).as_posix(): p for p in images})
    return written


PROBING_METRICS = (
    "forgetting",
    "probe_forgetting",
    "probe_share",
    "head_forgetting",
    "probe_before",
    "probe_average_accuracy",
)
"""A probing run's split of forgetting (`lifelong.probing.probe_metrics`), as reported."""


def probing_markdown(records: Sequence[RunRecord]) -> str:
    """The section on where the forgetting is, over the runs that probed (``--probe``), or ""."""
    probed = [r for r in records if r.metrics.get("probe_forgetting") is not None]
    if not probed:
        return ""
    return (
        "## Where the forgetting is (linear probes)\n\n"
        f"{len(probed)} runs with --probe: the model's forgetting, the probe's (representation "
        "forgetting: a logistic regression on the encoder's features of each task, refitted "
        "after each task) and its share of the model's (%), the rest (head and decision "
        "drift), the pre-trained encoder's probe "
        "accuracy and the final one (mean [95% CI]).\n\n"
        + summary_markdown(summary_table(probed, PROBING_METRICS))
    )


def _markdown_report(
    table: pd.DataFrame, records: list[RunRecord], images: list[Path], out_dir: Path
) -> str:
    text = f"# Forgetting and transfer\n\n{len(records)} finished runs.\n\n{to_markdown(table)}"
    metrics = tuple(dict.fromkeys(table.index.get_level_values("metric")))
    text += "\n" + summary_markdown(summary_table(records, (*metrics, *COST_METRICS)))
    costs = pareto_markdown(pareto_table(records))
    if costs:
        text += "\n## What each result cost\n\n" + costs
    probed = probing_markdown(records)
    if probed:
        text += "\n" + probed
    pairs = pairwise_table(records)
    if len(pairs):
        text += "\n" + pairwise_markdown(pairs)
    if images:
        links = [f"![{p.stem}]({p.relative_to(out_dir).as_posix()})" for p in images]
        text += "\n## Plots\n\n" + "\n".join(links) + "\n"
    return text


# --- command line ---------------------------------------------------------------------------


def command(args: argparse.Namespace) -> int:
    """``lifelong report``: write the report, print the table (stdout) and the files (stderr).

    The written paths go to stderr so that ``lifelong report --format csv > table.csv`` works.

    Raises:
        ReportError: No finished run under the paths, or a malformed run.

    """
    runs = list(args.runs) or ["runs"]
    out_dir = Path(args.out) if args.out is not None else Path(runs[0]) / "report"
    records = as_records(runs)
    if args.metric is not None:
        check_metrics(records, (args.metric,))  # a key no run has: refused, keys listed
    if args.compare is not None:
        code = _compare_command(records, args)
        _note_unfinished(runs)
        return code
    if getattr(args, "claims", None):
        from lifelong.experiment.reports.claims import claims_markdown, judge

        streams = sorted({r.stream for r in records})
        if args.claims not in streams:
            raise ReportError(
                f"--claims {args.claims}: none of the {len(records)} runs is on the "
                f"{args.claims} stream (they are on {', '.join(streams)})"
            )
        judged = judge(records, args.claims, args.metric, method=args.method)
        print(claims_markdown(judged, args.claims, args.metric), end="")
        _note_unfinished(runs)
        return 0
    metrics = DEFAULT_METRICS if args.metric is None else (args.metric,)
    table = report_table(records, metrics=metrics)
    written = _write_report(records, table, out_dir, plots=not args.no_plots)
    print(FORMATTERS[args.format](table), end="")
    if args.format == "markdown":  # the intervals in the terminal too; the pairs are many
        shown = tuple(dict.fromkeys(table.index.get_level_values("metric")))
        print("\n" + summary_markdown(summary_table(records, shown)), end="")
        costs = pareto_markdown(pareto_table(records)) if args.metric is None else ""
        if costs:  # the headline metric against cost (a --metric table stays that metric's)
            print("\n" + costs, end="")
        probed = probing_markdown(records)
        if probed:
            print("\n" + probed, end="")
        pairs = len(pairwise_table(records))
        if pairs:
            print(
                f"\n{pairs} paired differences (a − b, 95% CI, verdict): "
                f'{written["report.md"]}, section "Paired differences"'
            )
    _note_unfinished(runs)
    print(f"\n{len(records)} runs; wrote:", file=sys.stderr)
    for path in written.values():
        print(f"  {path}", file=sys.stderr)
    return 0


def _note_unfinished(paths: Sequence[str | Path]) -> None:
    """Say on stderr which run directories the report leaves out, and why (not silently)."""
    left = unfinished_runs(paths)
    if not left:
        return
    print(f"left out {len(left)} run directories without results (metrics.json):", file=sys.stderr)
    for run_dir, why in left:
        print(f"  {run_dir}: {why}", file=sys.stderr)


def _compare_command(records: list[RunRecord], args: argparse.Namespace) -> int:
    """``lifelong report --compare A,B``: the paired difference on every stream, one line each."""
    names = [n.strip() for n in args.compare.split(",")]
    if len(names) != 2 or not all(names):
        raise ReportError(f"--compare {args.compare!r}: expected two strategies, A,B")
    if names[0] == names[1]:
        raise ReportError(
            f"--compare {args.compare!r}: A and B are the same strategy; name two different ones"
        )
    ran = {s: {r.strategy for r in records if r.stream == s} for s in {r.stream for r in records}}
    both = sorted(s for s, strategies in ran.items() if set(names) <= strategies)
    if not both:  # raises, naming the strategies that ran
        compare(records, *names, metric=args.metric or "average_accuracy", method=args.method)
    for stream in both:  # each stream in its own measure unless --metric says otherwise
        metric = args.metric or headline_metric(stream)
        for comparison in compare(records, *names, metric, method=args.method, stream=stream):
            print(comparison.describe())
    return 0
