"""One run end to end: stream, model and strategy from a config, training, the run directory.

`run` checks the config and the strategy's options before anything loads, creates the run
directory (`lifelong.experiment.rundir` says what it holds), builds the stream, the task kind,
the model and the strategy, trains, and writes the results. Each run is a row in the run index
(`lifelong.experiment.index`) and is checkpointed (`lifelong.experiment.checkpoint`), so that
`resume` can continue it if it is killed. Whatever stops a run is written to its ``log.txt``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lifelong.experiment.build import (
    BuiltRun,
    build_model,
    build_planned,
    build_run,
    cached_kind,
    name_embedder,
    run_encoder,
    seeded_stream,
)
from lifelong.experiment.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    Checkpointer,
    CheckpointError,
    load_checkpoint,
    remove_stale_temporaries,
    restore_random_states,
)
from lifelong.experiment.config import (
    ConfigError,
    RunConfig,
    RunPlan,
    load_run_config,
    plan_run,
)
from lifelong.experiment.index import RunIndex
from lifelong.experiment.lock import hold
from lifelong.experiment.rundir import (
    is_finished,
    path_part,
    read_metrics,
    read_result,
    write_results,
)
from lifelong.experiment.summary import POOLED_STREAMS, format_report
from lifelong.experiment.trackers import RunInfo, tracking
from lifelong.experiment.trust import (
    check_locations,
    check_stream,
    check_trained_as,
    record_given_stream,
    stream_fingerprint,
)
from lifelong.files import atomic_write_text
from lifelong.metrics import SEQUENTIAL_METRICS, summary

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import pandas as pd

    from lifelong.learner import StreamResult
    from lifelong.strategy import Strategy
    from lifelong.streams.core import TaskStream

log = logging.getLogger("lifelong")

NOT_ON_CONSOLE = {"console": False}
"""``extra`` of log records meant for the run's ``log.txt`` only (the CLI's console handler
drops them: the command prints its own one-line error)."""

__all__ = [
    "BuiltRun",
    "RunOutcome",
    "build_model",
    "build_run",
    "cached_kind",
    "name_embedder",
    "run_encoder",
    "format_report",
    "is_finished",
    "resume",
    "run",
]


@dataclass
class RunOutcome:
    """What `run` returns: the result, its metrics and where it was written.

    Attributes:
        result: The matrices (`StreamResult`; ``to_frame()`` for R as a table).
        metrics: What ``metrics.json`` holds.
        run_dir: The run directory (`lifelong.load_run` reads it back).
        stream: The stream's name (``text``, ``qa``, ``fewrel``).

    """

    result: StreamResult
    metrics: dict[str, Any]
    run_dir: Path
    stream: str = ""

    def to_frame(self, metric: str | None = None) -> pd.DataFrame:
        """The matrix as a table (`StreamResult.to_frame`)."""
        return self.result.to_frame(metric)

    def summary(self) -> str:
        """What ``lifelong run`` prints: the matrices and the metrics (`format_report`)."""
        return format_report(self.result, self.metrics, stream=self.stream)

    def __repr__(self) -> str:
        """One line: the tasks, the headline and where it was written."""
        key = "pooled_accuracy" if self.stream in POOLED_STREAMS else "average_accuracy"
        value = self.metrics.get(key)
        shown = "-" if value is None else f"{value:.1f}"
        return (
            f"RunOutcome({' -> '.join(self.result.task_names)}: {key.replace('_', ' ')} "
            f"{shown}; {self.run_dir}; .summary(), .to_frame())"
        )


def run(
    config: RunConfig, *, stream: TaskStream | None = None, run_dir: str | Path | None = None
) -> RunOutcome:
    """Run one configuration end to end and write its run directory.

    The config and the strategy's options are checked first (nothing has loaded yet, no
    directory exists); then the run is recorded in the run index (``tracking.run_index``,
    default ``<output_dir>/index.sqlite``) and checkpointed (see
    `lifelong.experiment.checkpoint`), so that `resume` can continue it if it is killed.

    A prebuilt ``stream`` is recorded as what it is: its order (or task list) and sizes
    replace the config's in the run's ``config.yaml`` (`trust.record_given_stream`), so that
    reports file the run under the order it ran, and its checkpoints hold the stream's digest,
    so that a resume continues on that stream or refuses.

    Args:
        config: The run configuration.
        stream: A prebuilt stream (otherwise built from ``config``).
        run_dir: The run directory to use (created if missing; sweeps name their runs);
            default: a new timestamped directory under ``config.tracking.output_dir``.

    Returns:
        The matrices, the metrics and the run directory.

    Raises:
        ConfigError: The encoder cannot load here, or the strategy or one of its options is
            unknown or not allowed; a given stream of another kind than the config's, or
            with tasks no config key can name.
        RunLockedError: Another live process is writing ``run_dir``.
        DivergenceError: A loss or score became nan or inf (the run is marked failed; its
            last checkpoint, taken before, is kept).

    """
    if stream is not None:
        config = record_given_stream(config, stream)
    plan = plan_run(config)  # checked, options parsed, records derived: nothing loaded yet
    RunIndex(plan.index_path)  # a broken index is refused before the run directory exists
    seeded = stream is None
    if seeded:  # a run refused for its data leaves no directory
        stream = seeded_stream(config.stream, config.encoder, config.training.seed)
    run_dir = _new_run_dir(plan) if run_dir is None else Path(run_dir)
    with hold(run_dir):  # one writer per run directory (RunLockedError names the holder)
        text = yaml.safe_dump(plan.sections, sort_keys=False)
        atomic_write_text(run_dir / "config.yaml", text)
        return _execute(_Job(plan, run_dir, stream, checkpoint=None, seeded=seeded))


def resume(
    run_dir: str | Path,
    *,
    stream: TaskStream | None = None,
    progress: bool | None = None,
    device: str | None = None,
    precision: str | None = None,
    compile: bool | None = None,
    checkpoint_every: int | None = None,
    keep_checkpoint: bool | None = None,
    output_dir: str | None = None,
    run_index: str | None = None,
    token_cache: str | None = None,
    tracking_uri: str | None = None,
) -> RunOutcome:
    """Continue a run from its directory: from its checkpoint, or from the start if none.

    A run that already finished (results written, no checkpoint left) is not run again: its
    results are read back and its index row is marked finished if a kill left it running.
    A changed checkpoint interval or ``keep_checkpoint`` (bookkeeping, `RESUME_BOOKKEEPING`)
    is written into the run's ``config.yaml``, so that later resumes keep it; device,
    precision and compile apply to this continuation only.

    The run directory is not trusted (`lifelong.experiment.trust`): a checkpoint whose run was
    trained under other keys than ``config.yaml`` now says, or on another stream, is refused;
    and ``config.yaml`` names no place to write far from the run (`trust.run_home`: the run
    index, output and token-cache folders, MLflow's store) unless the keywords below confirm
    it.

    Args:
        run_dir: A directory `run` created (it holds ``config.yaml``).
        stream: A prebuilt stream (otherwise built from the run's config).
        progress: Override the config's progress-bar setting.
        device: Continue on this device instead of the config's (checkpoints are
            device-neutral: a run checkpointed on CUDA resumes on the CPU and back).
        precision: Continue in this precision instead of the config's.
        compile: Continue with (or without) the compiled encoder.
        checkpoint_every: Checkpoint every N mini-batches from here on (0: task ends only),
            e.g. for a run that turned out to take hours.
        keep_checkpoint: Keep (or not) ``checkpoint.pt`` once the run has finished.
        output_dir: Confirm (or replace) the run's ``output_dir``.
        run_index: Confirm (or replace) the run index the run is recorded in.
        token_cache: Confirm (or replace) the token cache's folder (``auto``, ``off``, a path).
        tracking_uri: Confirm (or replace) MLflow's tracking URI.

    Raises:
        ConfigError: ``run_dir`` holds no run config, a value is not allowed, the checkpoint
            was trained as another config or on another stream, or ``config.yaml`` names a
            place far from the run (`trust.run_home`) that no keyword confirms.
        CheckpointError: The checkpoint is unreadable, or asks to run code.
        RunLockedError: Another live process is still writing ``run_dir`` (e.g. the run
            being resumed is paused, not dead).

    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no config.yaml)")
    changes = {"progress": progress, "device": device, "precision": precision, "compile": compile}
    changes |= {"checkpoint_every": checkpoint_every, "keep_checkpoint": keep_checkpoint}
    places = {
        "output_dir": output_dir,
        "run_index": run_index,
        "token_cache": token_cache,
        "tracking_uri": tracking_uri,
    }
    confirmed = {k: v for k, v in places.items() if v is not None}
    with hold(run_dir):
        given = {k: v for k, v in changes.items() if v is not None}
        return _resume_held(run_dir, stream, given, confirmed)


