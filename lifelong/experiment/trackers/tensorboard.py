"""The ``tensorboard`` tracker: event files in ``RUN/tensorboard`` (extra ``tensorboard``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import yaml

from lifelong.experiment.trackers.base import (
    RunInfo,
    _as_code,
)


class TensorBoardTracker:
    """TensorBoard event files in ``RUN/tensorboard`` (``tensorboard --logdir RUN/..``).

    Scalars as in the module docstring, the config as text (YAML), the plots as images; a sweep's
    runs sit side by side under its folder, so ``--logdir <sweep folder>`` shows them together.
    """

    package: ClassVar[str | None] = "tensorboard"

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


TRACKER = TensorBoardTracker
"""This module's tracker (`lifelong.experiment.trackers.base.tracker_class`)."""
