"""What each result cost, and which results no other beats at their cost (the Pareto view).

A run's cost is what ``metrics.json`` measured (`lifelong.cost`: ``total_flops``, ``memory_bytes``,
``cost`` per phase). Runs written before costs were counted get the counts their config and
their strategy's report determine (`derived_cost`, ``"source": "derived"``), by the same rule
(`lifelong.cost.RULE`) and with these approximations, which the report states:

* every row is taken at the config's ``max_length`` tokens (batches pad to their longest row,
  which on the real text rows is nearly always the limit: an upper bound);
* MbPA's and MbPA++'s local adaptation carries each memory example through the frozen encoder
  once per evaluation when retrieved; the derived count takes every example then in memory (an
  upper bound: the measured count is the examples actually retrieved);
* memory bytes are the stored examples at ``max_length`` int32 token ids plus their keys
  (float32, the encoder's width) where the memory is keyed; Avalanche's Replay buffer holds
  them as it stores them (int64 patterns, `avalanche_pattern_bytes`).

Meta-MbPA's training cost depends on its retrieval (the meta step's neighbours) and is not
derived; its runs appear once measured.

`pareto_table` gives, per stream and strategy configuration, the average accuracy (mean and
95% CI over runs) beside total compute, memory and minutes, and marks the configurations on the
Pareto front of accuracy against compute and against memory: those no other configuration
matches or beats in accuracy (mean) at no more cost. `plot_pareto` draws both views.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lifelong.cost import BACKWARD_FLOPS_PER_PARAM_TOKEN, FORWARD_FLOPS_PER_PARAM_TOKEN
from lifelong.experiment.rundir import RunRecord, distinguish_variants
from lifelong.mechanisms.scopes import adapts_head_only

ENCODER_PARAMETERS = {"minilm": (10_795_392, 22_713_216, 384), "tiny": (265_216, 4_237_824, 128)}
"""Non-embedding parameters, all parameters and width of the encoders the committed runs used
(`lifelong.cost.non_embedding_parameters` of the loaded encoder; checked by a test)."""

INT32, FLOAT32, INT64 = 4, 4, 8


def avalanche_pattern_bytes(tokens: int) -> int:
    """Bytes an Avalanche replay buffer holds per text example of ``tokens`` token ids.

    `lifelong.integrations.avalanche.RecordCodec` makes each example an int64 pattern of
    ``max_length`` ids (padded with -1) and an int64 target; Avalanche's dataset adds an int64
    task label and an int32 index: ``8 * tokens + 20`` (what a run measures: 106,400 bytes for
    200 examples at 64 tokens, checked in ``make test-avalanche``).
    """
    return tokens * INT64 + 2 * INT64 + INT32


@dataclass(frozen=True)
class Passes:
    """Rows through the model, by what was computed on them.

    Attributes:
        forward: Encoder passes without gradients.
        trained: Encoder passes with a backward pass through the whole model.
        head_trained: Rows through the head alone, forward and backward (pooled vectors).
        head_forward: Rows through the head alone, forward only.
        frozen_trained: Encoder passes whose backward reaches only the head (a frozen encoder).

    """

    forward: float = 0
    trained: float = 0
    head_trained: float = 0
    head_forward: float = 0
    frozen_trained: float = 0

    def flops(self, encoder: int, head: int, tokens: int) -> float:
        """FLOPs by `lifelong.cost.RULE`: encoder rows at ``tokens`` each, head rows at one."""
        fwd, bwd = FORWARD_FLOPS_PER_PARAM_TOKEN, BACKWARD_FLOPS_PER_PARAM_TOKEN
        model = encoder + head
        total = fwd * model * tokens * (self.forward + self.trained + self.frozen_trained)
        total += bwd * model * tokens * self.trained
        total += bwd * head * tokens * self.frozen_trained
        total += (fwd + bwd) * head * self.head_trained + fwd * head * self.head_forward
        return total


@dataclass(frozen=True)
class RunShape:
    """What a run's cost is derived from: its stream's sizes, batch and options."""

    train: int  # training examples over all tasks
    tests: int  # test examples over all tasks
    tasks: int
    per_task: tuple[int, ...]  # training examples of each task
    batch: int
    options: dict[str, Any]
    report: dict[str, Any]
    queries_keyed_once: bool = False  # test inputs keyed at their first evaluation only

    @property
    def evaluations(self) -> int:
        """The untrained evaluation and one after each task."""
        return self.tasks + 1

    def option(self, name: str, default: Any) -> Any:
        """A strategy option as the run had it (its config's, else the strategy's default)."""
        value = self.options.get(name)
        return default if value is None else value

    def count(self, name: str) -> float:
        """A count of the strategy's report (0 where the run did not report it)."""
        return float(self.report.get(name) or 0)

    def replayed(self) -> float:
        """Examples replayed by sparse replay: replays × ⌊r·R_I⌋."""
        every, ratio = self.option("replay_every", 10_000), self.option("replay_ratio", 0.01)
        return self.count("replays") * math.floor(ratio * every)

    def memory_after(self) -> list[int]:
        """Examples in a write-everything memory after each task."""
        return list(np.cumsum(self.per_task))


