import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from lifelong import registry
from lifelong.experiment.checkpoint import load_checkpoint
from lifelong.experiment.cli import main
from lifelong.experiment.config import ConfigError, load_run_config
from lifelong.experiment.index import RunIndex
from lifelong.experiment.sweep import load_sweep, run_sweep, sweep_from_dict

REPO = Path(__file__).resolve().parents[3]


def tiny_run(tmp_path, checkpoint_every=1):
    return {
        "encoder": "tiny",
        "tasks": None,
        "train_size": 8,
        "test_size": 4,
        "batch_size": 4,
        "max_length": 32,
        "output_dir": str(tmp_path),
        "checkpoint_every": checkpoint_every,
        "strategy_options": {"replay": {"replay_every": 4, "replay_ratio": 0.5}},
    }


def tiny_sweep(tmp_path, **changes):
    values = {
        "name": "tiny",
        "run": tiny_run(tmp_path),
        "strategies": ["seq", "replay"],
        "orders": ["i"],
        "seeds": [0],
    }
    values.update(changes)
    return sweep_from_dict(values, where="test sweep")


def matrices(root):
    return {
        p.parent.name: pd.read_csv(p, index_col="row") for p in sorted(root.glob("*/accuracy.csv"))
    }


def test_grid_points_have_fixed_dirs_and_per_strategy_changes(tmp_path):
    sweep = tiny_sweep(
        tmp_path, orders=["i", "ii"], seeds=[0, 1], per_strategy={"replay": {"lr": 0.5}}
    )
    points = sweep.points()
    assert len(points) == 2 * 2 * 2
    assert points[0].run_dir == tmp_path / "tiny" / "seq_i_s0"
    assert {p.config.training.lr for p in points if p.config.strategy.name == "replay"} == {0.5}
    assert {p.config.training.lr for p in points if p.config.strategy.name == "seq"} == {3e-5}
    narrowed = sweep.with_grid(["replay"], ["ii"], [3])
    assert [(p.config.strategy.name, p.config.training.seed) for p in narrowed.points()] == [
        ("replay", 3)
    ]


def test_data_dir_flag_replaces_every_points_data_dir(tmp_path, capsys):
    data = tmp_path / "real"
    data.mkdir()
    sweep = tiny_sweep(tmp_path, per_strategy={"replay": {"data_dir": str(tmp_path)}})
    moved = sweep.with_run(data_dir=str(data))
    dirs = {p.config.strategy.name: p.config.stream.data_dir for p in moved.points()}
    assert dirs == {"seq": str(data), "replay": str(tmp_path)}  # per_strategy still on top
    with pytest.raises(ConfigError, match=r"command line: key 'data_dir': .*missing: no such"):
        sweep.with_run(data_dir=str(tmp_path / "missing"))
    path = tmp_path / "sweep.yaml"
    values = {"name": "tiny", "run": sweep.base.to_dict(), "strategies": ["seq"]}
    path.write_text(yaml.safe_dump(values))
    assert main(["sweep", str(path), "--data-dir", str(tmp_path / "missing")]) == 2
    assert "missing: no such directory" in capsys.readouterr().err
    assert not (tmp_path / "tiny").exists()  # refused before any run


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"colour": 1}, "unknown key 'colour'"),
        ({"strategies": ["sek"]}, "sek"),
        (
            {"orders": ["v"]},
            r"orders: .*key 'order': 'v' is not allowed \(did you mean 'iv'\?\); expected one of i",
        ),
        ({"seeds": ["x"]}, "seeds: expected integer seeds, got .x."),
        ({"seeds": [0, 0]}, "seeds: 0 is listed twice"),
        ({"seeds": [2**32]}, r"seeds: .*key .seed.: 4294967296 is not allowed"),
        ({"per_strategy": {"replay": {"batch": 3}}}, "unknown key 'batch'"),
        ({"per_strategy": {"nope": {}}}, "'nope' is not a registered strategy"),
        ({"name": "../up"}, "plain folder name"),
    ],
)
def test_bad_sweeps_are_errors_naming_the_key(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message):
        tiny_sweep(tmp_path, **changes)


