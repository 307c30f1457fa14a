"""Run directories: what a run writes, and reading finished runs back.

A run directory holds ``config.yaml`` (the resolved config, written when the run starts),
``accuracy.csv`` (the matrix R with the untrained row b first; QA: F1), other metrics' matrices
(QA: ``exact_match.csv``), ``metrics.json`` (written last: its presence means the run
finished), ``log.txt`` and, while the run is in progress, ``checkpoint.pt``. Every file is
written atomically. Runs (`lifelong.experiment.runs`) write through `write_results`; reports
(`lifelong.experiment.reports`) and resumed runs read through `load_run` / `read_result`.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml

from lifelong.files import atomic_write_text
from lifelong.metrics import SEQUENTIAL_METRICS
from lifelong.streams.core import UnknownNameError
from lifelong.streams.registry import spec_from_mapping

if TYPE_CHECKING:
    from lifelong.learner import StreamResult
    from lifelong.options import StandsFor

log = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
ACCURACY_FILE = "accuracy.csv"
METRICS_FILE = "metrics.json"
RESULT_FILES = (CONFIG_FILE, ACCURACY_FILE, METRICS_FILE)
"""A finished run has all three."""

SUMMARY_METRICS = ("average_accuracy", "bwt", "fwt", "forgetting")
"""The keys every ``metrics.json`` holds (null where undefined, e.g. BWT of one task)."""


class RunDirError(ValueError):
    """A run directory is malformed, or there is no finished run where one was expected."""


@dataclass(frozen=True, eq=False)
class RunRecord:
    """One finished run, as read back from its directory.

    Attributes:
        run_dir: The run directory.
        stream: The stream family (config ``stream``), e.g. ``"text"``.
        order: The order label: config ``order``, or ``"custom:a,b,..."`` when ``tasks`` is set.
        seed: The run's seed.
        strategy: The strategy name, e.g. ``"mbpa++"``.
        metrics: ``metrics.json`` as read (points/percent; may hold a nested ``"strategy"``).
        accuracy: ``accuracy.csv``: row ``"before"`` then ``"after <task>"``, one column per task.
        config: ``config.yaml`` as read.

    """

    run_dir: Path
    stream: str
    order: str
    seed: int
    strategy: str
    metrics: dict[str, Any]
    accuracy: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def joint_training(self) -> bool:
        """Whether the run trained on every task from the start (MTL): no BWT, FWT or forgetting.

        Its sequential metrics (`lifelong.metrics.SEQUENTIAL_METRICS`) are then ``None`` in
        ``metrics`` (`load_run`).
        """
        return self.metrics.get("joint_training") is True

    @property
    def key(self) -> tuple[str, str, str]:
        """``(stream, strategy, order)``: the runs that differ only in seed share it."""
        return (self.stream, self.strategy, self.order)

    @property
    def task_names(self) -> tuple[str, ...]:
        """The tasks in training order."""
        return tuple(str(c) for c in self.accuracy.columns)

    def to_frame(self) -> pd.DataFrame:
        """R as a table (a copy of ``accuracy``): the untrained row, then one row per task."""
        return self.accuracy.copy()

    def summary(self) -> str:
        """What ``lifelong run`` printed for it: the matrices and the metrics."""
        from lifelong.experiment.summary import format_report

        return format_report(read_result(self.run_dir), self.metrics, stream=self.stream)

    def __repr__(self) -> str:
        """One line: what ran, its headline, where (not the matrix)."""
        value = self.metrics.get("average_accuracy")
        shown = "-" if value is None else f"{value:.1f}"
        return (
            f"RunRecord({self.strategy} on {self.stream} {self.order}, seed {self.seed}: "
            f"average {self.metrics.get('metric', 'accuracy')} {shown}; {self.run_dir}; "
            ".summary(), .to_frame())"
        )


# --- finding and reading runs ---------------------------------------------------------------


def find_runs(
    paths: Sequence[str | Path] | str | Path, *, names: Collection[str] | None = None
) -> list[RunRecord]:
    """Every finished run directory under ``paths``, read and sorted by directory.

    Args:
        paths: Run directories or folders holding them at any depth (a single path is fine).
        names: Only the run directories of these names (e.g. a sweep grid's ``replay_i_s0``:
            ``{p.run_dir.name for p in sweep.points()}``), the others not read; all if ``None``.

    Returns:
        The runs, sorted by run directory, each directory once even if paths overlap.
        Directories without ``metrics.json`` (unfinished runs) are skipped and logged at debug
        level; hidden directories and experiment trackers' stores (MLflow's ``mlruns``, whose
        folders hold ``meta.yaml``: `TRACKER_STORE_MARKERS`) are not searched.

    Raises:
        RunDirError: A path does not exist, or a run's files are malformed (the error names the
            file and what was expected).

    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    found: dict[Path, RunRecord] = {}
    for root in map(Path, paths):
        if not root.is_dir():
            raise RunDirError(f"{root}: not a directory (expected run directories under it)")
        for run_dir in _run_dirs(root):
            if names is None or run_dir.name in names:
                found.setdefault(run_dir.resolve(), load_run(run_dir))
    return distinguish_variants(sorted(found.values(), key=lambda r: r.run_dir))