def _evaluated(shape: RunShape) -> Passes:
    return Passes(forward=shape.evaluations * shape.tests)


def _fine_tuned(shape: RunShape, extra: float = 0) -> Passes:
    return Passes(forward=shape.evaluations * shape.tests, trained=shape.train + extra)


def _seq_star(shape: RunShape) -> Passes:
    warmup = shape.option("warmup_fraction", 3 / 8)
    first = math.ceil(shape.per_task[0] / shape.batch)
    trained = min(math.ceil(warmup * first) * shape.batch, shape.per_task[0])
    return Passes(
        forward=shape.evaluations * shape.tests,
        trained=trained,
        frozen_trained=shape.train - trained,
    )


def _local_adaptation(shape: RunShape, replay: bool, keyed: bool) -> Passes:
    k, steps = shape.option("k", 32), shape.option("steps", 30)
    memory = shape.memory_after()
    adapt_rows = sum(shape.tests * min(k, m) for m in memory) * steps
    keyed_each_time = keyed and not shape.queries_keyed_once
    per_eval = (2 if keyed_each_time else 1) * shape.tests  # the query's key, its own prefix
    scope = shape.option("adapt_scope", "all")
    if not adapts_head_only(scope):
        raise _NotDerivedError(f"local adaptation at scope {scope!r}")
    return Passes(
        forward=shape.tests  # the untrained evaluation: memory empty
        + (shape.train if keyed else 0)  # every example keyed when written
        + (shape.tests if keyed and shape.queries_keyed_once else 0)  # queries keyed once
        + sum(per_eval + m for m in memory),  # queries, prefixes, the memory's prefixes
        trained=shape.train + (shape.replayed() if replay else 0),
        head_trained=adapt_rows,
        head_forward=len(memory) * shape.tests,
    )


def _episodic(shape: RunShape, whole_network: bool, modulated: bool = False) -> Passes:
    b, m = shape.batch, shape.option("support_batches", 5)
    every, ratio = shape.option("replay_every", 9_600), shape.option("replay_ratio", 0.01)
    episodes, replays = shape.count("episodes"), shape.count("replay_episodes")
    queries = (episodes - replays) * b
    # the stream examples of complete episodes (an incomplete last one is never trained on),
    # each written to memory after its episode: the memory's count over the write rate
    rate = shape.count("write_rate") or 1.0
    consumed = shape.count("memory_examples") / rate if "memory_examples" in shape.report else 0
    support = (consumed or shape.train) - queries
    meta_test = shape.count("meta_tests") * m * b
    trained = queries + replays * math.floor(ratio * every)
    evaluated = shape.evaluations * shape.tests
    gate = 2 if modulated else 1  # ANML-ER: a frozen copy of the encoder gates every pass
    if whole_network:
        return Passes(
            forward=(evaluated + (gate - 1) * (support + meta_test + trained)),
            trained=trained + support + meta_test,
        )
    return Passes(
        forward=evaluated + support + meta_test,
        trained=trained,
        head_trained=support + meta_test,
    )