def crash_replay_at(monkeypatch, call):
    """Make the next built replay strategy raise KeyboardInterrupt on its ``call``-th observe."""
    build, calls = registry.build, [0]

    def build_crashing_replay(name, *args, **kwargs):
        strategy = build(name, *args, **kwargs)
        if name == "replay":
            observe = strategy.observe

            def observe_or_crash(batch):
                calls[0] += 1
                if calls[0] == call:
                    raise KeyboardInterrupt
                return observe(batch)

            strategy.observe = observe_or_crash
        return strategy

    monkeypatch.setattr(registry, "build", build_crashing_replay)


def test_sweep_skips_finished_runs_and_resumes_interrupted_ones(tmp_path, monkeypatch):
    sweep = tiny_sweep(tmp_path)
    crash_replay_at(monkeypatch, 5)  # an interrupted sweep
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep)
    monkeypatch.undo()
    assert (tmp_path / "tiny" / "replay_i_s0" / "checkpoint.pt").is_file()
    seen = []
    results = run_sweep(sweep, on_result=seen.append)
    assert [r.status for r in results] == ["skipped", "finished"]
    assert [r.status for r in seen] == ["skipped", "finished"]
    resumed = matrices(tmp_path / "tiny")
    rows = RunIndex(tmp_path / "tiny" / "index.sqlite").rows()
    assert sorted(r["name"] for r in rows) == ["replay_i_s0", "seq_i_s0"]
    assert {r["status"] for r in rows} == {"finished"}
    assert [r.status for r in run_sweep(sweep)] == ["skipped", "skipped"]
    fresh = tiny_sweep(tmp_path / "fresh")
    run_sweep(fresh)
    for name, frame in matrices(tmp_path / "fresh" / "tiny").items():
        pd.testing.assert_frame_equal(frame, resumed[name])


def test_a_resumed_point_takes_the_sweep_files_checkpoint_interval(tmp_path, monkeypatch):
    crash_replay_at(monkeypatch, 5)  # 2 batches a task: task 3's first batch
    with pytest.raises(KeyboardInterrupt):
        run_sweep(tiny_sweep(tmp_path, strategies=["replay"], run=tiny_run(tmp_path, 0)))
    point = tmp_path / "tiny" / "replay_i_s0"
    assert load_checkpoint(point).position.step == 0  # task ends only
    sweep = tiny_sweep(tmp_path, strategies=["replay"], run=tiny_run(tmp_path, 1))
    crash_replay_at(monkeypatch, 2)  # the resumed run's 2nd batch: task 3's second
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep)
    monkeypatch.undo()
    position = load_checkpoint(point).position  # taken after task 3's first batch
    assert (position.task, position.step) == (2, 1)
    assert load_run_config(point / "config.yaml").training.checkpoint_every == 1
    assert [r.status for r in run_sweep(sweep)] == ["finished"]
    run_sweep(tiny_sweep(tmp_path / "fresh", strategies=["replay"]))
    fresh = matrices(tmp_path / "fresh" / "tiny")["replay_i_s0"]
    pd.testing.assert_frame_equal(matrices(tmp_path / "tiny")["replay_i_s0"], fresh)


def test_a_failing_point_does_not_stop_the_sweep(tmp_path, capsys):
    sweep = tiny_sweep(tmp_path, per_strategy={"seq": {"data_dir": str(tmp_path / "missing")}})
    results = run_sweep(sweep)
    assert [r.status for r in results] == ["failed", "finished"]
    assert "missing" in results[0].error
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "run": {**sweep.base.to_dict(), "run_index": None},
                "strategies": ["seq", "replay"],
                "per_strategy": {"seq": {"data_dir": str(tmp_path / "missing")}},
            }
        )
    )
    assert main(["sweep", str(path)]) == 1
    out = capsys.readouterr().out
    assert "0 finished, 1 skipped, 1 failed" in out


