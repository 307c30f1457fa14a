"""Experiment trackers: one run with all four loggers, each one's records read back."""

import csv
import glob
import json
import struct
from pathlib import Path

import pytest
import yaml

from lifelong.experiment.cli import main
from lifelong.experiment.config import ConfigError, from_dict
from lifelong.experiment.trackers import TrackerError, Trackers, check_loggers

TASKS = ("ag_news", "yelp")


def _read_wandb(path):
    """The records of an offline W&B run file (LevelDB-log framing of protobuf records).

    wandb 0.31 no longer ships a reader (its core is a Go binary), so this reads the format:
    a 7-byte header, then 32 KiB blocks of chunks ``crc32 (4) | length (2) | type (1) | data``
    (type 1 = a whole record, 2/3/4 = its first/middle/last part).
    """
    from wandb.proto import wandb_internal_pb2 as pb

    raw = open(path, "rb").read()
    assert raw[:4] == b":W&B"
    block, pos, parts, records = 32768, 7, b"", []
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        parts += raw[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(parts)
            records.append(record)
            parts = b""
    return records


def _key(item):
    return item.key or "/".join(item.nested_key)  # "a/b" keys may come split


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    out = tmp_path_factory.mktemp("tracked")
    args = ["run", "--encoder", "tiny", "--no-progress", "--strategy", "replay"]
    args += ["--tasks", ",".join(TASKS), "--train-size", "16", "--test-size", "8"]
    args += ["--batch-size", "4", "-o", "replay_every=2", "--output-dir", str(out)]
    for name in ("tensorboard", "mlflow", "wandb", "csv"):
        args += ["--logger", name]
    assert main(args) == 0
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and p.name != "mlruns"]
    return run_dir


def test_csv_logger_writes_steps_scores_and_final(tracked_run):
    logs = tracked_run / "logs"
    steps = list(csv.DictReader((logs / "steps.csv").open()))
    assert {r["name"] for r in steps} >= {"train/loss"}
    assert [int(r["step"]) for r in steps if r["name"] == "train/loss"] == list(range(8))
    assert {r["task"] for r in steps} == set(TASKS)
    scores = list(csv.DictReader((logs / "scores.csv").open()))
    assert sorted({int(r["trained"]) for r in scores}) == [0, 1, 2]
    final = {r["name"]: float(r["value"]) for r in csv.DictReader((logs / "final.csv").open())}
    metrics = json.loads((tracked_run / "metrics.json").read_text())
    assert final["final/average_accuracy"] == pytest.approx(metrics["average_accuracy"])
    last = {r["name"]: float(r["value"]) for r in scores if r["trained"] == "2"}
    assert last["eval/accuracy/average"] == pytest.approx(metrics["average_accuracy"], abs=1e-3)


