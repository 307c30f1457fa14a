"""Experiment trackers: TensorBoard, Weights & Biases, MLflow and CSV (``--logger``, repeatable).

Every tracker gets the same record of a run:

- the run config (flattened: ``strategy_options.replay.replay_every``), its name (the run
  directory's) and its group (a sweep's name, ``log_group``);
- every training mini-batch's statistics as ``train/<name>`` (``train/loss``, and whatever else
  the strategy's ``observe`` returns) at the global mini-batch step (task-boundary crossing:
  the step keeps counting);
- every evaluation as ``eval/<metric>/<task>`` and ``eval/<metric>/average`` (the mean over
  the tasks trained so far; all tasks before training) at step k = tasks trained (0: before
  training), for the main metric and the secondary ones (QA's exact match);
- at the end, the numbers of ``metrics.json`` as ``final/<name>``, the matrices R
  (``accuracy.csv`` and the secondary ones) and the report plots (``plots/*.png``: the accuracy
  matrix and the per-task curves of `lifelong.experiment.reports.plots`) as artifacts.

Where each writes (``RUN`` is the run directory): ``tensorboard`` event files in
``RUN/tensorboard`` (plots as images, the config as text); ``wandb`` a run in ``RUN/wandb``,
offline by default (``wandb_mode: online`` syncs, with ``WANDB_API_KEY``), grouped by
``log_group``; ``mlflow`` a run in the experiment named ``log_group`` (``"lifelong"`` without
one) of ``tracking_uri``, by default the local file store ``file:<output_dir>/mlruns``;
``csv`` ``RUN/logs/{steps,scores,final}.csv``.

A resumed run continues the same W&B and MLflow runs (their ids are kept in
``RUN/trackers.json``). The mini-batches between the last checkpoint and the interruption are
trained again: ``csv`` first drops its lines from there on (``steps.csv`` from the resumed
step, ``scores.csv`` from the first evaluation to be redone), and ``tensorboard`` purges its
events from the resumed step (``SummaryWriter(purge_step=...)``), so each step is recorded once;
MLflow and W&B keep the earlier values beside the new ones (neither can delete history).

Values are recorded as they are: a diverged step's ``nan`` loss is a ``nan`` in every tracker
(the run then fails, `lifelong.learner.DivergenceError`).

MLflow 3 keeps the file store in maintenance mode and refuses it unless
``MLFLOW_ALLOW_FILE_STORE=true``; the default (a file store) sets it for this process. Pass a
database URI (``--tracking-uri sqlite:///mlflow.db``) or a server to use another backend.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import logging
import os
import re
import socket
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import yaml

from lifelong.files import atomic_write_text

log = logging.getLogger(__name__)

LOGGERS = ("tensorboard", "wandb", "mlflow", "csv")
"""The trackers ``--logger`` accepts."""

_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
"""Tracker -> the module it imports (the extra of the same name installs it)."""

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

    """

    output_dir: str = "runs"
    run_index: str | None = None
    loggers: tuple[str, ...] = ()
    tracking_uri: str | None = None
    wandb_mode: Literal["offline", "online"] = "offline"
    log_group: str | None = None

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
        module = _PACKAGES.get(name)
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
    """One experiment tracker: a sink for a run's records (see the module docstring)."""

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
            started.append(_OPEN[name](info, ids))
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
# The four trackers
# ---------------------------------------------------------------------------------------------


class CSVTracker:
    """Plain CSV files in ``RUN/logs``: ``steps.csv``, ``scores.csv`` and ``final.csv``.

    ``steps.csv`` and ``scores.csv`` are long tables (one value a line: ``step,task,name,value``
    and ``trained,after,name,value``), appended line by line and flushed, so a running or killed
    run's records can be read; ``final.csv`` (``name,value``) is written atomically at the end.
    """

    def __init__(self, info: RunInfo, ids: Mapping[str, str]) -> None:
        """Open (append to) the run's CSV files."""
        self.dir = info.run_dir / "logs"
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.dir / "config.yaml", yaml.safe_dump(dict(info.config)))
        if info.resumed_at is not None:  # drop what the resumed run records again
            _keep_rows(self.dir / "steps.csv", lambda row: int(row[0]) < info.resumed_at)
            _keep_rows(self.dir / "scores.csv", lambda row: int(row[0]) < info.evaluations)
        self._steps = self._open("steps.csv", ("step", "task", "name", "value"))
        self._scores = self._open("scores.csv", ("trained", "after", "name", "value"))

    def _open(self, name: str, header: tuple[str, ...]) -> Any:
        path = self.dir / name
        fresh = not path.exists() or path.stat().st_size == 0
        handle = path.open("a", newline="", encoding="utf-8")
        if fresh:
            csv.writer(handle).writerow(header)
        return handle

    def log_step(self, step: int, task: str, values: Mapping[str, float]) -> None:
        """Append one line per value."""
        writer = csv.writer(self._steps)
        for name, value in values.items():
            writer.writerow((step, task, name, repr(value)))
        self._steps.flush()

    def log_scores(self, index: int, after: str, scores: Mapping[str, float]) -> None:
        """Append one line per score."""
        writer = csv.writer(self._scores)
        for name, value in scores.items():
            writer.writerow((index, after, name, repr(value)))
        self._scores.flush()

    def log_final(self, values: Mapping[str, float], artifacts: Sequence[Path]) -> None:
        """Write ``final.csv`` (the artifacts are already in the run directory)."""
        lines = ["name,value"] + [f"{name},{value!r}" for name, value in values.items()]
        atomic_write_text(self.dir / "final.csv", "\n".join(lines) + "\n")

    def close(self, status: str) -> None:
        """Close the files."""
        self._steps.close()
        self._scores.close()


