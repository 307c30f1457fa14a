"""How runs fail: loudly, once, with the run directory left resumable (guide: Failure behaviour).

One test (or more) per defect of the reliability issue; the numbers are the issue's.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lifelong.experiment.checkpoint import (
    CHECKPOINT_NAME,
    Checkpointer,
    load_checkpoint,
    save_checkpoint,
)
from lifelong.experiment.cli import EXIT_BUSY, EXIT_DIVERGED, EXIT_INTERRUPTED, main
from lifelong.experiment.index import RunIndex
from lifelong.experiment.lock import LOCK_NAME, RunLockedError, hold, holder
from lifelong.learner import DivergenceError, StreamPosition

REPO = Path(__file__).resolve().parents[3]
TINY = ["run", "--encoder", "tiny", "--no-progress", "--tasks", "ag_news,yelp"]
SMALL = [*TINY, "--train-size", "40", "--test-size", "20", "--batch-size", "8"]


def not_info(err):
    """The console's lines other than progress (INFO) lines."""
    return [line for line in err.splitlines() if line and not line.startswith("INFO ")]


def only_run_dir(out):
    (run_dir,) = [p for p in Path(out).iterdir() if p.is_dir() and p.name != "mlruns"]
    return run_dir


# --- 2. a diverged run fails, is marked failed, keeps its last good checkpoint -------------


def test_a_diverged_run_fails_naming_task_and_step(tmp_path, capsys):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    out = tmp_path / "runs"
    args = [*SMALL, "--lr", "1e6", "--output-dir", str(out), "--logger", "csv"]
    assert main([*args, "--logger", "mlflow"]) == EXIT_DIVERGED
    err = capsys.readouterr().err
    assert "training diverged: non-finite loss = nan at task 1/2 (ag_news), mini-batch" in err
    assert "Traceback" not in err and len(not_info(err)) == 1  # one line on the console
    run_dir = only_run_dir(out)
    (row,) = RunIndex(out / "index.sqlite").rows()
    assert row["status"] == "failed" and "DivergenceError" in row["error"]
    assert not (run_dir / "metrics.json").exists()
    kept = load_checkpoint(run_dir)  # the last good state: finite weights
    assert all(torch.isfinite(v).all() for v in kept.strategy["trainer"]["model"].values())
    assert "Traceback" in (run_dir / "log.txt").read_text()  # the trace is in the log
    steps = list(csv.DictReader((run_dir / "logs" / "steps.csv").open()))
    assert steps[-1]["value"] == "nan"  # recorded as nan, not dropped
    client = MlflowClient(tracking_uri=(out / "mlruns").as_uri())
    (tracked,) = client.search_runs([client.get_experiment_by_name("lifelong").experiment_id])
    assert tracked.info.status == "FAILED"
    losses = [m.value for m in client.get_metric_history(tracked.info.run_id, "train/loss")]
    assert np.isnan(losses[-1])


def test_diverged_local_adaptation_fails_the_evaluation(tmp_path, capsys):
    args = [*SMALL, "--strategy", "mbpa++", "-o", "adapt_lr=1e30", "-o", "k=2", "-o", "steps=2"]
    assert main([*args, "--output-dir", str(tmp_path)]) == EXIT_DIVERGED
    assert "scores are not finite" in capsys.readouterr().err


def test_a_checkpoint_of_non_finite_weights_is_refused(tmp_path):
    class Strategy:
        def state_dict(self):
            return {"trainer": {"model": {"w": torch.tensor([1.0, float("nan")])}}}

    with pytest.raises(DivergenceError, match=r"state.trainer.model.w holds non-finite"):
        save_checkpoint(tmp_path, Strategy(), StreamPosition(task=1, step=3))
    assert not (tmp_path / CHECKPOINT_NAME).exists()


