"""experiments/strategy_table.py: the demo's all-strategies table, run or read from its runs."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong.experiment.config import from_dict
from lifelong.experiment.rundir import write_results
from lifelong.learner import StreamResult
from lifelong.metrics import summary

TASKS = ("yelp", "ag_news", "dbpedia", "amazon", "yahoo")


@pytest.fixture
def table(load_script):
    return load_script("strategy_table.py")


def finished_run(run_dir, name, seconds, **extra):
    """A run directory as `lifelong run` leaves it: config, matrices, metrics."""
    rng = np.random.default_rng(len(name))
    R = np.tril(rng.uniform(60, 100, (5, 5)))
    metrics = summary(R, np.zeros(5), np.full(5, 100))
    metrics.update(seconds=seconds, **extra)
    config = from_dict({"strategy": name, "order": "i", "seed": 0}).to_dict()
    write_results(run_dir, config, StreamResult(TASKS, R, np.zeros(5)), metrics)
    return metrics


def test_collected_reads_one_row_per_strategy_in_registry_order(tmp_path, table):
    replay = finished_run(
        tmp_path / "b_replay",
        "replay",
        66.0,
        memory_examples=1500,
        strategy={"replays": 15},
        cpu_seconds=93.0,
    )
    seq = finished_run(tmp_path / "a_seq", "seq", 54.0)
    mtl = finished_run(tmp_path / "c_mtl", "mtl", 60.0, bwt=None, fwt=None, forgetting=None)
    lines = table.collected(tmp_path).splitlines()
    assert lines[:2] == table.HEADER.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| mtl", "| replay", "| seq"]
    a = replay["average_accuracy"]
    assert lines[3] == (
        f"| replay | {a:.1f} | {replay['bwt']:.1f} | {replay['fwt']:.1f} | "
        f"{replay['forgetting']:.1f} | 1500 | 15 | 1.1 | 1.6 |"
    )
    assert lines[4] == f"| seq | {seq['average_accuracy']:.1f} | {seq['bwt']:.1f} | " + (
        f"{seq['fwt']:.1f} | {seq['forgetting']:.1f} |  |  | 0.9 |  |"
    )
    assert lines[2].startswith(f"| mtl | {mtl['average_accuracy']:.1f} | n/a | n/a | n/a |")
    assert table.collected(tmp_path, ["replay"]).splitlines()[2:] == [lines[3]]


def test_collected_refuses_a_missing_or_doubled_strategy(tmp_path, table):
    finished_run(tmp_path / "a", "seq", 54.0)
    with pytest.raises(SystemExit, match="no finished run of replay"):
        table.collected(tmp_path, ["seq", "replay"])
    finished_run(tmp_path / "b", "seq", 50.0)
    with pytest.raises(SystemExit, match="two runs of 'seq'"):
        table.collected(tmp_path)
