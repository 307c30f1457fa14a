"""A run directory is data (`lifelong.experiment.trust`): its files run no code, choose no
place to write, and a resume continues only what its checkpoint was trained as.

Items 1-3 of the reliability issue: a planted checkpoint, an edited ``config.yaml``, a library
run given its stream.
"""

import io
import shutil
from pathlib import Path

import pytest
import torch
import yaml

import lifelong
from lifelong.experiment.checkpoint import CHECKPOINT_NAME, load_checkpoint
from lifelong.experiment.cli import main
from lifelong.experiment.config import ConfigError, RunConfig, from_dict, load_run_config
from lifelong.experiment.index import RunIndex
from lifelong.experiment.reports import report_table
from lifelong.experiment.runs import resume, run
from lifelong.experiment.sweep import load_sweep, run_sweep
from lifelong.serialization import UnsafeFileError, load_data
from lifelong.streams import text_classification_stream

REPO = Path(__file__).resolve().parents[3]


def tiny(tmp_path, **changes) -> RunConfig:
    """Two tasks of 8 training and 4 test rows, the tiny encoder, replay often."""
    values = {
        "strategy": "replay",
        "encoder": "tiny",
        "tasks": ["ag_news", "yelp"],
        "train_size": 8,
        "test_size": 4,
        "batch_size": 4,
        "max_length": 32,
        "progress": False,
        "keep_checkpoint": True,
        "output_dir": str(tmp_path / "runs"),
        "strategy_options": {"replay": {"replay_every": 4, "replay_ratio": 0.5}},
    }
    return from_dict({**values, **changes})


def with_checkpoint(tmp_path, **changes) -> Path:
    """A finished run that kept its checkpoint: resuming it loads that checkpoint."""
    outcome = run(tiny(tmp_path, **changes))
    assert (outcome.run_dir / CHECKPOINT_NAME).is_file()
    return outcome.run_dir


def edit_config(run_dir: Path, section: str | None, key: str, value) -> None:
    """Set ``key`` in its section of the run's ``config.yaml`` (found when ``section`` is None)."""
    path = run_dir / "config.yaml"
    values = yaml.safe_load(path.read_text())
    section = section or next(s for s, keys in values.items() if key in keys)
    values[section][key] = value
    path.write_text(yaml.safe_dump(values, sort_keys=False))


class CreatesAFile:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def plant(run_dir: Path, marker: Path) -> None:
    """Replace the run's checkpoint by one whose unpickling would create ``marker``."""
    buffer = io.BytesIO()
    torch.save({"version": 1, "position": {}, "strategy": CreatesAFile(marker), "rng": {}}, buffer)
    (run_dir / CHECKPOINT_NAME).write_bytes(buffer.getvalue())


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line and not line.startswith("INFO ")]
    assert len(lines) == 1, lines
    return lines[0]


# --- 1. a checkpoint runs no code -------------------------------------------------------------


def test_a_planted_checkpoint_runs_nothing_on_resume(tmp_path, capsys):
    run_dir = with_checkpoint(tmp_path)
    marker = tmp_path / "created-by-the-checkpoint"
    plant(run_dir, marker)
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "refused" in line and "open" in line and f"--resume {run_dir}" in line
    assert not marker.exists()