# --- 5. one writer per run directory ---------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    from lifelong.experiment.lock import hold
    with hold(sys.argv[1]):
        print("held", flush=True)
        time.sleep(600)
    """
)


def test_a_held_run_directory_refuses_a_second_writer_until_its_holder_dies(tmp_path, capsys):
    assert main([*SMALL, "--output-dir", str(tmp_path), "--checkpoint-every", "1"]) == 0
    run_dir = only_run_dir(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout.readline().strip() == "held"
        assert holder(run_dir).startswith(f"{child.pid} on ")
        assert main(["run", "--resume", str(run_dir)]) == EXIT_BUSY
        assert f"in use by process {child.pid} on" in capsys.readouterr().err
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (run_dir / LOCK_NAME).exists()  # a kill leaves the file, not the lock
    assert holder(run_dir) is None
    assert main(["run", "--resume", str(run_dir), "--no-progress"]) == 0
    assert not (run_dir / LOCK_NAME).exists()


def test_a_paused_run_is_not_resumed_under_it(tmp_path, capsys):
    """The issue's case: a SIGSTOPped `lifelong run`, then `--resume` of its directory."""
    out = tmp_path / "runs"
    child = subprocess.Popen(
        [sys.executable, "-m", "lifelong.experiment.cli", *SMALL, "--train-size", "200"]
        + ["--checkpoint-every", "1", "--output-dir", str(out)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while not list(out.glob(f"*/{CHECKPOINT_NAME}")):
            assert time.time() < deadline and child.poll() is None
            time.sleep(0.2)
        child.send_signal(signal.SIGSTOP)
        run_dir = only_run_dir(out)
        assert main(["run", "--resume", str(run_dir)]) == EXIT_BUSY
        assert f"in use by process {child.pid}" in capsys.readouterr().err
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert main(["run", "--resume", str(run_dir), "--no-progress"]) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_holds_are_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    with hold(tmp_path), hold(tmp_path):
        assert holder(tmp_path) == f"{os.getpid()} on {os.uname().nodename}"
        code = "import sys, lifelong.experiment.lock as k; k.hold(sys.argv[1]).__enter__()"
        other = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert other.returncode != 0 and "RunLockedError" in other.stderr
    assert holder(tmp_path) is None and not (tmp_path / LOCK_NAME).exists()


def test_a_sweep_point_held_elsewhere_is_busy_not_run_twice(tmp_path):
    from lifelong.experiment.sweep import run_point

    point = tmp_path / "seq_i_s0"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(point)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout.readline().strip() == "held"
        result = run_point({"encoder": "tiny"}, str(point))
    finally:
        child.kill()
        child.wait()
    assert result.status == "busy" and str(child.pid) in result.error
    assert not (point / "config.yaml").exists()


def test_run_locked_error_names_the_holder(tmp_path):
    err = RunLockedError(tmp_path, "123 on host")
    assert "in use by process 123 on host" in str(err) and err.run_dir == tmp_path


# --- 8. smaller ones -------------------------------------------------------------------------


def test_runs_zero_is_refused_as_what_it_is(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--stream", "fewrel", "--runs", "0"])
    assert "--runs: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_runs_on_a_text_stream_says_it_needs_fewrel(tmp_path, capsys):
    assert main([*SMALL, "--runs", "2", "--output-dir", str(tmp_path)]) == 2
    assert "needs --stream fewrel (this run's stream is 'text'," in capsys.readouterr().err


def test_a_resumed_run_counts_every_segments_seconds_and_logs_each_step_once(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from test_checkpoint import Crash, crash_at, small_config

    from lifelong import learner
    from lifelong.experiment.runs import resume, run

    config = small_config(tmp_path, "seq", checkpoint_every=2, loggers=["csv"])
    crash_at(monkeypatch, 10)  # task 2's 4th mini-batch; the last checkpoint after its 2nd
    # each evaluation takes 1 s more, so the crashed segment (two of them) takes 2 s at least
    monkeypatch.setattr(learner, "_all_metrics", _slowed(learner._all_metrics))  # run_stream's
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    before = load_checkpoint(tmp_path / "crashed").position.seconds
    assert before >= 2.0
    monkeypatch.undo()
    outcome = resume(tmp_path / "crashed")
    assert outcome.metrics["seconds"] >= before  # the crashed segment's seconds count
    steps = list(csv.DictReader((tmp_path / "crashed" / "logs" / "steps.csv").open()))
    logged = [int(r["step"]) for r in steps if r["name"] == "train/loss"]
    assert logged == list(range(12))  # 6 mini-batches a task, each once (8, 9 were redone)
    scores = list(csv.DictReader((tmp_path / "crashed" / "logs" / "scores.csv").open()))
    trained = [int(r["trained"]) for r in scores if r["name"] == "eval/accuracy/average"]
    assert trained == [0, 1, 2]
    metrics = json.loads((tmp_path / "crashed" / "metrics.json").read_text())
    assert metrics["seconds"] == outcome.metrics["seconds"]


def _slowed(evaluate):
    def slowed(*args, **kwargs):
        time.sleep(1.0)
        return evaluate(*args, **kwargs)

    return slowed


def test_a_resumed_run_counts_every_segments_cpu_seconds(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from test_checkpoint import Crash, crash_at, small_config

    from lifelong import learner
    from lifelong.experiment.runs import resume, run

    config = small_config(tmp_path, "seq", checkpoint_every=2)
    crash_at(monkeypatch, 10)
    # each evaluation burns 0.5 CPU seconds more, so the crashed segment burns 1 s at least
    monkeypatch.setattr(learner, "_all_metrics", _busy(learner._all_metrics))
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    before = load_checkpoint(tmp_path / "crashed").position.cpu_seconds
    assert before is not None and before >= 1.0
    monkeypatch.undo()
    outcome = resume(tmp_path / "crashed")
    assert outcome.metrics["cpu_seconds"] >= before  # the crashed segment's CPU seconds count
    metrics = json.loads((tmp_path / "crashed" / "metrics.json").read_text())
    assert metrics["cpu_seconds"] == outcome.metrics["cpu_seconds"]


def test_cpu_seconds_are_unknown_after_a_checkpoint_that_did_not_count_them(tmp_path):
    stored = StreamPosition(task=1, seconds=30.0).to_dict()
    del stored["cpu_seconds"]  # a checkpoint written before CPU seconds were counted
    position = StreamPosition.from_dict(stored)
    assert position.seconds == 30.0 and position.cpu_seconds is None
    checkpointer = Checkpointer(tmp_path, seconds_before=30.0, cpu_seconds_before=None)
    assert checkpointer.elapsed() >= 30.0
    assert checkpointer.cpu_elapsed() is None  # not a part-count passed off as the run's


def _busy(evaluate):
    def busy(*args, **kwargs):
        until = time.process_time() + 0.5
        while time.process_time() < until:
            pass
        return evaluate(*args, **kwargs)

    return busy


def test_a_data_error_is_one_line_and_leaves_no_run_directory(tmp_path, capfd):
    """Friction 10: a bad data file left a failed run directory behind, unlike a bad flag."""
    data = tmp_path / "data" / "ag_news_csv"
    data.mkdir(parents=True)
    (data / "train.csv").write_text('"1","a","b"\n"9","c","d"\n')
    (data / "test.csv").write_text('"1","a","b"\n')
    out = tmp_path / "runs"
    args = [*TINY, "--tasks", "ag_news", "--data-dir", str(tmp_path / "data")]
    assert main([*args, "--train-size", "1", "--output-dir", str(out)]) == 2
    err = capfd.readouterr().err
    assert "train.csv:2: label 9 is out of range 1..4" in err
    assert "Traceback" not in err
    (line,) = not_info(err)
    assert line.startswith("lifelong run: error:")
    assert not [p for p in out.iterdir() if p.is_dir()]  # the stream is read before the run dir


CTRL_C = textwrap.dedent(
    """
    import signal, sys, os
    from lifelong import registry
    from lifelong.experiment.cli import main

    # as in a terminal: a suite started in the background (`cmd &` in a script) passes SIGINT
    # down ignored, and the interrupt below would then do nothing
    signal.signal(signal.SIGINT, signal.default_int_handler)
    build = registry.build

    def interrupting_build(*args, **kwargs):
        strategy = build(*args, **kwargs)
        observe = strategy.observe

        def observe_then_interrupt(batch):
            os.kill(os.getpid(), signal.SIGINT)
            return observe(batch)

        strategy.observe = observe_then_interrupt
        return strategy

    registry.build = interrupting_build
    sys.exit(main(sys.argv[1:]))
    """
)


def test_ctrl_c_prints_the_resume_hint_without_a_traceback(tmp_path):
    child = subprocess.run(
        [sys.executable, "-c", CTRL_C, *SMALL, "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert child.returncode == EXIT_INTERRUPTED
    assert "lifelong run --resume" in child.stderr and "interrupted" in child.stderr
    assert "Traceback" not in child.stderr
    (row,) = RunIndex(tmp_path / "index.sqlite").rows()
    assert row["status"] == "running"  # resumable


# --- 4. --max-length within the encoder's positions, said before anything loads -------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--encoder", "minilm", "--max-length", "600"], "'minilm''s limit of 512 positions"),
        (["--encoder", "tiny", "--max-length", "513"], "'tiny''s limit of 512 positions"),
        (
            ["--encoder", "memoria-tiny", "--max-length", "4096", "--segment-length", "1024"],
            "1024 tokens per segment is above the 512 positions",
        ),
    ],
)
def test_max_length_above_the_encoders_positions_is_refused_up_front(
    args, message, tmp_path, capsys
):
    code = main(["run", "--no-progress", "--output-dir", str(tmp_path), *args])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # before anything: no run directory


def test_a_local_models_limit_is_read_from_its_config(tmp_path):
    from lifelong.encoders.names import position_limit

    model = tmp_path / "roberta"
    model.mkdir()
    config = {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}
    (model / "config.json").write_text(json.dumps(config))
    assert position_limit(str(model)) == 512
    assert position_limit("minilm") == 512 and position_limit("memoria-minilm") is None


def test_a_long_memory_encoder_input_is_allowed(tmp_path):
    from lifelong.experiment.config import from_dict, preflight

    config = from_dict({"encoder": "memoria-tiny", "max_length": 2048, "segment_length": 256})
    preflight(config)  # segments of 256 within the BERT's 512 positions


# --- 7. OS and environment errors ------------------------------------------------------------


def test_a_file_as_output_dir_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "out").write_text("a file")
    assert main([*SMALL, "--output-dir", str(tmp_path / "out")]) == 2
    assert f"key 'output_dir': {tmp_path / 'out'} is a file" in capsys.readouterr().err
    assert main([*SMALL, "--output-dir", str(tmp_path / "out" / "runs")]) == 2
    assert "cannot write in" in capsys.readouterr().err


def test_an_unwritable_output_dir_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")  # as on a read-only mount

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    assert main([*SMALL, "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "key 'output_dir': cannot write in" in err and "Permission denied" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_output_dir_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o555)
    try:
        assert main([*SMALL, "--output-dir", str(out)]) == 2
        assert "cannot write in" in capsys.readouterr().err
    finally:
        out.chmod(0o755)


def test_an_os_error_inside_a_run_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    from lifelong.experiment import rundir

    def disk_full(path, text, **kwargs):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(rundir, "atomic_write_text", disk_full)
    assert main([*SMALL, "--output-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    (line,) = not_info(err)
    assert "config.yaml: No space left on device (run marked failed; details in" in line


def test_hf_source_offline_without_a_data_dir_is_refused_up_front(tmp_path, capsys, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main([*SMALL, "--data-source", "hf", "--output-dir", str(tmp_path)]) == 2
    assert "forbids; pass --data-dir DIR" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_an_unreachable_tracking_server_fails_fast(tmp_path, capsys):
    pytest.importorskip("mlflow")
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    began = time.perf_counter()
    args = [*SMALL, "--logger", "mlflow", "--tracking-uri", f"http://127.0.0.1:{port}"]
    assert main([*args, "--output-dir", str(tmp_path)]) == 2
    assert time.perf_counter() - began < 30  # MLflow alone retried for about 4 minutes
    assert f"key 'tracking_uri': http://127.0.0.1:{port}: no tracking server answers" in (
        capsys.readouterr().err
    )
    assert not list(tmp_path.iterdir())


# --- 8. config, tasks, YAML, segment length, metrics block ---------------------------------


def test_an_empty_config_file_is_an_error(tmp_path, capsys):
    (tmp_path / "empty.yaml").write_text("# nothing here\n")
    assert main(["run", "--config", str(tmp_path / "empty.yaml")]) == 2
    assert "empty.yaml: the config file is empty" in capsys.readouterr().err


def test_tasks_empty_is_an_error_not_all_five(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([*TINY[:-1], "", "--output-dir", str(tmp_path)])
    assert "argument --tasks: expected a value, got an empty string" in capsys.readouterr().err
    assert main([*TINY[:-1], " , ", "--output-dir", str(tmp_path)]) == 2
    assert "key 'tasks': ' , ' names no dataset" in capsys.readouterr().err


def test_a_yaml_key_given_twice_is_an_error_naming_both_lines(tmp_path, capsys):
    (tmp_path / "twice.yaml").write_text("encoder: tiny\nlr: 0.1\nseed: 1\nlr: 0.2\n")
    assert main(["run", "--config", str(tmp_path / "twice.yaml")]) == 2
    err = capsys.readouterr().err
    assert "twice.yaml:4:1: invalid YAML: key 'lr' is given twice (lines 2 and 4)" in err


def test_segment_length_with_a_plain_encoder_is_an_error(tmp_path, capsys):
    args = [*SMALL, "--segment-length", "32", "--output-dir", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "key 'segment_length': applies to the memory-augmented encoders only" in err


def test_document_passes_with_a_plain_encoder_is_an_error(tmp_path, capsys):
    args = [*SMALL, "--document-passes", "1", "--output-dir", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "key 'document_passes': applies to the memory-augmented encoders only" in err


def test_zero_document_passes_is_an_error_naming_the_key(tmp_path, capsys):
    args = [*TINY, "--encoder", "ernie-doc", "--document-passes", "0"]
    assert main([*args, "--output-dir", str(tmp_path)]) == 2
    assert "document_passes" in capsys.readouterr().err


def test_an_older_runs_saved_segment_length_still_resumes(tmp_path):
    import yaml

    from lifelong.experiment.config import load_run_config

    saved = {"encoder": "minilm", "segment_length": 64, "lr": 0.001}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    assert load_run_config(tmp_path / "config.yaml").encoder.segment_length is None


def test_the_metrics_block_prints_counts_as_counts():
    from lifelong.experiment.runs import format_report
    from lifelong.learner import StreamResult

    result = StreamResult(("a", "b"), np.array([[50.0, 0.0], [40.0, 60.0]]), np.zeros(2))
    metrics = {"pooled_accuracy": 50.0, "average_accuracy": 50.0, "bwt": -10.0, "fwt": 0.0}
    metrics.update(forgetting=10.0, strategy={"memory_examples": 2500, "write_rate": 0.01234})
    text = format_report(result, metrics)
    assert "memory_examples     2500" in text and "e+03" not in text
    assert "write_rate       0.01234" in text


def test_a_task_that_moved_no_score_is_said_so_and_pooled_is_fewrels_only():
    """Friction 8: an OML-ER FewRel run printed identical rows with nothing saying why;
    "pooled accuracy" was printed on every stream."""
    from lifelong.experiment.runs import format_report
    from lifelong.learner import StreamResult

    rows = np.array([[50.0, 10.0, 0.0], [50.0, 10.0, 0.0], [40.0, 30.0, 70.0]])
    before = np.array([5.0, 10.0, 0.0])
    result = StreamResult(("c4", "c9", "c2"), rows, before, updates=(3, 0, 2))
    metrics = {"pooled_accuracy": 47.0, "average_accuracy": 46.7, "bwt": -5.0, "fwt": 1.0}
    metrics["forgetting"] = 5.0
    text = format_report(result, metrics, stream="fewrel")
    assert "(c9 caused no update: every score is as before)" in text
    assert "c4 caused" not in text and "c2 caused" not in text
    uncounted = StreamResult(("c4", "c9", "c2"), rows, before)  # a run that did not count
    assert "(after c9, every score is as in the row before)" in format_report(uncounted, metrics)
    assert "pooled accuracy     47.0" in text
    assert "pooled accuracy" not in format_report(result, metrics, stream="text")
    f1 = StreamResult(("squad",), np.array([[61.0]]), np.zeros(1), metric="f1")
    qa = format_report(f1, {**metrics, "bwt": None, "fwt": None, "forgetting": None}, stream="qa")
    assert "average F1" in qa and "(from the F1 matrix)" in qa
