"""The ``wandb`` tracker: a Weights & Biases run in ``RUN/wandb``, offline by default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from lifelong.experiment.trackers.base import (
    RunInfo,
)


class WandbTracker:
    """A Weights & Biases run in ``RUN/wandb``: offline unless ``wandb_mode: online``.

    An offline run needs no account or network; ``wandb sync RUN/wandb/offline-run-*`` uploads
    it later. ``train/*`` is plotted against ``train/step`` and ``eval/*`` against
    ``eval/trained`` (tasks trained), final numbers go to the run summary, the plots are logged
    as images and every artifact is saved with the run.
    """

    package: ClassVar[str | None] = "wandb"

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


TRACKER = WandbTracker
"""This module's tracker (`lifelong.experiment.trackers.base.tracker_class`)."""
