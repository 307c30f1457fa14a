"""The ``csv`` tracker: plain CSV files in ``RUN/logs``, no extra package."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml

from lifelong.experiment.trackers.base import (
    RunInfo,
    _keep_rows,
)
from lifelong.files import atomic_write_text


class CSVTracker:
    """Plain CSV files in ``RUN/logs``: ``steps.csv``, ``scores.csv`` and ``final.csv``.

    ``steps.csv`` and ``scores.csv`` are long tables (one value a line: ``step,task,name,value``
    and ``trained,after,name,value``), appended line by line and flushed, so a running or killed
    run's records can be read; ``final.csv`` (``name,value``) is written atomically at the end.
    """

    package: ClassVar[str | None] = None

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


TRACKER = CSVTracker
"""This module's tracker (`lifelong.experiment.trackers.base.tracker_class`)."""
