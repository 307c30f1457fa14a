"""The long-input runs change only how rows are read, and are tabulated reader by reader."""

import pytest

from tests.lifelong.experiment.test_reports import make_run


@pytest.fixture
def long_inputs(load_script):
    return load_script("text_classification/long_inputs.py")


def test_each_reader_is_the_budget_run_with_only_its_reading_changed(budget, long_inputs):
    budget = budget.with_grid(["replay"], ["i"], [0])
    before = next(iter(budget.points())).config
    assert before.task.max_length == 64 and before.encoder.name == "minilm"
    for reader, changes in long_inputs.READERS.items():
        sweep = long_inputs.reading(budget, reader, "replay")
        assert sweep.name == f"text_real_budget_long_{reader}" and sweep.strategies == ("replay",)
        (point,) = sweep.points()
        after = point.config
        assert {key: after.to_dict()[key] for key in changes} == changes
        same = after.replace(**{key: before.to_dict()[key] for key in changes})
        assert same.replace(log_group=before.tracking.log_group) == before
    rmt = next(iter(long_inputs.reading(budget, "rmt-minilm-64", "replay").points())).config
    assert (rmt.encoder.name, rmt.encoder.segment_length, rmt.task.max_length) == (
        "rmt-minilm",
        64,
        512,
    )


def test_table_rows_per_reader_minutes_and_the_memory_reader_against_each(long_inputs, tmp_path):
    roots = {r: tmp_path / f"text_real_budget_long_{r}" for r in long_inputs.READERS}
    values = {"minilm-128": (40.0, 44.0), "minilm-512": (45.0, 47.0), "rmt-minilm-64": (48.0, 50.0)}
    for reader, (a, b) in values.items():
        make_run(roots[reader] / "replay_i_s0", "replay", "i", 0, a)
        make_run(roots[reader] / "replay_ii_s0", "replay", "ii", 0, b)
        make_run(roots[reader] / "seq_i_s0", "seq", "i", 0, 1.0)  # another strategy: left out
    text = long_inputs.table(roots, "replay")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if "| 2 |" in line}
    assert set(rows) == set(values)
    assert rows["minilm-128"].startswith("| minilm-128 | 42.0 [")
    assert rows["rmt-minilm-64"].rstrip().endswith("| 0.0 | 2 |")  # make_run: 1.5 s a run
    assert "replay (rmt-minilm-64) − replay (minilm-128) = +7.0 points" in text
    assert "replay (rmt-minilm-64) − replay (minilm-512) = +3.0 points" in text
    assert "seq" not in text


def test_unknown_readers_are_refused_before_anything_runs(long_inputs, capsys):
    with pytest.raises(SystemExit):
        long_inputs.main(["--readers", "minilm-128,bert-2048"])
    assert "unknown 'bert-2048'" in capsys.readouterr().err


def test_the_retrospective_feed_readers_differ_from_each_other_only_in_passes(budget, long_inputs):
    budget = budget.with_grid(["mtl"], ["i"], [0])
    configs = {
        reader: next(iter(long_inputs.reading(budget, reader, "mtl").points())).config
        for reader in ("ernie-doc-32", "ernie-doc-32-once", "transformer-xl-32")
    }
    twice, once, xl = configs.values()
    assert (twice.encoder.name, twice.encoder.segment_length, twice.task.max_length) + (
        twice.training.lr,
    ) == (
        "ernie-doc",
        32,
        256,
        1e-3,
    )
    passes = (twice.encoder.document_passes, once.encoder.document_passes)
    assert passes == (None, 1)  # None: the design's 2
    assert once.replace(document_passes=None, log_group=twice.tracking.log_group) == twice
    assert xl.replace(encoder="ernie-doc", log_group=twice.tracking.log_group) == twice
    assert long_inputs.DEFAULT_READERS == ("minilm-128", "minilm-512", "rmt-minilm-64")


def test_the_feed_and_the_recurrence_are_each_a_printed_pair(long_inputs, tmp_path):
    values = {"ernie-doc-32": 30.0, "ernie-doc-32-once": 27.0, "transformer-xl-32": 26.0}
    roots = {r: tmp_path / f"text_real_budget_long_{r}" for r in values}
    for reader, accuracy in values.items():
        make_run(roots[reader] / "mtl_i_s0", "mtl", "i", 0, accuracy)
    text = long_inputs.table(roots, "mtl")
    assert "mtl (ernie-doc-32) − mtl (ernie-doc-32-once) = +3.0 points" in text
    assert "mtl (ernie-doc-32-once) − mtl (transformer-xl-32) = +1.0 points" in text
    assert "mtl (ernie-doc-32) − mtl (transformer-xl-32) = +4.0 points" in text
    assert "rmt-minilm-64" not in text