def test_a_planted_checkpoint_runs_nothing_on_a_sweep_rerun(tmp_path):
    spec = {
        "name": "planted",
        "run": tiny(tmp_path).to_dict() | {"strategy_options": {}},
        "strategies": ["seq"],
        "seeds": [0],
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    sweep = load_sweep(path)
    (point,) = sweep.points()
    point.run_dir.mkdir(parents=True)
    (point.run_dir / "config.yaml").write_text(yaml.safe_dump(point.config.to_sections()))
    marker = tmp_path / "created-by-the-checkpoint"
    plant(point.run_dir, marker)
    (result,) = run_sweep(sweep)
    assert result.status == "failed" and "refused" in result.error
    assert not marker.exists()


def test_a_planted_bench_state_runs_nothing(tmp_path, load_script):
    bench = load_script("bench/local_adaptation.py")
    marker = tmp_path / "created-by-the-state"
    state = tmp_path / "state.pt"
    buffer = io.BytesIO()
    torch.save({"model": CreatesAFile(marker)}, buffer)
    state.write_bytes(buffer.getvalue())
    with pytest.raises(UnsafeFileError, match="refused"):
        bench.read_state(state)
    assert not marker.exists()


def test_a_checkpoint_written_before_this_change_still_resumes(tmp_path):
    """A checkpoint without the trained-as record loads (it holds only data) and resumes."""
    run_dir = with_checkpoint(tmp_path)
    expected = (run_dir / "accuracy.csv").read_text()
    payload = load_data(run_dir / CHECKPOINT_NAME)
    del payload["trained_as"], payload["stream"]
    torch.save(payload, run_dir / CHECKPOINT_NAME)
    (run_dir / "metrics.json").unlink()
    outcome = resume(run_dir)
    assert (outcome.run_dir / "accuracy.csv").read_text() == expected
    assert "predates recording" in (run_dir / "log.txt").read_text()


def test_a_run_checkpointed_before_the_config_became_its_sections_resumes(tmp_path):
    """Before issue 63 a run's config.yaml was flat and its checkpoint's trained-as record held
    every stream's keys (FewRel's on a text run): both still resume, to the same numbers."""
    run_dir = with_checkpoint(tmp_path)
    expected = (run_dir / "accuracy.csv").read_text()
    payload = load_data(run_dir / CHECKPOINT_NAME)
    payload["trained_as"] |= {"fewrel_tasks": 10, "cluster_order": 0, "glove": None}
    torch.save(payload, run_dir / CHECKPOINT_NAME)
    flat = load_run_config(run_dir / "config.yaml").to_dict() | {"cluster_order": 0}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(flat))  # the old flat dialect
    (run_dir / "metrics.json").unlink()
    outcome = resume(run_dir)
    assert (outcome.run_dir / "accuracy.csv").read_text() == expected


# --- 2. resume continues what the checkpoint was trained as ----------------------------------


@pytest.mark.parametrize(
    "section, key, value, named",
    [
        ("strategy", "name", "seq", "strategy: trained as 'replay', now 'seq'"),
        ("stream", "tasks", ["yelp", "ag_news"], "tasks: trained as ['ag_news', 'yelp']"),
        ("training", "lr", 0.001, "lr: trained as 3e-05, now 0.001"),
        ("encoder", "name", "minilm", "encoder: trained as 'tiny', now 'minilm'"),
    ],
    ids=["strategy", "tasks", "lr", "encoder"],
)
def test_an_edited_config_is_refused_in_one_line_naming_the_key(
    tmp_path, capsys, section, key, value, named
):
    run_dir = with_checkpoint(tmp_path)
    edit_config(run_dir, section, key, value)
    before = (run_dir / "accuracy.csv").read_text()
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert named in line and "differs from what this checkpoint was trained as" in line
    assert (run_dir / "accuracy.csv").read_text() == before  # nothing run


def test_what_may_change_on_resume_still_resumes(tmp_path):
    run_dir = with_checkpoint(tmp_path)
    expected = (run_dir / "accuracy.csv").read_text()
    edit_config(run_dir, None, "checkpoint_every", 3)
    edit_config(run_dir, None, "device", "cpu")
    (run_dir / "metrics.json").unlink()
    outcome = resume(run_dir, progress=False)
    assert (outcome.run_dir / "accuracy.csv").read_text() == expected


def test_an_older_checkpoint_of_another_model_is_one_line(tmp_path, capsys):
    """Without a trained-as record, a checkpoint that does not fit is refused in one line."""
    run_dir = with_checkpoint(tmp_path)
    payload = load_data(run_dir / CHECKPOINT_NAME)
    del payload["trained_as"], payload["stream"]
    torch.save(payload, run_dir / CHECKPOINT_NAME)
    edit_config(run_dir, "strategy", "name", "mbpa++")
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "does not fit this run's" in line and str(run_dir / CHECKPOINT_NAME) in line