class _NotDerivedError(ValueError):
    """The run's cost cannot be derived from its config (it is left out of the cost view)."""


@dataclass(frozen=True)
class Derivation:
    """How a strategy's cost follows from its run's shape.

    Attributes:
        passes: The rows it computed (`Passes`), from the run's shape.
        memory: What it holds: ``examples`` (token ids at ``max_length``), ``keyed`` (and
            a key of the encoder's width each: MbPA's and MbPA++'s nearest-neighbour memory),
            ``patterns`` (Avalanche's buffer: `avalanche_pattern_bytes` per example) or
            ``weights`` (two copies of every weight: EWC's Fisher and anchor).

    """

    passes: Callable[[RunShape], Passes]
    memory: str = "examples"


DERIVATIONS: dict[str, Derivation] = {
    "seq": Derivation(_fine_tuned),
    "avalanche:naive": Derivation(_fine_tuned),
    "mtl": Derivation(_fine_tuned),
    "seq-star": Derivation(_seq_star),
    "replay": Derivation(lambda s: _fine_tuned(s, s.replayed())),
    "agem": Derivation(lambda s: _fine_tuned(s, s.replayed())),  # the reference gradients
    "ewc": Derivation(
        lambda s: _fine_tuned(s, s.tasks * min(s.option("fisher_samples", 200), s.train)),
        memory="weights",
    ),
    "avalanche:ewc": Derivation(lambda s: _fine_tuned(s, s.train), memory="weights"),
    "avalanche:replay": Derivation(
        lambda s: _fine_tuned(s, s.train - s.per_task[0]), memory="patterns"
    ),
    "mbpa": Derivation(lambda s: _local_adaptation(s, replay=False, keyed=True), "keyed"),
    "mbpa++": Derivation(lambda s: _local_adaptation(s, replay=True, keyed=True), "keyed"),
    "mbpa++-rand": Derivation(lambda s: _local_adaptation(s, replay=True, keyed=False)),
    "oml-er": Derivation(lambda s: _episodic(s, whole_network=False)),
    "maml-er": Derivation(lambda s: _episodic(s, whole_network=True)),
    "anml-er": Derivation(lambda s: _episodic(s, whole_network=True, modulated=True)),
}
"""How each strategy's passes follow from its run's shape (`RunShape`), for runs that did not
measure them: what its observe and predict compute per example (see each strategy's module)."""


def run_shape(record: RunRecord) -> RunShape:
    """The sizes, batch, options and report a run's derived cost needs."""
    tasks = record.metrics.get("tasks") or []
    if not tasks:
        raise _NotDerivedError("metrics.json has no task sizes")
    config = record.config
    options = dict((config.get("strategy_options") or {}).get(record.strategy) or {})
    return RunShape(
        train=sum(int(t["train"]) for t in tasks),
        tests=sum(int(t["test"]) for t in tasks),
        tasks=len(tasks),
        per_task=tuple(int(t["train"]) for t in tasks),
        batch=int(config.get("batch_size") or 16),
        options=options,
        report=dict(record.metrics.get("strategy") or {}),
        # runs without a measured cost (all committed ones) keyed each test input at every
        # evaluation; `QueryKeys` (keyed once) came a day after the meter, and no run of the
        # local-adaptation strategies was measured in between
        queries_keyed_once="cost" in record.metrics,
    )


def derived_passes(record: RunRecord) -> Passes | None:
    """The rows a run computed, by its strategy's derivation (`DERIVATIONS`), or None.

    Classification streams only: there an example is one row. A FewRel sentence is a row per
    candidate relation and a QA question a row per window, which ``metrics.json`` does not
    count, so those runs' costs are not derived (they are measured since costs were counted).
    """
    from lifelong.streams.registry import STREAMS

    derive = DERIVATIONS.get(record.strategy)
    spec = STREAMS.get(record.stream)
    if derive is None or spec is None or spec.kind != "classification":
        return None
    try:
        return derive.passes(run_shape(record))
    except _NotDerivedError:
        return None