@pytest.mark.slow
def test_smoke_sweep_then_report(tmp_path, capsys):
    """The acceptance run: experiments/smoke.yaml (3 strategies x 2 orders x 2 seeds)."""
    flags = ["--jobs", "2"]
    smoke = str(REPO / "experiments" / "smoke.yaml")
    assert main(["sweep", smoke, "--output-dir", str(tmp_path), *flags]) == 0
    assert "12 finished, 0 skipped, 0 failed" in capsys.readouterr().out
    root = tmp_path / "smoke"
    rows = RunIndex(root / "index.sqlite").rows()
    assert len(rows) == 12 and {r["status"] for r in rows} == {"finished"}
    assert main(["report", str(root)]) == 0
    table = capsys.readouterr().out
    assert "| mbpa++ | average accuracy |" in table and " ± " in table
    # the intervals in the terminal too (friction 8), and where the pairwise verdicts are
    assert "## text: over all runs" in table and "95% confidence interval" in table
    assert "paired differences (a − b, 95% CI, verdict)" in table
    plots = sorted((root / "report" / "plots").glob("*.png"))
    # a heatmap and a curve per strategy and order, the stream's summary with CI bars, and
    # the Pareto view of accuracy against each run's measured compute and memory
    assert len(plots) == 3 * 2 * 2 + 2
    assert (root / "report" / "plots" / "summary_text_average_accuracy.png") in plots
    assert (root / "report" / "plots" / "pareto_text.png") in plots
    assert "### text: average accuracy against what it cost" in table
    assert main(["sweep", smoke, "--output-dir", str(tmp_path), *flags]) == 0
    assert "0 finished, 12 skipped" in capsys.readouterr().out
    assert_replay_ii_s1_is_the_in_process_run(root, tmp_path / "again")


def assert_replay_ii_s1_is_the_in_process_run(root, again):
    """The sweep is deterministic: a backend's smoke point replay_ii_s1 is the in-process run's."""
    sweep = load_sweep(str(REPO / "experiments" / "smoke.yaml")).with_grid(["replay"], ["ii"], [1])
    run_sweep(dataclasses.replace(sweep, base=sweep.base.replace(output_dir=str(again))))
    np.testing.assert_array_equal(
        matrices(again / "smoke")["replay_ii_s1"].to_numpy(),
        matrices(root)["replay_ii_s1"].to_numpy(),
    )


@pytest.mark.slow
def test_the_ray_backend_runs_the_smoke_sweep_as_in_process(tmp_path, capsys):
    """``--backend ray`` on part of the smoke grid (2 strategies x 2 seeds of one order): every
    point finishes and is indexed, a second sweep skips them all, and a point's matrices are the
    in-process run's. The report is the backend's business no more than the local one's (above)."""
    smoke = str(REPO / "experiments" / "smoke.yaml")
    flags = ["--backend", "ray", "--strategies", "seq,replay", "--orders", "ii", "--seeds", "0,1"]
    assert main(["sweep", smoke, "--output-dir", str(tmp_path), *flags]) == 0
    assert "4 finished, 0 skipped, 0 failed" in capsys.readouterr().out
    root = tmp_path / "smoke"
    rows = RunIndex(root / "index.sqlite").rows()
    assert len(rows) == 4 and {r["status"] for r in rows} == {"finished"}
    assert main(["sweep", smoke, "--output-dir", str(tmp_path), *flags]) == 0
    assert "0 finished, 4 skipped" in capsys.readouterr().out
    assert_replay_ii_s1_is_the_in_process_run(root, tmp_path / "again")


