"""What every tracker shares: the ``tracking:`` section, the run record, opening and closing.

The trackers themselves are this package's other modules, one each (`LOGGERS`).
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import io
import json
import logging
import pkgutil
import socket
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import numpy as np

from lifelong.files import atomic_write_text

log = logging.getLogger(__name__)

PACKAGE = "lifelong.experiment.trackers"
"""The package whose modules are the trackers: ``<name>.py`` defines ``TRACKER``, its class."""

LOGGERS: tuple[str, ...] = tuple(
    sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name != "base")
)
"""The trackers ``--logger`` accepts: one module each in this package (read, not imported)."""

Logger = Literal[LOGGERS]  # type: ignore[valid-type]
"""A tracker's name."""


def tracker_class(name: str) -> type[Tracker]:
    """The tracker class of ``name``: its module's ``TRACKER`` (imported now, light)."""
    return importlib.import_module(f"{PACKAGE}.{name}").TRACKER


IDS_FILE = "trackers.json"


class TrackerError(ValueError):
    """An unknown tracker, or one whose package is not installed (naming the extra)."""


@dataclass(frozen=True)
class TrackingOptions:
    """A run's ``tracking:`` section: where its results go and which trackers follow it.

    Attributes:
        output_dir: Where run directories are created.
        run_index: The SQLite run index; ``None``: ``<output_dir>/index.sqlite``.
        loggers: Experiment trackers: any of tensorboard, wandb, mlflow, csv.
        tracking_uri: MLflow's tracking URI; ``None``: ``file:<output_dir>/mlruns``.
        wandb_mode: W&B's mode; ``offline`` needs no network.
        log_group: Tracker group (W&B group, MLflow experiment); sweeps: the sweep's name.
        save_model: Keep the trained model in the run directory's ``model/``: the strategy's
            state (weights and episodic memory), the encoder in Hugging Face format and a model
            card; `lifelong.load_model` and ``lifelong predict`` use it.

    """

    output_dir: str = "runs"
    run_index: str | None = None
    loggers: tuple[Logger, ...] = field(default=(), metadata={"flag": "logger", "repeatable": True})
    tracking_uri: str | None = field(default=None, metadata={"logger": "mlflow"})
    wandb_mode: Literal["offline", "online"] = field(
        default="offline", metadata={"logger": "wandb"}
    )
    log_group: str | None = None
    save_model: bool = False

    def check(self) -> None:
        """The tracker names (`check_loggers`)."""
        check_loggers(self.loggers)


def check_loggers(names: Sequence[str]) -> None:
    """Check tracker names and that their packages import, before anything loads.

    Raises:
        TrackerError: An unknown or repeated name, or a tracker whose package is missing (the
            message names the extra to install, e.g. ``pip install 'lifelong[wandb]'``).

    """
    unknown = [n for n in names if n not in LOGGERS]
    if unknown:
        raise TrackerError(f"unknown logger {unknown[0]!r}; expected some of {', '.join(LOGGERS)}")
    if len(set(names)) != len(names):
        raise TrackerError(f"a logger is listed twice in {list(names)}")
    for name in names:
        module = tracker_class(name).package
        if module and importlib.util.find_spec(module) is None:
            raise TrackerError(
                f"logger {name!r} needs the {module} package: pip install 'lifelong[{name}]'"
            )


CONNECT_TIMEOUT = 5.0
"""Seconds a tracking server gets to accept a connection before a run is refused."""


MLFLOW_SCHEMES = (
    *("", "file", "http", "https", "sqlite"),
    *("postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc"),
)
"""The tracking URI schemes MLflow stores runs under ("": a local folder)."""