def derived_cost(record: RunRecord) -> dict[str, Any] | None:
    """``total_flops`` and ``memory_bytes`` of a run that did not measure them, or None.

    None where the strategy's passes are not derived (`DERIVATIONS`), its encoder's size is not
    known, or ``metrics.json`` lacks the task sizes.
    """
    encoder = ENCODER_PARAMETERS.get(str(record.config.get("encoder", "")))
    passes = None if encoder is None else derived_passes(record)
    if passes is None:
        return None
    width, tokens = encoder[2], int(record.config.get("max_length") or 128)
    labels = sum(int(t.get("labels", 0)) for t in record.metrics["tasks"])
    head = (width + 1) * max(labels, 1)
    report = record.metrics.get("strategy") or {}
    held = float(record.metrics.get("memory_examples") or report.get("joint_examples") or 0)
    kind = DERIVATIONS[record.strategy].memory
    per_example = {
        "examples": tokens * INT32,
        "keyed": tokens * INT32 + width * FLOAT32,
        "patterns": avalanche_pattern_bytes(tokens),
    }
    if kind == "weights":
        memory = 2 * (encoder[1] + head) * FLOAT32  # F and θ* of every weight
    else:
        memory = held * per_example[kind]
    return {
        "total_flops": float(f"{passes.flops(encoder[0], head, tokens):.4g}"),
        "memory_bytes": int(memory),
        "source": "derived",
    }


def cost_value(record: RunRecord, key: str) -> float | None:
    """``total_flops`` or ``memory_bytes`` of a run: measured, else derived, else None."""
    value = record.metrics.get(key)
    if value is not None:
        return float(value)
    derived = derived_cost(record)
    return None if derived is None else float(derived[key])


def cost_source(record: RunRecord) -> str | None:
    """``"measured"``, ``"derived"`` or None (no cost known)."""
    if record.metrics.get("total_flops") is not None:
        return "measured"
    return None if derived_cost(record) is None else "derived"