class TensorBoardTracker:
    """TensorBoard event files in ``RUN/tensorboard`` (``tensorboard --logdir RUN/..``).

    Scalars as in the module docstring, the config as text (YAML), the plots as images; a sweep's
    runs sit side by side under its folder, so ``--logdir <sweep folder>`` shows them together.
    """

    def __init__(self, info: RunInfo, ids: Mapping[str, str]) -> None:
        """Open an event-file writer in ``RUN/tensorboard``."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(
            log_dir=str(info.run_dir / "tensorboard"), purge_step=info.resumed_at
        )
        config = yaml.safe_dump(dict(info.config), sort_keys=False)
        self.writer.add_text("config", "```\n" + config + "```")
        if info.group:
            self.writer.add_text("group", info.group)

    def log_step(self, step: int, task: str, values: Mapping[str, float]) -> None:
        """One scalar per value at the global step."""
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)

    def log_scores(self, index: int, after: str, scores: Mapping[str, float]) -> None:
        """One scalar per score at step = tasks trained."""
        for name, value in scores.items():
            self.writer.add_scalar(name, value, index)

    def log_final(self, values: Mapping[str, float], artifacts: Sequence[Path]) -> None:
        """Final numbers as scalars at step 0, PNG artifacts as images, CSVs as text."""
        import matplotlib.image

        for name, value in values.items():
            self.writer.add_scalar(name, value, 0)
        for path in artifacts:
            if path.suffix == ".png":
                image = matplotlib.image.imread(path)  # (H, W, 3 or 4) floats in [0, 1]
                self.writer.add_image(f"plots/{path.stem}", image[..., :3], 0, dataformats="HWC")
            else:
                self.writer.add_text(f"files/{path.name}", _as_code(path.read_text()))

    def close(self, status: str) -> None:
        """Flush and close the event file."""
        self.writer.add_text("status", status)
        self.writer.close()


class WandbTracker:
    """A Weights & Biases run in ``RUN/wandb``: offline unless ``wandb_mode: online``.

    An offline run needs no account or network; ``wandb sync RUN/wandb/offline-run-*`` uploads
    it later. ``train/*`` is plotted against ``train/step`` and ``eval/*`` against
    ``eval/trained`` (tasks trained), final numbers go to the run summary, the plots are logged
    as images and every artifact is saved with the run.
    """

    def __init__(self, info: RunInfo, ids: Mapping[str, str]) -> None:
        """Start (or, on a resume, continue) the run."""
        import wandb

        self.wandb = wandb
        self.run_dir = info.run_dir
        self.run = wandb.init(
            project="lifelong",
            dir=str(info.run_dir),
            name=info.name,
            group=info.group,
            config=dict(info.config),
            mode=info.wandb_mode,
            id=ids.get("wandb"),
            resume="allow" if ids.get("wandb") else None,
            reinit="create_new",
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
        )
        self.run.define_metric("train/step")
        self.run.define_metric("train/*", step_metric="train/step")
        self.run.define_metric("eval/trained")
        self.run.define_metric("eval/*", step_metric="eval/trained")

    @property
    def ids(self) -> dict[str, str]:
        """The run id, kept so that a resumed run continues it."""
        return {"wandb": self.run.id}

    def log_step(self, step: int, task: str, values: Mapping[str, float]) -> None:
        """One history row per mini-batch."""
        self.run.log({**values, "train/step": step})

    def log_scores(self, index: int, after: str, scores: Mapping[str, float]) -> None:
        """One history row per evaluation."""
        self.run.log({**scores, "eval/trained": index})

    def log_final(self, values: Mapping[str, float], artifacts: Sequence[Path]) -> None:
        """Final numbers into the summary; plots as images; every artifact saved."""
        self.run.summary.update(dict(values))
        images = {
            f"plots/{p.stem}": self.wandb.Image(str(p)) for p in artifacts if p.suffix == ".png"
        }
        if images:
            self.run.log(images)
        for path in artifacts:  # saved under their path in the run directory
            self.run.save(str(path), base_path=str(self.run_dir), policy="now")

    def close(self, status: str) -> None:
        """Finish the run (exit code 1 unless it finished)."""
        self.run.finish(exit_code=0 if status == "finished" else 1)


class MLflowTracker:
    """An MLflow run: params = the flattened config, metrics, artifacts, tags.

    The run goes into the experiment named after the group (a sweep's name), ``"lifelong"``
    without one, of ``tracking_uri`` (default: the file store ``file:<output_dir>/mlruns``; see
    the module docstring). Training statistics are sent in batches (one request per 50
    mini-batches and at every evaluation), so a remote server is not called per step.
    """

    FLUSH_EVERY = 50

    def __init__(self, info: RunInfo, ids: Mapping[str, str]) -> None:
        """Create (or, on a resume, reopen) the run."""
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient

        uri = info.tracking_uri or default_tracking_uri(info.config)
        if uri.startswith("file:") and "MLFLOW_ALLOW_FILE_STORE" not in os.environ:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        for variable, value in HTTP_DEFAULTS.items():  # fail in seconds, not minutes
            os.environ.setdefault(variable, value)
        self.client = MlflowClient(tracking_uri=uri)
        experiment = info.group or "lifelong"
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        tags = {"run_dir": str(info.run_dir), "group": info.group or ""}
        if ids.get("mlflow"):
            self.run_id = ids["mlflow"]
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            run = self.client.create_run(experiment_id, run_name=info.name, tags=tags)
            self.run_id = run.info.run_id
            params = [Param(mlflow_name(k), v[:6000]) for k, v in info.params().items()]
            for start in range(0, len(params), 100):  # MLflow takes at most 100 params a call
                self.client.log_batch(self.run_id, params=params[start : start + 100])
        self.client.log_batch(self.run_id, tags=[RunTag("status", "running")])
        self._pending: list[Any] = []
        self._steps = 0

    @property
    def ids(self) -> dict[str, str]:
        """The run id, kept so that a resumed run continues it."""
        return {"mlflow": self.run_id}

    def _add(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending += [Metric(mlflow_name(k), v, now, step) for k, v in values.items()]

    def _flush(self) -> None:
        for start in range(0, len(self._pending), 1000):  # MLflow: 1000 metrics a call
            self.client.log_batch(self.run_id, metrics=self._pending[start : start + 1000])
        self._pending = []

    def log_step(self, step: int, task: str, values: Mapping[str, float]) -> None:
        """Queue the values; send every `FLUSH_EVERY` mini-batches."""
        self._add(values, step)
        self._steps += 1
        if self._steps % self.FLUSH_EVERY == 0:
            self._flush()

    def log_scores(self, index: int, after: str, scores: Mapping[str, float]) -> None:
        """Send the scores (and what is queued) now."""
        self._add(scores, index)
        self._flush()

    def log_final(self, values: Mapping[str, float], artifacts: Sequence[Path]) -> None:
        """Final numbers as metrics; artifacts under ``plots/`` and ``results/``."""
        self._add(values, 0)
        self._flush()
        for path in artifacts:
            where = "plots" if path.suffix == ".png" else "results"
            self.client.log_artifact(self.run_id, str(path), where)

    def close(self, status: str) -> None:
        """Send what is queued and end the run (FINISHED, FAILED or KILLED)."""
        from mlflow.entities import RunTag

        self._flush()
        self.client.log_batch(self.run_id, tags=[RunTag("status", status)])
        self.client.set_terminated(self.run_id, status.upper())


HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
"""MLflow's HTTP settings unless the environment sets them: MLflow's own (7 retries with
back-off, 120 s each) keep a run waiting minutes on a server that has gone away mid-run."""

_MLFLOW_NAME = re.compile(r"[^\w\-. :/]")


def mlflow_name(key: str) -> str:
    """A param or metric name MLflow accepts (``mbpa++`` -> ``mbpa__``).

    MLflow allows letters, digits, ``_ - . : /`` and spaces; other characters become ``_``.
    """
    return _MLFLOW_NAME.sub("_", key)


def default_tracking_uri(config: Mapping[str, Any]) -> str:
    """MLflow's default store: ``file:<output_dir>/mlruns`` (absolute)."""
    return (Path(str(config.get("output_dir") or "runs")).resolve() / "mlruns").as_uri()


_OPEN = {
    "csv": CSVTracker,
    "tensorboard": TensorBoardTracker,
    "wandb": WandbTracker,
    "mlflow": MLflowTracker,
}


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
