import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from lifelong import registry
from lifelong.experiment.checkpoint import (
    CHECKPOINT_NAME,
    Checkpointer,
    CheckpointError,
    StreamPosition,
    load_checkpoint,
)
from lifelong.experiment.cli import main
from lifelong.experiment.config import DEMO_CONFIG, load_run_config, load_yaml
from lifelong.experiment.index import RunIndex
from lifelong.experiment.runs import build_run, is_finished, resume, run
from lifelong.learner import run_stream
from tests.conftest import tiny_demo


class Crash(BaseException):
    """Stands in for a kill: not an Exception, so nothing marks the run failed."""


def small_config(tmp_path, strategy, **changes):
    options = load_yaml(DEMO_CONFIG).to_dict()["strategy_options"]
    for name, values in options.items():  # replay often enough to happen on 96 examples
        if "replay_every" in values:
            values["replay_every"] = 16
        if name.startswith("mbpa"):  # few, short adaptations: the test is about resuming
            values.update(k=4, steps=2)
    options["mtl"] = {"epochs": 1}
    options["ranpac"] = {"projection": 64}  # not 10,000: a test-sized ridge solve
    return tiny_demo(
        tmp_path, strategy=strategy, train_size=48, test_size=8, strategy_options=options, **changes
    )


def crash_at(monkeypatch, call):
    """Make the next built strategy raise Crash on its ``call``-th observe."""
    build = registry.build

    def crashing_build(*args, **kwargs):
        strategy = build(*args, **kwargs)
        observe, calls = strategy.observe, [0]

        def observe_or_crash(batch):
            calls[0] += 1
            if calls[0] == call:
                raise Crash
            return observe(batch)

        strategy.observe = observe_or_crash
        return strategy

    monkeypatch.setattr(registry, "build", crashing_build)


def accuracy(run_dir):
    return pd.read_csv(run_dir / "accuracy.csv", index_col="row")


@pytest.mark.parametrize("strategy", registry.available())
def test_resume_after_a_crash_mid_task_equals_the_uninterrupted_run(
    strategy, tmp_path, monkeypatch
):
    config = small_config(tmp_path, strategy, checkpoint_every=2)
    reference = run(config, run_dir=tmp_path / "reference")
    # 6 mini-batches per task: the crash comes at task 2's 4th batch; the last checkpoint was
    # taken after its 2nd, so the resumed run must redo batch 3 exactly as the first did.
    crash_at(monkeypatch, 10)
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    monkeypatch.undo()
    crashed = tmp_path / "crashed"
    assert not is_finished(crashed)
    position = load_checkpoint(crashed).position
    assert (position.task, position.step) == (1, 2)
    outcome = resume(crashed)
    np.testing.assert_array_equal(outcome.result.accuracy, reference.result.accuracy)
    pd.testing.assert_frame_equal(accuracy(crashed), accuracy(reference.run_dir))
    assert not (crashed / CHECKPOINT_NAME).exists()  # removed once finished
    rows = RunIndex(tmp_path / "index.sqlite").rows()
    assert [r["status"] for r in rows] == ["finished", "finished"]


def test_resume_with_a_new_checkpoint_interval_records_and_uses_it(tmp_path, monkeypatch):
    config = small_config(tmp_path, "replay")  # checkpoints at task ends only
    reference = run(config, run_dir=tmp_path / "reference")
    crash_at(monkeypatch, 10)  # task 2's 4th batch: the last checkpoint is task 1's end
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    crashed = tmp_path / "crashed"
    position = load_checkpoint(crashed).position
    assert (position.task, position.step) == (1, 0)
    crash_at(monkeypatch, 3)  # the resumed run's 3rd batch (task 2's 3rd)
    with pytest.raises(Crash):
        resume(crashed, checkpoint_every=2)
    monkeypatch.undo()
    position = load_checkpoint(crashed).position  # taken after task 2's 2nd batch: every 2
    assert (position.task, position.step) == (1, 2)
    stored = load_run_config(crashed / "config.yaml")
    assert stored.training.checkpoint_every == 2  # later resumes keep it
    assert stored.replace(checkpoint_every=0) == config.replace(run_index=stored.tracking.run_index)
    log_text = (crashed / "log.txt").read_text(encoding="utf-8")
    assert "resumed with checkpoint_every=2, keep_checkpoint=False" in log_text  # the run's own log
    outcome = resume(crashed)
    np.testing.assert_array_equal(outcome.result.accuracy, reference.result.accuracy)


def test_run_resume_takes_a_checkpoint_interval(tmp_path, monkeypatch):
    config = small_config(tmp_path, "seq")
    crash_at(monkeypatch, 10)
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    monkeypatch.undo()
    argv = ["run", "--resume", str(tmp_path / "crashed"), "--checkpoint-every", "3"]
    assert main([*argv, "--no-progress"]) == 0
    assert load_run_config(tmp_path / "crashed" / "config.yaml").training.checkpoint_every == 3
    assert is_finished(tmp_path / "crashed")


@pytest.mark.parametrize("strategy", ["seq", "mbpa++"])
def test_build_run_then_run_stream_trains_what_run_trains(tmp_path, strategy):
    config = small_config(tmp_path, strategy)
    outcome = run(config, run_dir=tmp_path / "run")
    built = build_run(config)
    assert built.strategy.name == strategy and len(built.stream) == 2
    result = run_stream(
        built.stream,
        built.strategy,
        built.kind,
        batch_size=config.training.batch_size,
        eval_batch_size=built.runtime.eval_batch_size(config.training.eval_batch_size),
        seed=config.training.seed,
        progress=False,
        runtime=built.runtime,
    )
    np.testing.assert_allclose(result.accuracy, outcome.result.accuracy)
    if strategy == "mbpa++":  # the trained strategy is there to read: every example written
        assert len(built.strategy.adapter.writer.memory) == 2 * 48