def pareto_table(records: Sequence[RunRecord], metric: str = "average_accuracy") -> pd.DataFrame:
    """Per (stream, configuration): the metric's mean and 95% CI against its costs.

    Columns: ``runs``, ``mean``, ``low``, ``high`` (the metric), ``tflops`` (total compute,
    mean over runs, 10^12 FLOPs), ``memory_mb`` (bytes held at the end, 10^6), ``minutes`` (wall,
    mean), ``cost`` (measured, derived, or a mix), ``front_compute`` and ``front_memory`` (on the
    Pareto front of the metric against that cost, among the stream's configurations with it
    known). Sorted by stream, then compute.
    """
    from lifelong.experiment.reports.stats import t_interval

    rows = []
    for (stream, label), group in _by_configuration(records).items():
        values = [float(r.metrics[metric]) for r in group if r.metrics.get(metric) is not None]
        if not values:
            continue
        ci = t_interval(values)
        flops = [v for r in group if (v := cost_value(r, "total_flops")) is not None]
        held = [v for r in group if (v := cost_value(r, "memory_bytes")) is not None]
        seconds = [float(r.metrics["seconds"]) for r in group if r.metrics.get("seconds")]
        sources = {cost_source(r) for r in group} - {None}
        joint = any(r.joint_training for r in group)
        rows.append(
            {
                "stream": stream,
                "configuration": label + (" (joint: not continual)" if joint else ""),
                "joint": joint,
                "runs": len(values),
                "mean": ci.mean,
                "low": ci.low if ci.n > 1 else math.nan,
                "high": ci.high if ci.n > 1 else math.nan,
                "tflops": np.mean(flops) / 1e12 if flops else math.nan,
                "memory_mb": np.mean(held) / 1e6 if held else math.nan,
                "minutes": np.mean(seconds) / 60 if seconds else math.nan,
                "cost": "/".join(sorted(sources)) or "unknown",
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["front_compute"] = _front(table, "tflops")
    table["front_memory"] = _front(table, "memory_mb")
    return table.sort_values(["stream", "tflops"], na_position="last").reset_index(drop=True)


def _by_configuration(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    """Runs by (stream, configuration).

    A configuration is the strategy, named apart by the settings its runs differ in
    (`distinguish_variants`, e.g. ``er (memory_size=200)``; runs from `find_runs` are named).
    """
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for record in distinguish_variants(records):
        groups.setdefault((record.stream, record.strategy), []).append(record)
    return groups


def _front(table: pd.DataFrame, cost: str) -> list[bool]:
    """Whether each row is on its stream's front: no other row costs no more and scores more.

    Rows whose cost is unknown are not on it, nor is a joint learner (MTL: an upper bound that
    sees every task at once, not a continual learner), which no row is compared with. A row
    tied with another in both is on it.
    """
    flags = []
    for _, row in table.iterrows():
        if math.isnan(row[cost]) or row["joint"]:
            flags.append(False)
            continue
        same = table[(table.stream == row.stream) & table[cost].notna() & ~table["joint"]]
        beaten = (
            (same[cost] <= row[cost])
            & (same["mean"] >= row["mean"])
            & ((same[cost] < row[cost]) | (same["mean"] > row["mean"]))
        )
        flags.append(not bool(beaten.any()))
    return flags


def pareto_markdown(table: pd.DataFrame, label: str = "average accuracy") -> str:
    """The table as Markdown, per stream; ``*`` marks the fronts."""
    if table.empty:
        return ""
    lines: list[str] = []
    for stream, part in table.groupby("stream", sort=False):
        if part[["tflops", "memory_mb"]].isna().all().all():
            continue  # no run of this stream has a cost (measured or derived)
        lines += [
            f"### {stream}: {label} against what it cost",
            "",
            f"| configuration | runs | {label} (95% CI) | compute (TFLOPs) | front | "
            "memory (MB) | front | minutes per run | cost |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for _, row in part.iterrows():
            ci = "" if math.isnan(row["low"]) else f" [{row['low']:.1f}, {row['high']:.1f}]"
            lines.append(
                f"| {row['configuration']} | {row['runs']} | {row['mean']:.1f}{ci} | "
                f"{_number(row['tflops'])} | {'*' if row['front_compute'] else ''} | "
                f"{_number(row['memory_mb'], 2)} | {'*' if row['front_memory'] else ''} | "
                f"{_number(row['minutes'])} | {row['cost']} |"
            )
        lines.append("")
    if not lines:
        return ""
    lines.append(
        "`*`: on the Pareto front (no configuration scores more at no more cost). Compute: "
        "2·N·tokens per forward + 4·N·tokens per backward (Kaplan et al. 2020, §2.1); "
        "`derived`: from the run's config and report (docs/guide/costs.md says how)."
    )
    return "\n".join(lines) + "\n"


def _number(value: float, digits: int = 1) -> str:
    return "–" if math.isnan(value) else f"{value:,.{digits}f}"


LABEL_SIZE = 7  # points: a configuration's label beside its marker


def label_offsets(
    at: np.ndarray,
    names: Sequence[str],
    dpi: float,
    size: float = LABEL_SIZE,
    left_edge: float = -math.inf,
) -> list[tuple[float, float, str]]:
    """Where each point's label goes (offset in points, alignment) so that no two overlap.

    A label sits right of and above its point; the highest point is placed first, and a label
    that would overlap one already placed moves a line down or up, then to the left of its
    point (not past ``left_edge``), then two lines away, and so on, to the nearest free place.
    Text extents are estimated (0.6 em a character, 1.2 em a line).

    Args:
        at: Display coordinates of the points, shape (n, 2), in pixels.
        names: The n labels.
        dpi: The figure's dots per inch (pixels to points).
        size: The font size in points.
        left_edge: Where the axes begin, in pixels: no label is put left of its point past it.

    Returns:
        One (dx, dy, horizontal alignment) per label, in the order given: ``"left"`` text
        starts ``dx`` right of its point, ``"right"`` text ends ``-dx`` left of it.

    """
    points = np.asarray(at, dtype=float) * 72.0 / dpi  # (n, 2) in points
    line, gap = 1.2 * size, 4.0
    placed: list[tuple[float, float, float, float]] = []  # x0, y0, x1, y1 in points
    offsets: list[tuple[float, float, str]] = [(gap, 3.0, "left")] * len(names)
    places = [
        (step, side)
        for steps in ((0, -1, 1), (-2, 2), (-3, 3))
        for side in ("left", "right")
        for step in steps
    ]
    edge = left_edge * 72.0 / dpi
    for i in sorted(range(len(names)), key=lambda k: -points[k, 1]):
        width = 0.6 * size * len(names[i])
        for step, side in places:
            y0 = points[i, 1] + 3.0 + step * line
            x0 = points[i, 0] + gap if side == "left" else points[i, 0] - gap - width
            box = (x0, y0, x0 + width, y0 + line)
            if x0 >= edge and not any(_overlap(box, other) for other in placed):
                break
        else:  # nowhere free: the usual place
            step, side = 0, "left"
            x0, y0 = points[i, 0] + gap, points[i, 1] + 3.0
            box = (x0, y0, x0 + width, y0 + line)
        placed.append(box)
        offsets[i] = (gap if side == "left" else -gap, 3.0 + step * line, side)
    return offsets


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def plot_pareto(table: pd.DataFrame, stream: str, path: str | Path, label: str) -> Path:
    """Two panels: the metric (mean, 95% CI) against compute and against memory, fronts joined."""
    from lifelong.experiment.reports.plots import _figure, _save_png

    part = table[table.stream == stream]
    figure = _figure(11.0, 4.6)
    for i, (cost, axis) in enumerate(
        (("tflops", "total compute (TFLOPs, log)"), ("memory_mb", "memory held (MB, log)"))
    ):
        ax = figure.add_subplot(1, 2, i + 1)
        known = part[part[cost].notna() & ((part[cost] > 0) | (cost == "memory_mb"))]
        low = (known["mean"] - known["low"]).fillna(0).to_numpy()
        high = (known["high"] - known["mean"]).fillna(0).to_numpy()
        front = known[known[f"front_{'compute' if cost == 'tflops' else 'memory'}"]]
        ax.errorbar(
            known[cost],
            known["mean"],
            yerr=[low, high],
            fmt="o",
            color="tab:gray",
            ecolor="tab:gray",
            capsize=3,
            ms=4,
            alpha=0.8,
        )
        front = front.sort_values(cost)
        ax.plot(front[cost], front["mean"], "-o", color="tab:red", ms=6, label="Pareto front")
        if cost == "memory_mb":  # no memory at all (SEQ) is 0: linear near it, log beyond
            ax.set_xscale("symlog", linthresh=0.01)
            ax.set_xlim(left=-0.002)
            axis = "memory held (MB; symmetric log, 0 = none)"
        else:
            ax.set_xscale("log")
        ax.get_xlim(), ax.get_ylim()  # settle the autoscaled limits the transform reads
        names = list(known["configuration"])
        at = ax.transData.transform(np.column_stack([known[cost], known["mean"]]))  # (n, 2) px
        edge = ax.transAxes.transform((0.0, 0.0))[0]  # the axes' left side, px
        offsets = label_offsets(at, names, figure.dpi, left_edge=edge)
        for name, xy, (dx, dy, align) in zip(names, zip(known[cost], known["mean"]), offsets):
            ax.annotate(
                name, xy, fontsize=LABEL_SIZE, xytext=(dx, dy), textcoords="offset points", ha=align
            )
        ax.set_xlabel(axis)
        ax.set_ylabel(f"{label} (mean, 95% CI)")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    figure.suptitle(f"{stream}: what wins at a budget", fontsize=11)
    return _save_png(figure, path, description=table_digest(part))


def table_digest(table: pd.DataFrame) -> str:
    """A digest of the numbers a Pareto figure draws (kept in its PNG's ``Description``).

    A test compares a committed figure's digest with the committed runs' table, so a figure
    left behind by a change of the runs or of the derivation fails it.
    """
    import hashlib

    columns = ["configuration", "runs", "mean", "low", "high", "tflops", "memory_mb"]
    text = table[columns].round(6).to_csv(index=False)
    return "pareto:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def figure_digest(path: str | Path) -> str | None:
    """The digest a Pareto figure was drawn from (`table_digest`), or None."""
    from PIL import Image

    with Image.open(path) as image:
        return image.info.get("Description")
