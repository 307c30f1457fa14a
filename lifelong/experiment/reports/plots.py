"""Plots of runs: accuracy-matrix heatmaps and per-task curves, as PNG files."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lifelong.experiment.reports.tables import _group
from lifelong.experiment.rundir import RunDirError, RunRecord
from lifelong.files import atomic_write_bytes
from lifelong.streams.core import CUSTOM_PREFIX


@dataclass
class _Pooled:
    """The runs of one (stream, strategy, order), averaged over seeds."""

    stream: str
    strategy: str
    order: str
    tasks: tuple[str, ...]
    seeds: list[int]
    mean: np.ndarray  # (T + 1, T): the "before" row, then R
    std: np.ndarray | None  # same shape; None for a single run

    @property
    def title(self) -> str:
        order = "custom order" if self.order.startswith(CUSTOM_PREFIX) else f"order {self.order}"
        seeds = ", ".join(map(str, self.seeds))
        runs = f"seed {seeds}" if len(self.seeds) == 1 else f"mean of {len(self.seeds)} seeds"
        return f"{self.strategy} · {self.stream} · {order}\n{runs}" + (
            f" ({seeds})" if len(self.seeds) > 1 else ""
        )


def _pool(records: RunRecord | Sequence[RunRecord]) -> _Pooled:
    records = [records] if isinstance(records, RunRecord) else list(records)
    if not records:
        raise RunDirError("no runs to plot")
    keys = {r.key for r in records}
    if len(keys) > 1:
        raise RunDirError(f"plot one (stream, strategy, order) at a time; got {sorted(keys)}")
    tasks = {r.task_names for r in records}
    if len(tasks) > 1:
        dirs = ", ".join(str(r.run_dir) for r in records)
        raise RunDirError(f"runs to average have different task lists: {sorted(tasks)} ({dirs})")
    stack = np.stack([r.accuracy.to_numpy(dtype=float) for r in records])
    first = records[0]
    return _Pooled(
        first.stream,
        first.strategy,
        first.order,
        first.task_names,
        sorted(r.seed for r in records),
        stack.mean(axis=0),
        stack.std(axis=0, ddof=1) if len(records) > 1 else None,
    )


def _figure(width: float, height: float) -> Any:
    # Object-oriented Matplotlib with an explicit Agg canvas: no pyplot state, no global
    # backend switch (a notebook's backend stays as it is) and nothing to close.
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise RunDirError("plots need matplotlib (pip install matplotlib) or --no-plots") from err
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save_png(figure: Any, path: str | Path, description: str | None = None) -> Path:
    buf = io.BytesIO()
    metadata = {"Description": description} if description else None
    figure.savefig(buf, format="png", dpi=150, metadata=metadata)
    figure.clear()
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def plot_accuracy_matrix(records: RunRecord | Sequence[RunRecord], path: str | Path) -> Path:
    """Heatmap of the accuracy matrix R, annotated, written as a PNG.

    Rows are "after training on task i", columns "accuracy on task j"; the diagonal (each task
    right after its training) is outlined. Several runs of one (stream, strategy, order), e.g.
    seeds, are averaged.

    Args:
        records: One run, or runs sharing stream, strategy, order and task list.
        path: The PNG to write (atomically; folders are created).

    Returns:
        ``path``.

    Raises:
        RunDirError: The runs do not share (stream, strategy, order) and tasks.

    """
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    pooled = _pool(records)
    R = pooled.mean[1:]
    T = len(pooled.tasks)
    side = max(4.0, 0.8 * T + 1.6)
    figure = _figure(side + 1.4, side + 0.6)
    ax = figure.add_subplot()
    cmap, norm = colormaps["viridis"], Normalize(0, 100)
    image = ax.imshow(R, cmap=cmap, norm=norm)
    ax.set_xticks(range(T), labels=pooled.tasks, rotation=30, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(T), labels=pooled.tasks)
    ax.set_xlabel("accuracy on task")
    ax.set_ylabel("after training on")
    if T <= 20:
        size = 9 if T <= 8 else 7
        for (i, j), value in np.ndenumerate(R):
            r, g, b, _ = cmap(norm(value))
            color = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
            ax.text(j, i, f"{value:.1f}", ha="center", va="center", color=color, fontsize=size)
    for i in range(T):
        ax.add_patch(
            Rectangle((i - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.5, clip_on=False)
        )
    figure.colorbar(image, ax=ax, label="accuracy (%)", shrink=0.8)
    ax.set_title(f"{pooled.title}\naccuracy matrix R (%)", fontsize=10)
    return _save_png(figure, path)


def plot_task_curves(records: RunRecord | Sequence[RunRecord], path: str | Path) -> Path:
    """Each task's accuracy along the stream, one line per task, written as a PNG.

    x runs over the untrained model, then after training on each task in turn; a task's line
    is dotted before the task is trained and solid (with a ± std band over seeds) from then on.
    Arguments, return value and errors as for `plot_accuracy_matrix`.
    """
    from matplotlib import colormaps

    pooled = _pool(records)
    T = len(pooled.tasks)
    figure = _figure(min(12.0, 0.9 * (T + 1) + 3.0), 4.4 if T <= 6 else 5.4)
    ax = figure.add_subplot()
    x = np.arange(T + 1)
    colors = colormaps["tab10" if T <= 10 else "tab20"]
    for j, task in enumerate(pooled.tasks):
        color = colors(j % colors.N)
        y = pooled.mean[:, j]
        trained = j + 1  # x of "after training on task j"
        ax.plot(x[: trained + 1], y[: trained + 1], ls=":", color=color, alpha=0.6)
        ax.plot(x[trained:], y[trained:], "-o", color=color, ms=4, label=task)
        ax.plot(x[trained], y[trained], "o", color=color, ms=8)
        if pooled.std is not None:
            spread = pooled.std[trained:, j]
            ax.fill_between(
                x[trained:],
                y[trained:] - spread,
                y[trained:] + spread,
                color=color,
                alpha=0.15,
                lw=0,
            )
    ax.set_xticks(
        x,
        labels=["untrained", *pooled.tasks],
        rotation=30 if T <= 6 else 45,
        ha="right",
        rotation_mode="anchor",
    )
    ax.set_xlabel("after training on")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(title="task", loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    ax.set_title(f"{pooled.title}\naccuracy per task along the stream", fontsize=10)
    return _save_png(figure, path)


def plot_summary(
    records: Sequence[RunRecord], path: str | Path, metric: str = "average_accuracy"
) -> Path:
    """One stream's strategies side by side: the metric's mean over runs with 95% CI bars.

    Each strategy's point is the mean over all its runs (orders × seeds) and its bar the
    Student-t 95% interval of that mean (`lifelong.experiment.reports.stats.t_interval`); a
    strategy with one run has a point and no bar. Arguments as for `plot_accuracy_matrix`.
    """
    from lifelong.experiment.reports.stats import t_interval
    from lifelong.experiment.reports.tables import METRIC_LABELS, _metric

    groups = _group(records, lambda r: r.strategy)
    names = list(groups)
    cis = [
        t_interval([v for r in groups[n] if (v := _metric(r, metric)) is not None]) for n in names
    ]
    figure = _figure(6.4, 0.45 * len(names) + 1.6)
    ax = figure.add_subplot()
    y = np.arange(len(names))
    means = np.array([c.mean for c in cis])
    low = np.array([c.mean - c.low if c.n > 1 else 0.0 for c in cis])
    high = np.array([c.high - c.mean if c.n > 1 else 0.0 for c in cis])
    ax.errorbar(means, y, xerr=[low, high], fmt="o", color="tab:blue", capsize=4, ms=5)
    ax.set_yticks(y, labels=[f"{n} ({c.n} runs)" for n, c in zip(names, cis)])
    ax.invert_yaxis()
    ax.set_xlabel(f"{METRIC_LABELS.get(metric, metric)} (mean, 95% CI)")
    ax.grid(axis="x", alpha=0.3)
    stream = records[0].stream if records else ""
    ax.set_title(f"{stream}: {METRIC_LABELS.get(metric, metric)} over orders × seeds", fontsize=10)
    return _save_png(figure, path)


def safe_name(text: str, max_length: int = 60) -> str:
    """A readable, filesystem-safe version of ``text`` (``mbpa++`` stays, ``a:b,c`` -> ``a-b-c``).

    Letters, digits, ``_``, ``.``, ``+`` and ``-`` are kept, other runs of characters become one
    ``-``; a name longer than ``max_length`` is cut and given a short hash of ``text``.
    """
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "-", text).strip("-.") or "x"
    if len(name) > max_length:
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
        name = f"{name[: max_length - 9].rstrip('-.')}-{digest}"
    return name


def write_plots(records: Sequence[RunRecord], out_dir: str | Path) -> list[Path]:
    """Plots of runs: per (stream, strategy, order) and per stream.

    A heatmap and a curve plot per (stream, strategy, order), seeds averaged, and per stream the
    strategies' average accuracy with 95% CI bars (`plot_summary`). Files are
    ``<strategy>_<stream>_<order>_matrix.png``, ``..._curves.png`` (names made safe by
    `safe_name`; a short hash is added should two groups end up with the same name) and
    ``summary_<stream>_average_accuracy.png``, and, where the runs' costs are known, the Pareto
    view of average accuracy against compute and memory, ``pareto_<stream>.png``
    (`lifelong.experiment.reports.costs.plot_pareto`).

    Args:
        records: The runs (e.g. from `find_runs`).
        out_dir: The folder to write into (created if needed).

    Returns:
        The written PNG paths, matrix then curves for each group.

    """
    out_dir = Path(out_dir)
    written, used = [], set()
    for key, group in _group(records, lambda r: r.key).items():
        stream, strategy, order = key
        stem = "_".join(safe_name(part) for part in (strategy, stream, order))
        if stem in used:
            stem += "-" + hashlib.sha1(repr(key).encode("utf-8")).hexdigest()[:8]
        used.add(stem)
        written.append(plot_accuracy_matrix(group, out_dir / f"{stem}_matrix.png"))
        written.append(plot_task_curves(group, out_dir / f"{stem}_curves.png"))
    from lifelong.experiment.reports.costs import pareto_table, plot_pareto
    from lifelong.experiment.reports.tables import metric_label

    for stream, group in _group(records, lambda r: r.stream).items():
        name = f"summary_{safe_name(stream)}_average_accuracy.png"
        written.append(plot_summary(group, out_dir / name))
        costs = pareto_table(group)
        if not costs.empty and costs["tflops"].notna().any():
            label = metric_label("average_accuracy", stream)
            path = out_dir / f"pareto_{safe_name(stream)}.png"
            written.append(plot_pareto(costs, stream, path, label))
    return written