def test_a_config_yaml_chooses_no_place_outside_the_run_folder(tmp_path, capsys):
    run_dir = with_checkpoint(tmp_path)
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere" / "index.sqlite"
    edit_config(run_dir, None, "run_index", str(elsewhere))
    (run_dir / "metrics.json").unlink()
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "key 'run_index'" in line and f"--run-index {elsewhere}" in line
    assert not elsewhere.parent.exists()
    # the command confirms it: then it is used
    assert main(["run", "--resume", str(run_dir), "--run-index", str(elsewhere)]) == 0
    assert RunIndex(elsewhere).get(run_dir)["status"] == "finished"


@pytest.mark.parametrize(
    "key, value",
    [("output_dir", "/tmp/lifelong-not-here"), ("token_cache", "/tmp/lifelong-not-here/cache")],
)
def test_other_places_outside_the_run_folder_are_refused(tmp_path, key, value):
    run_dir = with_checkpoint(tmp_path)
    edit_config(run_dir, None, key, value)
    with pytest.raises(ConfigError, match=f"key '{key}'"):
        resume(run_dir)
    assert not Path("/tmp/lifelong-not-here").exists()


# --- 3. a library run records the stream it was given ----------------------------------------


def test_a_run_given_a_stream_records_its_order_and_sizes(tmp_path):
    stream = text_classification_stream("ii", train_size=8, test_size=4)
    config = tiny(tmp_path, tasks=None)
    outcome = run(config, stream=stream)
    stored = yaml.safe_load((outcome.run_dir / "config.yaml").read_text())["stream"]
    assert (stored["order"], stored["tasks"]) == ("ii", None)
    assert (stored["train_size"], stored["test_size"]) == (8, 4)
    table = report_table([outcome.run_dir])
    assert "ii" in table.columns.get_level_values("order")
    index = RunIndex(tmp_path / "runs" / "index.sqlite")
    assert index.get(outcome.run_dir)["task_order"] == "ii"
    # a resume rebuilds that very stream from the recorded keys, and continues
    (outcome.run_dir / "metrics.json").unlink()
    again = resume(outcome.run_dir)
    assert again.metrics["average_accuracy"] == outcome.metrics["average_accuracy"]


def test_a_resume_on_another_stream_is_refused(tmp_path):
    stream = text_classification_stream("ii", train_size=8, test_size=4)
    outcome = run(tiny(tmp_path, tasks=None), stream=stream)
    other = text_classification_stream("ii", train_size=8, test_size=3)
    with pytest.raises(ConfigError, match="trained on another stream"):
        resume(outcome.run_dir, stream=other)
    # the data the config names changed under the run: refused too
    shutil.copy(outcome.run_dir / "config.yaml", tmp_path / "kept.yaml")
    edit_config(outcome.run_dir, "stream", "test_size", 3)
    with pytest.raises(ConfigError, match="test_size"):
        resume(outcome.run_dir)


def test_a_stream_of_another_kind_or_unnamed_tasks_is_refused(tmp_path):
    stream = text_classification_stream("i", train_size=8, test_size=4)
    with pytest.raises(ConfigError, match="'classification' stream"):
        run(tiny(tmp_path, tasks=None, stream="qa", max_length=384), stream=stream)
    renamed = lifelong.streams.TaskStream(
        tuple(type(t)(f"my-{t.name}", t.labels, t.train, t.test) for t in stream),
        stream.label_names,
        kind=stream.kind,
    )
    with pytest.raises(ConfigError, match="'my-yelp' is not a text dataset"):
        run(tiny(tmp_path, tasks=None), stream=renamed)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_trained_as_record_is_in_every_checkpoint(tmp_path):
    run_dir = with_checkpoint(tmp_path)
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint.trained_as["strategy"] == "replay"
    assert "device" not in checkpoint.trained_as
    assert checkpoint.stream["tasks"] == ["ag_news", "yelp"]
    assert checkpoint.stream["sizes"] == [[8, 4], [8, 4]]