RESUME_BOOKKEEPING = ("checkpoint_every", "keep_checkpoint")
"""Run-config keys a resume may change and records in the run's ``config.yaml``.

Both are bookkeeping (in `lifelong.experiment.rundir.SAME_RUN_KEYS`): they change when a run
checkpoints, never what it computes, so the run stays the configuration it was.
"""


def _resume_held(
    run_dir: Path,
    stream: TaskStream | None,
    changes: dict[str, Any],
    confirmed: dict[str, Any],
) -> RunOutcome:
    stored = load_run_config(run_dir / "config.yaml")
    config = stored.replace("resume", **changes) if changes else stored
    config = check_locations(run_dir, config, confirmed)  # before anything is written
    has_checkpoint = (run_dir / CHECKPOINT_NAME).is_file()
    checkpoint = load_checkpoint(run_dir) if has_checkpoint else None
    notes: tuple[str, ...] = ()
    if checkpoint is not None and checkpoint.trained_as is not None:
        check_trained_as(checkpoint.trained_as, config, str(run_dir / CHECKPOINT_NAME))
    elif checkpoint is not None:
        notes = (
            "the checkpoint predates recording what it was trained as: config.yaml is "
            "taken as it is",
        )
    plan = plan_run(config)
    remove_stale_temporaries(run_dir)
    if not has_checkpoint and is_finished(run_dir):
        result, metrics = read_result(run_dir), read_metrics(run_dir)
        outcome = RunOutcome(result, metrics, run_dir, config.stream.name)
        index = RunIndex(plan.index_path)
        if (row := index.get(run_dir)) is None or row["status"] != "finished":
            index.start(run_dir, plan.record)
            index.finish(run_dir, outcome.metrics)
        return outcome
    notes += _record_bookkeeping(run_dir, stored, config)
    return _execute(_Job(plan, run_dir, stream, checkpoint, notes))