SAME_RUN_KEYS = frozenset(
    {
        *("stream", "strategy", "strategy_options", "order", "tasks", "cluster_order", "seed"),
        *("data_dir", "glove", "output_dir", "run_index", "token_cache"),
        *("checkpoint_every", "keep_checkpoint", "progress", "eval_batch_size"),
        *("device", "compile", "memory_index"),
        *("loggers", "tracking_uri", "wandb_mode", "log_group"),
    }
)
"""Run-config keys that do not make two runs of a strategy different configurations: the
grouping and averaging axes, paths, bookkeeping and where it ran (a run resumes on another device;
``compile`` and the search backend compute the same numbers). Every other key, sizes, encoder,
learning rate, precision, does."""


def distinguish_variants(records: Sequence[RunRecord]) -> list[RunRecord]:
    """Name apart the runs of one strategy whose configurations differ beyond order and seed.

    Reports average the runs of each (stream, strategy) over orders and seeds; runs with other
    settings (another ``adapt_scope``, ``replay_ratio``, learning rate or size) are not the
    same configuration and must not be averaged together. Within each (stream, strategy), the
    keys whose values differ are appended to the strategy's name, e.g. ``mbpa++
    (adapt_scope=top1)``: the strategy's own options (a run that leaves one unset ran at its
    default: the value its options class declares, `option_defaults`, or ``default`` for a
    strategy not registered here) and the run keys outside `SAME_RUN_KEYS` that every run of
    the group records (older run directories may lack keys added since). Runs that set an
    option to its default and runs that leave it unset are one configuration. Groups that
    agree keep their name.
    """
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for record in records:
        groups.setdefault((record.stream, record.strategy), []).append(record)
    renamed: dict[int, RunRecord] = {}
    for (stream, strategy), group in groups.items():
        settings = [run_settings(r) for r in group]
        shared = set.intersection(*(set(s) for s in settings))
        optional = {k for s in settings for k in s if k.startswith("options.")}
        if optional:  # an option a run leaves unset: its declared default
            defaults = {f"options.{k}": v for k, v in option_defaults(strategy).items()}
            settings = [
                {**{k: defaults[k] for k in optional if k in defaults}, **s} for s in settings
            ]
            markers = _stands_for(strategy)  # once a group: read from the options class
            settings = [_resolved(s, r.config, markers) for s, r in zip(settings, group)]
        differing = sorted(
            k for k in shared | optional if len({repr(s.get(k, "default")) for s in settings}) > 1
        )
        if not differing:
            continue
        log.info("runs of %s on %s differ in %s: named apart", strategy, stream, differing)
        for record, values in zip(group, settings):
            label = ", ".join(
                f"{k.removeprefix('options.')}={values.get(k, 'default')}" for k in differing
            )
            renamed[id(record)] = dataclasses.replace(record, strategy=f"{strategy} ({label})")
    return [renamed.get(id(r), r) for r in records]


def option_defaults(strategy: str) -> dict[str, Any]:
    """The defaults a registered strategy's options class declares.

    ``{}`` where the strategy is not registered here, or its module does not import.
    """
    cls = _options_class(strategy)
    if cls is None:
        return {}
    return {
        f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
    }


def _options_class(strategy: str) -> type | None:
    from lifelong import registry

    try:
        return registry.options_class(strategy)
    except (registry.UnknownStrategyError, ImportError):
        return None