def test_a_finished_run_is_not_run_again_and_its_index_row_is_repaired(tmp_path):
    config = small_config(tmp_path, "seq")
    first = run(config, run_dir=tmp_path / "done")
    index = RunIndex(tmp_path / "index.sqlite")
    index.start(first.run_dir, config.to_dict())  # as if killed after writing its results
    again = resume(first.run_dir)
    np.testing.assert_array_equal(again.result.accuracy, first.result.accuracy)
    assert again.metrics == first.metrics
    assert index.get(first.run_dir)["status"] == "finished"


def test_failed_run_is_marked_failed_with_its_error(tmp_path, monkeypatch):
    config = small_config(tmp_path, "seq")
    build = registry.build

    def broken(*args, **kwargs):
        strategy = build(*args, **kwargs)
        strategy.observe = lambda batch: 1 / 0
        return strategy

    monkeypatch.setattr(registry, "build", broken)
    with pytest.raises(ZeroDivisionError):
        run(config, run_dir=tmp_path / "broken")
    (row,) = RunIndex(tmp_path / "index.sqlite").rows()
    assert row["status"] == "failed" and "ZeroDivisionError" in row["error"]


def test_checkpoint_errors_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path)
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=str(tmp_path / CHECKPOINT_NAME)):
        load_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="interval"):
        Checkpointer(tmp_path, every=-1)


def test_stream_position_round_trips():
    position = StreamPosition(2, 5, np.array([1.0, 2.0]), [np.array([3.0, 4.0])])
    again = StreamPosition.from_dict(position.to_dict())
    assert (again.task, again.step) == (2, 5)
    np.testing.assert_array_equal(again.before, position.before)
    np.testing.assert_array_equal(again.rows[0], position.rows[0])


def test_resume_refuses_other_run_flags(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path), "--seed", "3"]) == 2
    assert "--seed" in capsys.readouterr().err


# A real SIGKILL: a child process runs `lifelong run` and kills itself at a chosen point.
KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from lifelong import files, registry
    from lifelong.experiment.cli import main

    point, n = sys.argv[1], int(sys.argv[2])
    count = [0]

    def kill_on_nth():
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    if point == "observe":
        build = registry.build

        def killing_build(*args, **kwargs):
            strategy = build(*args, **kwargs)
            observe = strategy.observe

            def observe_then_maybe_die(batch):
                kill_on_nth()
                return observe(batch)

            strategy.observe = observe_then_maybe_die
            return strategy

        registry.build = killing_build
    else:  # die between writing a file's temporary copy and renaming it into place
        replace = os.replace

        def replace_or_die(src, dst):
            if os.path.basename(dst) == point:
                kill_on_nth()
            return replace(src, dst)

        files.os.replace = replace_or_die
    main(sys.argv[3:])
    """
)


@pytest.mark.parametrize(
    "point, n",
    [("observe", 5), ("observe", 9), ("checkpoint.pt", 4), ("metrics.json", 1)],
    ids=["mid-task-1", "mid-task-2", "writing-checkpoint", "writing-results"],
)
def test_sigkilled_run_resumes_to_the_uninterrupted_result(point, n, tmp_path):
    flags = [
        "run",
        "--encoder",
        "tiny",
        "--strategy",
        "replay",
        "--tasks",
        "ag_news,yelp",
        "--train-size",
        "48",
        "--test-size",
        "8",
        "--batch-size",
        "8",
        "--checkpoint-every",
        "2",
        "-o",
        "replay_every=16",
        "--no-progress",
    ]
    assert main([*flags, "--output-dir", str(tmp_path / "reference")]) == 0
    (reference,) = [p for p in (tmp_path / "reference").iterdir() if p.is_dir()]
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.run(
        [sys.executable, "-c", KILLER, point, str(n), *flags, "--output-dir", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    (killed,) = [p for p in out.iterdir() if p.is_dir()]
    assert not is_finished(killed)
    (row,) = RunIndex(out / "index.sqlite").rows()
    assert row["status"] == "running"  # a kill cannot mark anything; the row is whole
    assert main(["run", "--resume", str(killed), "--no-progress"]) == 0
    pd.testing.assert_frame_equal(accuracy(killed), accuracy(reference))
    (row,) = RunIndex(out / "index.sqlite").rows()
    assert row["status"] == "finished" and row["metrics"]["average_accuracy"] >= 0
    assert not list(killed.glob(".*.tmp")), "stale temporary files were left behind"
    assert sorted(p.name for p in killed.iterdir()) == [
        "accuracy.csv",
        "config.yaml",
        "log.txt",
        "metrics.json",
    ]


def test_qa_run_resumes_with_its_f1_and_exact_match_matrices(tmp_path, monkeypatch):
    config = small_config(tmp_path, "mbpa++").replace(
        stream="qa", tasks=["squad", "quac"], train_size=16, batch_size=4, checkpoint_every=2
    )
    reference = run(config, run_dir=tmp_path / "reference")
    crash_at(monkeypatch, 7)  # task 2's 3rd batch; last checkpoint after its 2nd
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "crashed").position.metric == "f1"
    outcome = resume(tmp_path / "crashed")
    assert outcome.result.metric == "f1" and set(outcome.result.secondary) == {"exact_match"}
    for name in ("accuracy.csv", "exact_match.csv"):
        pd.testing.assert_frame_equal(
            pd.read_csv(tmp_path / "crashed" / name, index_col="row"),
            pd.read_csv(reference.run_dir / name, index_col="row"),
        )