SWEEP_SCRIPT = "import sys; from lifelong.experiment.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.slow
def test_two_concurrent_sweeps_on_one_index_lose_no_rows(tmp_path):
    path = tmp_path / "sweep.yaml"
    base = tiny_sweep(tmp_path).base.to_dict()
    path.write_text(
        yaml.safe_dump({"name": "shared", "run": base, "strategies": ["seq", "replay"]})
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    sweeps = [
        subprocess.Popen(
            [sys.executable, "-c", SWEEP_SCRIPT, "sweep", str(path), "--seeds", seeds],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for seeds in ("0,1", "2,3")
    ]
    for sweep in sweeps:
        out, _ = sweep.communicate(timeout=600)
        assert sweep.returncode == 0, out[-2000:]
    rows = RunIndex(tmp_path / "shared" / "index.sqlite").rows()
    assert len(rows) == 2 * 4 and {r["status"] for r in rows} == {"finished"}
    assert sorted({r["seed"] for r in rows}) == list(range(4))


def test_local_workers_each_get_their_own_gpus():
    from lifelong.experiment.sweep import worker_devices

    assert worker_devices(3, 0) == [None, None, None]  # no GPU: the environment is left alone
    assert worker_devices(2, 2) == ["0", "1"]
    assert worker_devices(3, 2) == ["0", "1", "0"]  # more workers than GPUs: shared in turn
    assert worker_devices(2, 4, 2) == ["0,1", "2,3"]
    assert worker_devices(4, 2, 0.5) == ["0", "0", "1", "1"]
    assert worker_devices(2, 2, 0) == ["", ""]  # --gpus-per-run 0: no GPU visible
    with pytest.raises(ConfigError, match="needs 4 GPU"):
        worker_devices(4, 2, 1)
    with pytest.raises(ConfigError, match="1/n"):
        worker_devices(2, 2, 0.4)


class FakeRay:
    """Stands in for Ray: records each remote's resources and runs the task in this process."""

    def __init__(self, gpus):
        self.gpus, self.requests = gpus, []

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return {"CPU": 2.0, "GPU": float(self.gpus)}

    def remote(self, **resources):
        self.requests.append(resources)

        def wrap(fn):
            class Remote:
                @staticmethod
                def remote(*args):
                    return FakeRef(fn(*args))

            return Remote

        return wrap

    def wait(self, refs, num_returns):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.value


class FakeRef:
    def __init__(self, value):
        self.value = value


@pytest.mark.parametrize(
    ("gpus", "device", "given", "requested"),
    [
        (2, "auto", None, 1.0),
        (0, "auto", None, 0.0),
        (2, "cpu", None, 0.0),
        (1, "auto", 0.25, 0.25),
    ],
)
def test_ray_points_request_gpus_by_flag_or_by_what_the_cluster_has(
    tmp_path, monkeypatch, gpus, device, given, requested
):
    fake = FakeRay(gpus)
    monkeypatch.setitem(sys.modules, "ray", fake)
    sweep = tiny_sweep(tmp_path, strategies=["seq"])
    sweep = dataclasses.replace(
        sweep, base=sweep.base.replace(device="cpu" if device == "cpu" else "auto")
    )
    (result,) = run_sweep(sweep, backend="ray", gpus_per_run=given)
    assert result.status == "finished"
    assert fake.requests == [{"num_cpus": 1, "num_gpus": requested}]


def test_a_negative_gpu_request_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="--gpus-per-run must be a finite number >= 0"):
        run_sweep(tiny_sweep(tmp_path), gpus_per_run=-1)


def test_infinite_values_are_refused_before_a_sweep_runs(tmp_path):
    """Failure 3: ``.inf`` in a sweep's run config or per-strategy change, ``--gpus-per-run``."""
    with pytest.raises(ConfigError, match="key 'lr': inf .*finite"):
        tiny_sweep(tmp_path, per_strategy={"replay": {"lr": float("inf")}})
    options = {"replay": {"replay_every": 4, "replay_ratio": float("inf")}}
    with pytest.raises(ConfigError, match="replay_ratio"):
        tiny_sweep(tmp_path, run={"encoder": "tiny", "strategy_options": options})
    with pytest.raises(ConfigError, match="--gpus-per-run must be a finite number"):
        run_sweep(tiny_sweep(tmp_path), gpus_per_run=float("inf"))
    assert not (tmp_path / "tiny").exists()