def _record_bookkeeping(run_dir: Path, stored: RunConfig, config: RunConfig) -> tuple[str, ...]:
    """Write ``config``'s `RESUME_BOOKKEEPING` into the run's ``config.yaml`` if they changed.

    Returns:
        The line to log once the run's ``log.txt`` is attached (none if nothing changed).

    """
    given, kept = config.to_dict(), stored.to_dict()
    if all(given[k] == kept[k] for k in RESUME_BOOKKEEPING):
        return ()
    recorded = stored.replace("resume", **{k: given[k] for k in RESUME_BOOKKEEPING})
    text = yaml.safe_dump(recorded.to_sections(), sort_keys=False)
    atomic_write_text(run_dir / "config.yaml", text)
    what = ", ".join(f"{k}={given[k]}" for k in RESUME_BOOKKEEPING)
    return (f"resumed with {what} (recorded in its config.yaml)",)


@dataclass
class _Job:
    """What one run (or resumed run) is made of."""

    plan: RunPlan  # the checked config and what the run reads of it
    run_dir: Path
    stream: TaskStream | None  # prebuilt, or None to build from the config
    checkpoint: Checkpoint | None  # where to resume from, if anywhere
    notes: tuple[str, ...] = ()  # lines for the run's log.txt, logged once it is attached
    seeded: bool = False  # stream built by `seeded_stream`, nothing drawn since


def _execute(job: _Job) -> RunOutcome:
    plan, run_dir = job.plan, job.run_dir
    index = RunIndex(plan.index_path)
    handler = _attach_log(run_dir / "log.txt")
    for note in job.notes:
        log.info("%s", note)
    index.start(run_dir, plan.record)
    try:
        outcome = _train(job)
        index.finish(run_dir, outcome.metrics)
        if not plan.config.training.keep_checkpoint:
            (run_dir / CHECKPOINT_NAME).unlink(missing_ok=True)
        log.info("run written to %s", run_dir)
        return outcome
    except Exception as err:
        # The console shows the command's one-line error; log.txt gets the line and the trace.
        log.error("run failed: %s: %s", type(err).__name__, err, extra=NOT_ON_CONSOLE)
        log.debug("traceback of the failure", exc_info=True)
        if (run_dir / CHECKPOINT_NAME).is_file():
            log.info("the last checkpoint, taken before the failure, is kept", extra=NOT_ON_CONSOLE)
        index.fail(run_dir, f"{type(err).__name__}: {err}")
        err.run_dir = run_dir  # type: ignore[attr-defined]  # where the CLI says the log is
        raise
    except BaseException as err:  # interrupted (Ctrl-C): the row stays "running", resumable
        what = type(err).__name__ if not str(err) else f"{type(err).__name__}: {err}"
        log.error("run interrupted (%s); `lifelong run --resume %s` continues it", what, run_dir)
        raise
    finally:
        for name in ("lifelong", "torch._dynamo"):
            logging.getLogger(name).removeHandler(handler)
        handler.close()