def test_tensorboard_event_files_hold_scalars_text_and_plots(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tracked_run / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    tags = events.Tags()
    assert len(events.Scalars("train/loss")) == 8
    evals = events.Scalars("eval/accuracy/ag_news")
    assert [e.step for e in evals] == [0, 1, 2]
    metrics = json.loads((tracked_run / "metrics.json").read_text())
    (final,) = events.Scalars("final/average_accuracy")
    assert final.value == pytest.approx(metrics["average_accuracy"], abs=1e-4)
    assert {"plots/accuracy_matrix", "plots/task_curves"} <= set(tags["images"])
    assert any(t.startswith("config") for t in tags["tensors"])


def test_mlflow_store_holds_params_metrics_and_artifacts(tracked_run):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(tracked_run.parent / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("lifelong")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == tracked_run.name
    assert run.data.params["strategy"] == "replay"
    assert run.data.params["strategy_options.replay.replay_every"] == "2"
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert sorted(m.step for m in history) == list(range(8))
    metrics = json.loads((tracked_run / "metrics.json").read_text())
    assert run.data.metrics["final/average_accuracy"] == pytest.approx(metrics["average_accuracy"])
    plots = [f.path for f in client.list_artifacts(run.info.run_id, "plots")]
    assert sorted(plots) == ["plots/accuracy_matrix.png", "plots/task_curves.png"]
    results = [f.path for f in client.list_artifacts(run.info.run_id, "results")]
    assert "results/accuracy.csv" in results and "results/metrics.json" in results


def test_wandb_offline_run_holds_config_history_and_summary(tracked_run):
    (path,) = glob.glob(str(tracked_run / "wandb" / "offline-run-*" / "run-*.wandb"))
    records = _read_wandb(path)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.display_name == tracked_run.name
    config = {i.key: json.loads(i.value_json) for i in run.config.update}
    assert config["strategy"] == "replay" and config["strategy_options"]["replay"]["replay_every"]
    history = [
        {_key(i): json.loads(i.value_json) for i in r.history.item}
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    losses = [h for h in history if "train/loss" in h]
    assert [h["train/step"] for h in losses] == list(range(8))
    evals = [h for h in history if "eval/accuracy/yelp" in h]
    assert [h["eval/trained"] for h in evals] == [0, 1, 2]
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update({_key(i): json.loads(i.value_json) for i in r.summary.update})
    metrics = json.loads((tracked_run / "metrics.json").read_text())
    assert summary["final/average_accuracy"] == pytest.approx(metrics["average_accuracy"])
    files = Path(path).parent / "files"
    assert (files / "plots" / "accuracy_matrix.png").is_file()
    assert (files / "accuracy.csv").is_file() and (files / "metrics.json").is_file()
    ids = json.loads((tracked_run / "trackers.json").read_text())
    assert ids["wandb"] == run.run_id and ids["mlflow"]


def test_unknown_or_repeated_logger_is_a_config_error():
    with pytest.raises(ConfigError, match=r"key 'loggers': unknown logger 'neptune'"):
        from_dict({"loggers": ["neptune"]})
    with pytest.raises(ConfigError, match="listed twice"):
        from_dict({"loggers": "csv,csv"})


def test_missing_tracker_package_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(TrackerError, match=r"pip install 'lifelong\[wandb\]'"):
        check_loggers(["csv", "wandb"])


def test_sweep_points_share_their_sweep_as_tracker_group(tmp_path):
    from lifelong.experiment.sweep import sweep_from_dict

    sweep = sweep_from_dict(
        {
            "name": "grid",
            "run": {"loggers": ["csv"], "output_dir": str(tmp_path)},
            "strategies": ["seq", "replay"],
        }
    )
    assert {p.config.tracking.log_group for p in sweep.points()} == {"grid"}
    assert yaml.safe_load(yaml.safe_dump(sweep.points()[0].config.to_dict()))["loggers"] == ["csv"]


def test_average_score_is_over_the_tasks_trained_so_far():
    import numpy as np

    seen = []

    class Sink:
        def log_scores(self, index, after, scores):
            seen.append((index, after, scores))

    trackers = Trackers([Sink()], ("a", "b"))
    trackers.on_evaluation(0, {"accuracy": np.array([10.0, 30.0])})
    trackers.on_evaluation(1, {"accuracy": np.array([50.0, 20.0])})
    assert seen[0][1] == "before" and seen[0][2]["eval/accuracy/average"] == 20.0
    assert seen[1][1] == "a" and seen[1][2]["eval/accuracy/average"] == 50.0


def test_a_resumed_run_continues_its_mlflow_run(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from lifelong.experiment.runs import resume, run

    sys_path = str(Path(__file__).parent)
    monkeypatch.syspath_prepend(sys_path)
    from test_checkpoint import Crash, crash_at, small_config

    config = small_config(tmp_path, "seq", checkpoint_every=2, loggers=["mlflow", "csv"])
    crash_at(monkeypatch, 10)  # task 2's 4th mini-batch; the last checkpoint after its 2nd
    with pytest.raises(Crash):
        run(config, run_dir=tmp_path / "crashed")
    monkeypatch.undo()
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    (first,) = client.search_runs([client.get_experiment_by_name("lifelong").experiment_id])
    assert first.info.status == "KILLED"
    resume(tmp_path / "crashed")
    (again,) = client.search_runs([client.get_experiment_by_name("lifelong").experiment_id])
    assert again.info.run_id == first.info.run_id and again.info.status == "FINISHED"
    steps = {m.step for m in client.get_metric_history(again.info.run_id, "train/loss")}
    assert steps == set(range(12))  # 6 mini-batches a task; 8 and 9 logged twice, same steps
    scores = list(csv.DictReader((tmp_path / "crashed" / "logs" / "scores.csv").open()))
    assert sorted({int(r["trained"]) for r in scores}) == [0, 1, 2]


def test_report_skips_the_mlflow_store_beside_the_runs(tracked_run, capsys):
    """Failure 1: `lifelong report` took mlruns/.../artifacts/results/ for a run directory."""
    out = tracked_run.parent
    assert list(out.glob("mlruns/*/*/artifacts/results/metrics.json"))  # the copies are there
    assert main(["report", str(out), "--no-plots", "--out", str(out / "report")]) == 0
    printed = capsys.readouterr().out
    assert "replay" in printed and "mlruns" not in printed


def test_a_tracker_is_one_module_and_its_name_is_the_module_s():
    """Adding a tracker is adding lifelong/experiment/trackers/<name>.py defining TRACKER: the
    names --logger accepts (and the config's type) are read from the package's modules."""
    import pkgutil
    import typing

    from lifelong.experiment import trackers
    from lifelong.experiment.config import config_keys

    modules = sorted(m.name for m in pkgutil.iter_modules(trackers.__path__) if m.name != "base")
    assert list(trackers.LOGGERS) == modules == ["csv", "mlflow", "tensorboard", "wandb"]
    for name in modules:
        cls = trackers.tracker_class(name)
        assert all(callable(getattr(cls, hook)) for hook in ("log_step", "log_scores", "close"))
        assert cls.package in (None, name)  # the extra of the same name installs it
    element = typing.get_args(config_keys()["loggers"].hint)[0]
    assert typing.get_args(element) == trackers.LOGGERS