def _stands_for(strategy: str) -> dict[str, StandsFor]:
    """A registered strategy's options that carry `StandsFor` (``{}`` if not registered)."""
    from lifelong.options import stands_for

    cls = _options_class(strategy)
    return stands_for(cls) if cls else {}


def _resolved(
    settings: dict[str, Any], config: Mapping[str, Any], markers: Mapping[str, StandsFor]
) -> dict:
    """``settings`` with each option at its `StandsFor` sentinel read from the run's config.

    OML-ER's ``outer_lr`` of 0 is the run's ``lr``; a run whose config lacks the key keeps the
    sentinel.
    """
    resolved = dict(settings)
    for name, marker in markers.items():
        key = f"options.{name}"
        if resolved.get(key, marker) == marker.sentinel and config.get(marker.key) is not None:
            resolved[key] = config[marker.key]
    return resolved


def run_settings(record: RunRecord) -> dict[str, Any]:
    """What makes a run's configuration (compared between runs of one strategy).

    Its run keys outside `SAME_RUN_KEYS`, and its strategy's own options as ``options.<key>``
    (only those its config sets).
    """
    config = record.config
    values = {k: v for k, v in config.items() if k not in SAME_RUN_KEYS}
    options = (config.get("strategy_options") or {}).get(record.strategy) or {}
    values.update({f"options.{k}": v for k, v in options.items()})
    return values


TRACKER_STORE_MARKERS = ("meta.yaml",)
"""A folder holding one of these belongs to an experiment tracker's store, not to a run.

MLflow's file store (``<output_dir>/mlruns`` by default, `lifelong.experiment.trackers`) keeps
a ``meta.yaml`` in every experiment and run folder, and copies of a run's ``metrics.json`` and
``accuracy.csv`` under ``<run>/artifacts/results``: those copies are not run directories.
"""


def _run_dirs(root: Path, *, finished: bool = True) -> Iterable[Path]:
    """The finished run directories under ``root`` (``finished=False``: the unfinished ones)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if any(marker in filenames for marker in TRACKER_STORE_MARKERS):
            dirnames.clear()  # a tracker's store (MLflow's mlruns): its copies are no runs
            log.debug("skipping tracker store %s", dirpath)
            continue
        if METRICS_FILE in filenames:
            dirnames.clear()  # a run's own subfolders hold no runs
            if finished:
                yield Path(dirpath)
        elif CONFIG_FILE in filenames or ACCURACY_FILE in filenames:
            dirnames.clear()
            log.info("leaving out unfinished run %s (no %s)", dirpath, METRICS_FILE)
            if not finished:
                yield Path(dirpath)


def unfinished_runs(paths: Sequence[str | Path] | str | Path) -> list[tuple[Path, str]]:
    """The run directories under ``paths`` without results, each with why, in words.

    A report leaves them out; the command line says so (`lifelong report`). The reason is the
    run's own last word: its ``log.txt``'s failure line (a diverged or crashed run), else
    ``interrupted (resumable: checkpoint.pt)`` or ``unfinished`` (still running, or killed
    before its first checkpoint).
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    found: dict[Path, str] = {}
    for root in map(Path, paths):
        if root.is_dir():
            for run_dir in _run_dirs(root, finished=False):
                found.setdefault(run_dir, _why_unfinished(run_dir))
    return sorted(found.items())


def _why_unfinished(run_dir: Path) -> str:
    failed = None
    try:
        for line in (
            (run_dir / "log.txt").read_text(encoding="utf-8", errors="replace").splitlines()
        ):
            if " run failed: " in line:
                failed = line.split(" run failed: ", 1)[1]
    except OSError:
        pass
    if failed is not None:
        return f"failed: {failed}"
    if (run_dir / "checkpoint.pt").is_file():
        return "interrupted (resumable: checkpoint.pt)"
    return "unfinished (running, or stopped before its first checkpoint)"


