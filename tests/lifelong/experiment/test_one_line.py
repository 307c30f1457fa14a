"""Every promise of one line kept: reports refuse instead of answering wrongly, empty values
are not defaults, limits are refused in one line before anything runs or is created.

Items 4-7 of the reliability issue (`lifelong report`'s silences, empty strings, tracebacks and
hangs, checks that came too late).
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from lifelong.experiment.cli import main
from lifelong.experiment.config import ConfigError
from lifelong.experiment.index import RunIndex, RunIndexError
from lifelong.experiment.sweep import check_ray_address, load_sweep, run_sweep

REPO = Path(__file__).resolve().parents[3]
TINY = ["run", "--encoder", "tiny", "--no-progress", "--tasks", "ag_news,yelp"]
SMALL = [*TINY, "--train-size", "8", "--test-size", "4", "--batch-size", "4"]


def error_line(capsys) -> str:
    lines = [x for x in capsys.readouterr().err.splitlines() if x and not x.startswith("INFO ")]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished runs (seq, replay) and a diverged one beside them."""
    out = tmp_path_factory.mktemp("runs")
    for strategy in ("seq", "replay"):
        assert main([*SMALL, "--strategy", strategy, "--output-dir", str(out)]) == 0
    assert main([*SMALL, "--strategy", "seq", "--lr", "1e6", "--output-dir", str(out)]) == 3
    return out


# --- 4. report refuses what it cannot answer ------------------------------------------------


def test_an_unknown_metric_is_refused_naming_the_keys(runs, capsys):
    for extra in ([], ["--compare", "replay,seq"], ["--claims", "text"]):
        assert main(["report", str(runs), "--no-plots", "--metric", "bogus", *extra]) == 2
        line = error_line(capsys)
        assert "metric 'bogus'" in line and "average_accuracy" in line


