"""Experiment trackers: TensorBoard, Weights & Biases, MLflow and CSV (``--logger``, repeatable).

One module per tracker (``csv.py``, ``tensorboard.py``, ``wandb.py``, ``mlflow.py``), each
defining ``TRACKER``: adding a tracker is adding a module; its name is the module's.

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

from lifelong.experiment.trackers.base import (
    IDS_FILE,
    LOGGERS,
    PACKAGE,
    RunInfo,
    Tracker,
    TrackerError,
    Trackers,
    TrackingOptions,
    check_loggers,
    check_tracking_uri,
    open_trackers,
    tracker_class,
    tracking,
)

__all__ = [
    "IDS_FILE",
    "LOGGERS",
    "PACKAGE",
    "RunInfo",
    "Tracker",
    "TrackerError",
    "Trackers",
    "TrackingOptions",
    "check_loggers",
    "check_tracking_uri",
    "open_trackers",
    "tracker_class",
    "tracking",
]