def load_run(run_dir: str | Path) -> RunRecord:
    """Read one finished run directory.

    Args:
        run_dir: A directory holding ``config.yaml``, ``accuracy.csv`` and ``metrics.json``.

    Returns:
        The run's record; for a joint learner (MTL), the sequential metrics are ``None`` and
        ``joint_training`` is true even where an older ``metrics.json`` holds numbers.

    Raises:
        RunDirError: A file is missing or malformed; the error names it and what was expected.

    """
    run_dir = Path(run_dir)
    config = _read_config(run_dir / CONFIG_FILE)
    metrics = _read_metrics(run_dir / METRICS_FILE)
    if _registered_as_joint(config["strategy"]):
        # a joint learner's run written before metrics.json said so: its numbers mean nothing
        metrics.update(dict.fromkeys(SEQUENTIAL_METRICS), joint_training=True)
    return RunRecord(
        run_dir=run_dir,
        stream=config["stream"],
        order=order_label(config),
        seed=config["seed"],
        strategy=config["strategy"],
        metrics=metrics,
        accuracy=_read_accuracy(run_dir / ACCURACY_FILE),
        config=config,
    )


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise RunDirError(f"{path}: missing (every finished run directory has one)")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path}: unreadable: {err}") from None


def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML or JSON file holding a mapping (errors name the file and what was expected)."""
    json_file = path.suffix == ".json"
    try:
        values = json.loads(_read_text(path)) if json_file else yaml.safe_load(_read_text(path))
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise RunDirError(f"{path}: invalid {'JSON' if json_file else 'YAML'}: {err}") from None
    except RecursionError:
        raise RunDirError(
            f"{path}: invalid {'JSON' if json_file else 'YAML'}: nested too deeply"
        ) from None
    if not isinstance(values, dict):
        raise RunDirError(f"{path}: expected {what}, got {values!r:.60}")
    return values


def _read_config(path: Path) -> dict[str, Any]:
    """A run's config as flat keys (`lifelong.experiment.config.flatten`: by section or flat)."""
    from lifelong.experiment.config import ConfigError, flatten

    try:
        values = flatten(_read_mapping(path, "a mapping of config keys"), where=str(path))
    except ConfigError as err:
        raise RunDirError(str(err)) from None
    for key, kind in (("stream", str), ("strategy", str), ("seed", int)):
        if key not in values:
            raise RunDirError(f"{path}: missing key {key!r}")
        value = values[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise RunDirError(f"{path}: key {key!r} must be a {kind.__name__}, got {value!r}")
    tasks = values.get("tasks")
    if tasks is not None and not (
        isinstance(tasks, list) and tasks and all(isinstance(t, str) for t in tasks)
    ):
        raise RunDirError(f"{path}: key 'tasks' must be null or a list of names, got {tasks!r}")
    return values


def order_label(config: dict[str, Any]) -> str:
    """A run's order for reports, as its stream names it (`StreamSpec.order_id`).

    ``i``..``iv``, ``custom:<tasks>`` or FewRel's ``clusters-<cluster_order>``.

    Raises:
        RunDirError: An unknown stream, or keys its spec does not take as given.

    """
    try:
        return spec_from_mapping(config).order_id
    except (UnknownNameError, TypeError) as err:
        raise RunDirError(f"config: {err}") from None


@functools.cache
def _registered_as_joint(name: str) -> bool:
    from lifelong import registry

    try:
        return bool(getattr(registry.get(name), "joint_training", False))
    except (registry.UnknownStrategyError, ImportError):  # another version's or a missing plugin
        return False


def _read_metrics(path: Path) -> dict[str, Any]:
    metrics = _read_mapping(path, "a JSON object of metrics")
    if (where := _non_finite(metrics)) is not None:
        raise RunDirError(
            f"{path}: {where} is not a finite number; a finished run's metrics are numbers "
            "or null (undefined), so this file was damaged or written by a faulty version"
        )
    for key in SUMMARY_METRICS:
        if key not in metrics:
            raise RunDirError(f"{path}: missing metric {key!r}")
        if metrics[key] is not None and not _is_number(metrics[key]):
            raise RunDirError(
                f"{path}: metric {key!r} must be a number or null, got {metrics[key]!r}"
            )
    return metrics


def _non_finite(value: Any, path: str = "") -> str | None:
    """The key path of the first nan or infinity in a parsed JSON value, else None."""
    if isinstance(value, float) and not np.isfinite(value):
        return f"metric {path or 'value'!r} = {value}"
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, inner in items:
        if (found := _non_finite(inner, f"{path}.{key}" if path else str(key))) is not None:
            return found
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _read_accuracy(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(io.StringIO(_read_text(path)), index_col=0)
    except ValueError as err:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise RunDirError(f"{path}: unreadable CSV: {err}") from None
    expected = ["before"] + [f"after {c}" for c in frame.columns]
    if frame.shape[1] == 0 or [str(i) for i in frame.index] != expected:
        raise RunDirError(
            f"{path}: expected a 'before' row then one 'after <task>' row per task column, "
            f"rows {expected}; got rows {[str(i) for i in frame.index]}"
        )
    for column in frame.columns:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any():
            row = int(values.isna().to_numpy().argmax())
            raise RunDirError(
                f"{path}: row {frame.index[row]!r}, column {column!r}: expected an accuracy "
                f"(a number, percent), got {frame[column].iloc[row]!r}"
            )
        frame[column] = values.astype(float)
    return frame.astype(float)


def as_records(runs: Sequence[str | Path] | Sequence[RunRecord] | str | Path) -> list[RunRecord]:
    """Records as given, or the finished runs found under paths (at least one).

    Raises:
        RunDirError: A mix of records and paths, nothing given, or no finished run found.

    """
    if isinstance(runs, str | os.PathLike):
        runs = [runs]
    items = list(runs)
    if items and all(isinstance(x, RunRecord) for x in items):
        return items
    if any(isinstance(x, RunRecord) for x in items):
        raise RunDirError("expected run records or paths, not a mix of both")
    if not items:
        raise RunDirError("no runs given (expected run records or paths to search)")
    records = find_runs(items)
    if not records:
        searched = ", ".join(str(p) for p in items)
        raise RunDirError(f"no finished run (a directory with {METRICS_FILE}) under {searched}")
    return records


def path_part(name: str) -> str:
    """A name made safe as part of a directory name on any system.

    Characters other than letters, digits and ``+-_.`` become ``-``
    (``avalanche:replay`` -> ``avalanche-replay``).
    """
    return "".join(c if c.isalnum() or c in "+-_." else "-" for c in name)


def is_finished(run_dir: str | Path) -> bool:
    """Whether a run directory holds a finished run's results."""
    return all((Path(run_dir) / name).is_file() for name in RESULT_FILES)


def read_result(run_dir: str | Path) -> StreamResult:
    """The matrices of a finished run, read back from its CSV files."""
    from lifelong.learner import StreamResult

    run_dir = Path(run_dir)
    frame = _read_accuracy(run_dir / ACCURACY_FILE)
    values = frame.to_numpy(dtype=float)
    metrics = read_metrics(run_dir)
    secondary = {}
    for name in metrics.get("secondary_metrics", []):
        secondary[name] = _read_accuracy(run_dir / f"{name}.csv").to_numpy(dtype=float)
    names = tuple(str(c) for c in frame.columns)
    updates = metrics.get("updates")  # per task, where the run counted them
    if not (isinstance(updates, list) and len(updates) == len(names)):
        updates = None
    return StreamResult(
        names,
        values[1:],
        values[0],
        str(metrics.get("metric", "accuracy")),
        secondary,
        updates=None if updates is None else tuple(updates),
    )


def read_metrics(run_dir: str | Path) -> dict[str, Any]:
    """``metrics.json`` of a run directory (checked like `load_run` does)."""
    return _read_metrics(Path(run_dir) / METRICS_FILE)


PROBING_NAME = "probing"
"""``probing.csv``: the probing matrix of a run with ``--probe`` (`lifelong.probing`)."""


def write_results(
    run_dir: Path, config: dict[str, Any], result: StreamResult, metrics: dict[str, Any]
) -> None:
    """Write config, the matrices and metrics atomically, ``metrics.json`` last.

    ``accuracy.csv`` holds R, the stream's main metric (accuracy; F1 for QA, as
    ``metrics.json``'s ``"metric"`` says); other metrics get their own file (``exact_match.csv``),
    and a probing run its probing matrix (``probing.csv``; NaN where a task was not yet seen).
    """
    atomic_write_text(run_dir / CONFIG_FILE, yaml.safe_dump(config, sort_keys=False))
    frames = [("accuracy", result.to_frame())] + [
        (name, result.to_frame(name)) for name in result.secondary
    ]
    if result.probing is not None:  # --probe: the linear probes' accuracy, untrained row first
        probing = result.to_frame().copy()
        probing.loc[:, :] = result.probing
        frames.append((PROBING_NAME, probing))
    for name, frame in frames:
        buf = io.StringIO()
        frame.to_csv(buf, float_format="%.4f", index_label="row")
        atomic_write_text(run_dir / f"{name}.csv", buf.getvalue())
    atomic_write_text(run_dir / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
