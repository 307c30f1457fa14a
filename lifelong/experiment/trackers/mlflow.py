"""The ``mlflow`` tracker: an MLflow run, by default in ``file:<output_dir>/mlruns``."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from lifelong.experiment.trackers.base import (
    RunInfo,
)


class MLflowTracker:
    """An MLflow run: params = the flattened config, metrics, artifacts, tags.

    The run goes into the experiment named after the group (a sweep's name), ``"lifelong"``
    without one, of ``tracking_uri`` (default: the file store ``file:<output_dir>/mlruns``; see
    the module docstring). Training statistics are sent in batches (one request per 50
    mini-batches and at every evaluation), so a remote server is not called per step.
    """

    package: ClassVar[str | None] = "mlflow"

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


TRACKER = MLflowTracker
"""This module's tracker (`lifelong.experiment.trackers.base.tracker_class`)."""