def test_a_metric_given_without_compare_makes_the_table(runs, capsys, tmp_path):
    assert main(["report", str(runs), "--no-plots", "--metric", "bwt", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "BWT" in out and "average accuracy" not in out


def test_a_diverged_run_is_named_not_dropped(runs, capsys, tmp_path):
    assert main(["report", str(runs), "--no-plots", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "left out 1 run directories without results" in err
    assert "failed: DivergenceError" in err


def test_compare_and_claims_are_one_question_at_a_time(runs, capsys):
    with pytest.raises(SystemExit) as code:
        main(["report", str(runs), "--compare", "replay,seq", "--claims", "text"])
    assert code.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_a_strategy_compared_with_itself_is_refused(runs, capsys):
    assert main(["report", str(runs), "--compare", "replay,replay"]) == 2
    assert "the same strategy" in error_line(capsys)


def test_claims_of_a_stream_without_runs_are_refused(runs, capsys):
    assert main(["report", str(runs), "--claims", "fewrel"]) == 2
    assert "none of the 2 runs is on the fewrel stream" in error_line(capsys)


def test_a_nan_metric_is_a_damaged_file_not_a_dash(runs, capsys, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(runs, copy)
    (metrics,) = [p for p in copy.rglob("metrics.json") if "replay" in str(p)]
    values = json.loads(metrics.read_text())
    values["bwt"] = float("nan")
    metrics.write_text(json.dumps(values))
    assert main(["report", str(copy), "--no-plots"]) == 2
    line = error_line(capsys)
    assert str(metrics) in line and "'bwt' = nan" in line


# --- 5. an empty string is not "not given" ---------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--resume", ""],
        ["run", "--config", ""],
        ["run", "--output-dir", ""],
        ["run", "--data-dir", " "],
        ["report", "runs", "--out", ""],
        ["report", ""],
        ["sweep", ""],
        ["sweep", "x.yaml", "--seeds", ""],
        ["lm", "--json", ""],
        ["lm", "--corpus", ""],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_an_empty_value_is_refused_not_taken_as_the_default(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as code:
        main(argv)
    assert code.value.code == 2
    assert "expected a value, got an empty string" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing run, nothing written


# --- 6. limits in one line, no traceback, no hang ---------------------------------------------


@pytest.mark.parametrize("seed", ["18446744073709551616", "4294967296", "-1"])
def test_a_seed_out_of_range_is_refused_naming_seed_before_anything_exists(seed, capsys, tmp_path):
    assert main([*SMALL, "--seed", seed, "--output-dir", str(tmp_path / "out")]) == 2
    assert "key 'seed'" in error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_minus_inf_is_a_value_not_a_flag(capsys, tmp_path):
    assert main([*SMALL, "--lr", "-inf", "--output-dir", str(tmp_path)]) == 2
    assert "key 'lr'" in error_line(capsys)


@pytest.mark.parametrize(
    "flags, expected, code",
    [
        (["--corpus", "{short}"], "too few for one window", 2),
        (["--segments", "100000"], "too few for one window", 2),
        (["--lr", "1e6"], "training loss is nan", 3),
        (["--batch-size", str(2**40)], "does not fit in the device's memory", 2),
        (["--width", str(2**40), "--heads", "1"], "GiB to train", 2),
        (["--seed", "-1"], "--seed must be in [0, 4294967295]", 2),
        (["--seed", str(2**70)], "--seed must be in [0, 4294967295]", 2),
    ],
    ids=["short-corpus", "long-window", "lr", "batch", "width", "seed-1", "seed-huge"],
)
def test_lm_limits_are_one_line(flags, expected, code, capsys, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("To be, or not to be, that is the question. " * 2)
    flags = [f.replace("{short}", str(short)) for f in flags]
    argv = ["lm", "--modules", "transformer", "--steps", "2", "--no-progress", *flags]
    assert main(argv) == code
    line = error_line(capsys)
    assert expected in line


def test_sweep_seeds_that_are_not_integers_name_the_flag(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump({"name": "s", "strategies": ["seq"], "run": {"encoder": {"name": "tiny"}}})
    )
    assert main(["sweep", str(path), "--seeds", "a,b"]) == 2
    assert "--seeds: expected integer seeds, got 'a'" in error_line(capsys)


def sweep_file(tmp_path, **changes) -> Path:
    spec = {
        "name": "grid",
        "strategies": ["seq"],
        "seeds": [0],
        "run": {
            "stream": {"tasks": ["ag_news"], "train_size": 4, "test_size": 4},
            "encoder": {"name": "tiny"},
            "task": {"max_length": 32},
            "training": {"batch_size": 4},
            "tracking": {"output_dir": str(tmp_path / "out")},
        },
    } | changes
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_many_jobs_on_a_finished_sweep_exit_at_once(tmp_path):
    """``--jobs 100000``: no worker more than points, no slot left to block the exit."""
    path = sweep_file(tmp_path)
    assert main(["sweep", str(path)]) == 0
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "lifelong.experiment.cli", "sweep", str(path), "--jobs", "100000"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "0 finished, 1 skipped" in done.stdout
    assert time.monotonic() - started < 60


WORKER_PID = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from lifelong.experiment import sweep

    def report_and_wait(config, run_dir, threads=0):
        Path(sys.argv[2], str(os.getpid())).touch()
        time.sleep(600)

    def run_on_pool(payloads, jobs, on_result, devices=()):
        return sweep._real_pool(payloads, jobs, on_result, devices, work=report_and_wait)

    if __name__ == "__main__":  # spawned workers import this file: they must not sweep
        sweep._real_pool = sweep._run_on_pool
        sweep._run_on_pool = run_on_pool
        from lifelong.experiment.cli import main
        main(["sweep", sys.argv[1], "--jobs", "2"])
    """
)


def test_killing_a_sweep_ends_its_workers(tmp_path):
    path = sweep_file(tmp_path, seeds=[0, 1])
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "sweep_then_wait.py"
    script.write_text(WORKER_PID)
    sweep = subprocess.Popen([sys.executable, str(script), str(path), str(pids)], cwd=REPO)
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    deadline = time.monotonic() + 30
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by init) is not alive
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def test_an_unreachable_ray_address_is_refused_in_seconds():
    started = time.monotonic()
    with pytest.raises(ConfigError, match="no Ray cluster answers there"):
        check_ray_address("127.0.0.1:1", timeout=2)
    with pytest.raises(ConfigError, match="expected host:port"):
        check_ray_address("nowhere")
    assert time.monotonic() - started < 10
    check_ray_address(None)
    check_ray_address("auto")


def test_address_without_ray_is_refused(tmp_path):
    sweep = load_sweep(sweep_file(tmp_path))
    with pytest.raises(ConfigError, match="--address is for --backend ray"):
        run_sweep(sweep, address="127.0.0.1:1")


def test_a_full_disk_under_the_index_is_one_line(tmp_path, monkeypatch, capsys):
    """SQLite's "database or disk is full" while recording a run: one line, no chain."""
    index = RunIndex(tmp_path / "index.sqlite")
    real = sqlite3.connect

    class FullConnection:
        def __init__(self, conn):
            self.conn = conn

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def execute(self, sql, *args):
            if sql.startswith("INSERT"):
                raise sqlite3.OperationalError("database or disk is full")
            return self.conn.execute(sql, *args)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: FullConnection(real(*a, **k)))
    with pytest.raises(RunIndexError) as err:
        index.start(
            tmp_path / "run", {"stream": "text", "order": "i", "strategy": "seq", "seed": 0}
        )
    assert "database or disk is full" in str(err.value) and str(index.path) in str(err.value)
    assert err.value.__context__ is None or err.value.__suppress_context__


def test_deeply_nested_qa_json_is_malformed_json(tmp_path):
    from lifelong.streams.core import DataFormatError
    from lifelong.streams.qa import load_qa_task

    folder = tmp_path / "squad"
    folder.mkdir()
    for name in ("train-v1.1.json", "dev-v1.1.json"):
        (folder / name).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataFormatError, match="nested too deeply"):
        load_qa_task("squad", tmp_path)


# --- 7. checks before a run directory exists or a model loads -------------------------------


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--strategy", "mbpa++", "-o", "adapt_scope=top999"], "1 <= N <= 2"),
        (["--stream", "fewrel", "--glove", "/no/such/file"], "key 'glove'"),
        (["--stream", "qa", "--pair-loss", "binary"], "--pair-loss: read by the fewrel"),
        (["--stream", "qa", "--pair-loss", "softmax"], "--pair-loss: read by the fewrel"),
        (["--doc-stride", "64"], "--doc-stride: read by the qa stream"),
        (["--logger", "mlflow", "--tracking-uri", "::::"], "not a tracking URI MLflow takes"),
        (["--tracking-uri", "http://localhost:5000"], "add --logger mlflow"),
    ],
    ids=["scope", "glove", "pair-loss-default", "pair-loss", "doc-stride", "uri", "no-mlflow"],
)
def test_refused_before_the_model_loads_or_a_directory_exists(flags, expected, capsys, tmp_path):
    argv = ["run", "--encoder", "tiny", "--no-progress", "--output-dir", str(tmp_path / "o")]
    assert main([*argv, *flags]) == 2
    assert expected in error_line(capsys)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_a_broken_index_is_refused_before_the_run_directory_exists(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "index.sqlite").write_bytes(b"this is not a database" * 100)
    assert main([*SMALL, "--output-dir", str(out)]) == 2
    assert "not a usable run index" in error_line(capsys)
    assert [p.name for p in out.iterdir()] == ["index.sqlite"]


def test_unreadable_data_is_bad_data_exit_2(tmp_path, capsys, monkeypatch):
    """A data file that cannot be read (no permission, an I/O error) is bad data: exit 2."""
    data = tmp_path / "data" / "ag_news_csv"
    data.mkdir(parents=True)
    for split in ("train", "test"):
        rows = [f'"{1 + i % 4}","title {i}","text {i}"' for i in range(8)]
        (data / f"{split}.csv").write_text("\n".join(rows) + "\n")
    real_open = Path.open

    def refuse(self, *args, **kwargs):
        if self.name == "train.csv":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    argv = [*SMALL[:-4], "--tasks", "ag_news", "--data-dir", str(tmp_path / "data")]
    assert (
        main([*argv, "--train-size", "4", "--test-size", "4", "--output-dir", str(tmp_path)]) == 2
    )
    line = error_line(capsys)
    assert f"{data / 'train.csv'}: cannot read the data file (Permission denied)" in line


def test_a_point_listed_twice_is_refused(tmp_path, capsys):
    path = sweep_file(tmp_path, seeds=[0, 0])
    assert main(["sweep", str(path)]) == 2
    assert "seeds: 0 is listed twice" in error_line(capsys)
    assert main(["sweep", str(sweep_file(tmp_path)), "--seeds", "1,1"]) == 2
    assert "listed twice" in error_line(capsys)