def check_tracking_uri(uri: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse an MLflow tracking URI that cannot work, before the run starts.

    An ``http(s)`` server must accept a TCP connection within ``timeout`` seconds (MLflow's
    own client retries an unreachable server for about 4 minutes before it fails); a
    ``sqlite:///`` database's folder must exist. Other schemes (``file:``, ``databricks``, ...)
    are left to MLflow.

    Raises:
        TrackerError: Naming the URI and why it cannot be used.

    """
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in MLFLOW_SCHEMES or (not parsed.scheme and ":" in uri):
        raise TrackerError(
            f"{uri!r} is not a tracking URI MLflow takes: expected http(s)://host:port, "
            "sqlite:///PATH, file:PATH, a local folder, or one of "
            f"{', '.join(s for s in MLFLOW_SCHEMES if s)}://..."
        )
    if parsed.scheme in ("http", "https"):
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname or "", port), timeout=timeout).close()
        except OSError as err:
            raise TrackerError(
                f"{uri}: no tracking server answers ({err.strerror or err}; waited "
                f"{timeout:g} s); start it, or drop --tracking-uri for the local file store"
            ) from None
    elif parsed.scheme == "sqlite" and parsed.path not in ("", "/", "/:memory:"):
        folder = Path(parsed.path[1:]).parent  # sqlite:///rel.db, sqlite:////abs/path.db
        if not folder.is_dir():
            raise TrackerError(f"{uri}: the database's folder {folder} does not exist")


@dataclass(frozen=True)
class RunInfo:
    """What every tracker is told about the run when it starts.

    Attributes:
        run_dir: The run directory.
        config: The run config, plain Python (`RunConfig.to_dict`).
        group: The sweep the run belongs to (W&B group, MLflow experiment); ``None``: none.
        tracking_uri: MLflow's tracking URI (``None``: ``file:<output_dir>/mlruns``).
        wandb_mode: ``"offline"`` (no network) or ``"online"``.
        resumed_at: A resumed run: the global mini-batch step it continues from (its
            checkpoint's); the steps from there on are trained, and logged, again. ``None``:
            a fresh run.
        evaluations: A resumed run: the evaluations its checkpoint holds (the untrained one
            and one per finished task); later ones are done, and logged, again.

    """

    run_dir: Path
    config: Mapping[str, Any]
    group: str | None = None
    tracking_uri: str | None = None
    wandb_mode: str = "offline"
    resumed_at: int | None = None
    evaluations: int = 0

    @property
    def name(self) -> str:
        """The run's name: its directory's."""
        return self.run_dir.name

    def params(self) -> dict[str, str]:
        """The config flattened to ``a.b.c`` keys with string values."""
        return {key: str(value) for key, value in _flatten(self.config).items()}


class Tracker(Protocol):
    """One experiment tracker: a sink for a run's records (see the package docstring).

    Built as ``Tracker(info, ids)`` (`RunInfo`, the ids earlier runs' trackers kept).

    Attributes:
        package: The module it imports (the extra of the same name installs it), or None.

    """

    package: ClassVar[str | None]

    def log_step(self, step: int, task: str, values: Mapping[str, float]) -> None:
        """Statistics of training mini-batch ``step`` (global), of ``task``."""

    def log_scores(self, index: int, after: str, scores: Mapping[str, float]) -> None:
        """One evaluation's scalars (``eval/<metric>/<task>``) after ``index`` tasks."""

    def log_final(self, values: Mapping[str, float], artifacts: Sequence[Path]) -> None:
        """The end-of-run numbers and the files to keep (matrices, plots)."""

    def close(self, status: str) -> None:
        """Flush and close; ``status`` is ``"finished"``, ``"failed"`` or ``"killed"``."""


class Trackers:
    """The run's trackers, fed by the learner (a `lifelong.learner.StreamListener`)."""

    def __init__(self, trackers: Sequence[Tracker], task_names: Sequence[str]) -> None:
        """Wrap started trackers; ``task_names`` name the evaluation columns."""
        self.trackers = list(trackers)
        self.task_names = tuple(task_names)

    def on_step(self, task: int, step: int, global_step: int, stats: Mapping[str, float]) -> None:
        """A training mini-batch's statistics (``stats`` as ``observe`` returned them)."""
        values = {f"train/{k}": float(v) for k, v in stats.items() if _is_number(v)}
        if values:
            for tracker in self.trackers:
                tracker.log_step(global_step, self.task_names[task], values)

    def on_evaluation(self, trained: int, rows: Mapping[str, np.ndarray]) -> None:
        """An evaluation after ``trained`` tasks: one row of scores per metric."""
        scores = {}
        for metric, row in rows.items():
            for name, value in zip(self.task_names, row):
                scores[f"eval/{metric}/{name}"] = float(value)
            seen = row[:trained] if trained else row
            scores[f"eval/{metric}/average"] = float(np.mean(seen))
        after = self.task_names[trained - 1] if trained else "before"
        for tracker in self.trackers:
            tracker.log_scores(trained, after, scores)

    def finish(self, metrics: Mapping[str, Any], artifacts: Sequence[Path]) -> None:
        """The end-of-run numbers (``metrics.json``'s, flattened) and the artifact files."""
        values = {f"final/{k}": float(v) for k, v in _flatten(metrics).items() if _is_number(v)}
        for tracker in self.trackers:
            tracker.log_final(values, artifacts)

    def close(self, status: str) -> None:
        """Close every tracker (each even if another fails to)."""
        for tracker in self.trackers:
            try:
                tracker.close(status)
            except Exception as err:  # a tracker that cannot close must not hide the run's end
                log.warning("closing tracker %s failed: %s", type(tracker).__name__, err)


def open_trackers(
    names: Sequence[str], info: RunInfo, task_names: Sequence[str]
) -> Trackers | None:
    """Start the named trackers for a run (``None`` if there are none).

    Raises:
        TrackerError: As `check_loggers`.

    """
    if not names:
        return None
    check_loggers(names)
    ids = _read_ids(info.run_dir)
    started: list[Tracker] = []
    try:
        for name in names:
            started.append(tracker_class(name)(info, ids))
    except BaseException:
        Trackers(started, task_names).close("failed")
        raise
    _write_ids(info.run_dir, {**ids, **{k: v for t in started for k, v in _ids_of(t).items()}})
    log.info("logging to %s", ", ".join(names))
    return Trackers(started, task_names)


@contextmanager
def tracking(
    names: Sequence[str], info: RunInfo, task_names: Sequence[str]
) -> Iterator[Trackers | None]:
    """`open_trackers` for the span of a run, closed as it ends.

    The trackers close ``finished`` when the block ends normally, ``failed`` on an error and
    ``killed`` on an interrupt (KeyboardInterrupt, or any other non-``Exception``: the run
    stays resumable). Yields ``None`` when no tracker is asked for.
    """
    trackers = open_trackers(names, info, task_names)
    status = "failed"
    try:
        yield trackers
        status = "finished"
    except BaseException as err:
        status = "failed" if isinstance(err, Exception) else "killed"
        raise
    finally:
        if trackers is not None:
            trackers.close(status)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _is_number(value: Any) -> bool:
    """A number to record: nan and inf too (a diverged step is recorded as it was)."""
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _keep_rows(path: Path, keep: Any) -> None:
    """Rewrite a CSV log atomically with its header and the data rows ``keep(row)`` accepts.

    A line cut short by a kill (the last one) is dropped too.
    """
    if not path.is_file():
        return
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        return
    kept = [rows[0]]
    for row in rows[1:]:
        try:
            if len(row) == len(rows[0]) and keep(row):
                kept.append(row)
        except ValueError:  # a half-written line
            continue
    buffer = io.StringIO()
    csv.writer(buffer).writerows(kept)
    atomic_write_text(path, buffer.getvalue())


def _as_code(text: str) -> str:
    return "```\n" + text + "\n```"


def _ids_of(tracker: Tracker) -> dict[str, str]:
    return dict(getattr(tracker, "ids", {}))


def _read_ids(run_dir: Path) -> dict[str, str]:
    path = run_dir / IDS_FILE
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as err:
        raise TrackerError(f"{path}: unreadable tracker ids ({err})") from None


def _write_ids(run_dir: Path, ids: Mapping[str, str]) -> None:
    if ids:
        atomic_write_text(run_dir / IDS_FILE, json.dumps(dict(ids), indent=2) + "\n")