def _train(job: _Job) -> RunOutcome:
    from lifelong.learner import run_stream

    plan, checkpoint = job.plan, job.checkpoint
    training, tracked = plan.config.training, plan.config.tracking
    seed = training.seed
    built = build_planned(plan, stream=job.stream, seeded=job.seeded)
    stream, task, strategy, runtime = built.stream, built.kind, built.strategy, built.runtime
    digest = stream_fingerprint(stream)
    start = None
    if checkpoint is not None:
        where = str(job.run_dir / CHECKPOINT_NAME)
        if checkpoint.stream is not None:
            check_stream(checkpoint.stream, stream, where)
        _restore(strategy, checkpoint, where)
        start = checkpoint.position
        log.info("resumed at task %d, mini-batch %d", start.task, start.step)
    info = RunInfo(
        job.run_dir,
        plan.record,
        tracked.log_group,
        tracked.tracking_uri,
        tracked.wandb_mode,
        resumed_at=None if start is None else start.global_step(stream, training.batch_size),
        evaluations=0 if start is None else start.evaluations,
    )
    with tracking(tracked.loggers, info, stream.task_names) as trackers:
        checkpointer = Checkpointer(
            job.run_dir,
            training.checkpoint_every,
            seconds_before=0.0 if start is None else start.seconds,
            cpu_seconds_before=0.0 if start is None else start.cpu_seconds,
            trained_as=plan.trained_as,
            stream=digest,
        )
        eval_batch = runtime.eval_batch_size(training.eval_batch_size)
        result = run_stream(
            stream,
            strategy,
            task,
            batch_size=training.batch_size,
            eval_batch_size=eval_batch,
            seed=seed,
            progress=training.progress,
            checkpointer=checkpointer,
            start=start,
            runtime=runtime,
            prefetch=runtime.prefetch,
            listener=trackers,
            probe=_probe(training.probe, built, task, stream, eval_batch),
        )
        metrics = run_metrics(
            result,
            strategy,
            checkpointer.elapsed(),
            stream=stream,
            cpu_seconds=checkpointer.cpu_elapsed(),
        )
        if training.compile:
            _log_compilation()
        metrics["runtime"] = {
            "device": runtime.describe().split(",")[0],
            "precision": runtime.precision,
        }
        write_results(job.run_dir, plan.sections, result, metrics)
        if tracked.save_model:
            from lifelong.experiment.saved import save_model

            log.info("model kept in %s", save_model(job.run_dir, plan, built, result, metrics))
        if trackers is not None:
            trackers.finish(metrics, run_artifacts(job.run_dir))
    return RunOutcome(result, metrics, job.run_dir, plan.config.stream.name)


def _probe(
    wanted: bool, built: Any, kind: Any, stream: TaskStream, batch_size: int
) -> Callable[[int], np.ndarray] | None:
    """The run's linear probe (`lifelong.probing.LinearProbe.row`), or None without ``--probe``."""
    if not wanted:
        return None
    from lifelong.probing import LinearProbe

    return LinearProbe(built.model, kind, stream, batch_size=batch_size).row


def _restore(strategy: Strategy, checkpoint: Checkpoint, where: str) -> None:
    """Load a checkpoint's state into the built strategy, or refuse it in one line.

    A checkpoint that does not fit (another encoder's weights, another strategy's parts:
    one written before runs recorded what they were trained as) is a `CheckpointError`
    naming the file, not a page of ``load_state_dict`` output.
    """
    try:
        strategy.load_state_dict(checkpoint.strategy)
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError, AttributeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"{where}: does not fit this run's {type(strategy).__name__} and model ({first}); "
            "was the run's config.yaml edited? put it back, or start a new run"
        ) from None
    restore_random_states(checkpoint.rng)


def _log_compilation() -> None:
    """What torch.compile did: graphs, and the frames it tried and ran eager instead."""
    from lifelong.runtime import compile_report

    report = compile_report()
    log.info("torch.compile: %s", report)
    if report["failed"]:
        log.warning(
            "torch.compile fell back to eager for %d frame(s) of %d (see the torch._dynamo "
            "lines of this log)",
            report["failed"],
            report["frames"],
        )


def run_artifacts(run_dir: Path) -> list[Path]:
    """The files trackers keep: the matrices, ``metrics.json`` and the report plots.

    The plots (``plots/accuracy_matrix.png``, ``plots/task_curves.png``) are drawn here, from
    the run directory as written, by `lifelong.experiment.reports.plots`.
    """
    from lifelong.experiment.reports.plots import plot_accuracy_matrix, plot_task_curves
    from lifelong.experiment.rundir import load_run

    record = load_run(run_dir)
    plots = [
        plot_accuracy_matrix(record, run_dir / "plots" / "accuracy_matrix.png"),
        plot_task_curves(record, run_dir / "plots" / "task_curves.png"),
    ]
    return sorted(run_dir.glob("*.csv")) + [run_dir / "metrics.json", *plots]


def run_metrics(
    result: StreamResult,
    strategy: Strategy,
    seconds: float,
    *,
    stream: TaskStream | None = None,
    cpu_seconds: float | None = None,
) -> dict[str, Any]:
    """What ``metrics.json`` holds.

    The summary of R (null where undefined), the main metric pooled over all test sets, the
    metric's name, other metrics' final averages, the training time (wall ``seconds``, and
    ``cpu_seconds``, null when not counted), each task's size (its
    labels, e.g. a FewRel cluster's relations, and its train and test examples), and the
    strategy's report (its ``memory_examples`` and ``write_rate`` also at the top level,
    comparable across strategies). For a joint learner (``strategy.joint_training``: MTL) the
    sequential metrics (`SEQUENTIAL_METRICS`) are null and ``joint_training`` is true.
    """
    # pooled_accuracy: the main metric over all test sets as one (FewRel's headline)
    metrics: dict[str, Any] = summary(result.accuracy, result.before, result.test_sizes)
    if strategy.joint_training:  # MTL: no row is "after task j", so no transfer or forgetting
        metrics.update(dict.fromkeys(SEQUENTIAL_METRICS), joint_training=True)
    metrics["metric"] = result.metric  # what R holds: accuracy, or F1 for QA
    metrics["secondary_metrics"] = list(result.secondary)
    for name, rows in result.secondary.items():  # e.g. QA's final average exact match
        metrics[f"average_{name}"] = round(float(rows[-1].mean()), 4)
    if result.updates is not None:  # per task: a task too small for an update shows as 0
        metrics["updates"] = list(result.updates)
    metrics.update(cost_metrics(result, strategy))
    if result.probing is not None:  # --probe: representation forgetting beside the model's
        from lifelong.probing import probe_metrics

        metrics.update(probe_metrics(result.probing, metrics.get("forgetting")))
    metrics["seconds"] = round(seconds, 1)
    metrics["cpu_seconds"] = None if cpu_seconds is None else round(cpu_seconds, 1)
    if stream is not None:
        metrics["tasks"] = [
            {"name": t.name, "labels": len(t.labels), "train": len(t.train), "test": len(t.test)}
            for t in stream
        ]
    report = strategy.report()
    if report:  # strategy-specific end-of-run numbers: memory size, write rate, ...
        metrics["strategy"] = report
        log.info("strategy report: %s", metrics["strategy"])
        for key in ("memory_examples", "write_rate"):  # top level: comparable across strategies
            if key in metrics["strategy"]:
                metrics[key] = metrics["strategy"][key]
    return metrics


def cost_metrics(result: StreamResult, strategy: Strategy) -> dict[str, Any]:
    """What the run cost (`lifelong.cost`): ``cost`` per phase, ``total_flops``, ``memory_bytes``.

    ``memory_bytes`` (what the strategy holds beside its model at the end) is always measured;
    the counts and FLOPs are null for a run resumed from a checkpoint written before they were
    counted.
    """
    from lifelong.cost import held_bytes

    held = held_bytes(strategy)
    if result.cost is None:
        return {"cost": None, "total_flops": None, "memory_bytes": held}
    spent = {**result.cost, "memory_bytes": held, "source": "measured"}
    return {"cost": spent, "total_flops": spent["total_flops"], "memory_bytes": held}


def _new_run_dir(plan: RunPlan) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    config = plan.config
    base = (
        Path(config.tracking.output_dir)
        / f"{stamp}_{path_part(config.strategy.name)}_{config.stream.name}-{plan.label}"
        f"_s{config.training.seed}"
    )
    base.parent.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:  # mkdir, not exists(): two processes starting together get different names
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}_{n}")


def _attach_log(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)  # lifelong.streams' loggers included
    logging.getLogger("torch._dynamo").addHandler(handler)  # its warnings (a recompile limit)
    return handler
