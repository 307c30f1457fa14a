"""The long-range recall task: layout, labels, chance, the curriculum and the experiment script."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lifelong.lm.recall import RecallGenerator, RecallTask
from lifelong.lm.sorting import IGNORE

SCRIPT = Path(__file__).resolve().parents[3] / "experiments" / "lm" / "recall_table.py"


def test_the_facts_open_the_first_segment_and_the_question_closes_the_last():
    task = RecallTask(facts=3, keys=8, values=16, noise=16)
    batch = RecallGenerator(task, segments=3, segment_length=12, seed=0).batch(64)
    ids, labels = batch.input_ids.numpy(), batch.labels.numpy()
    assert ids.shape == (64, 36) and task.vocab_size == 41 and task.chance == 1 / 16
    keys, values = ids[:, 0:6:2], ids[:, 1:6:2]
    assert ((keys >= 16) & (keys < 24)).all() and ((values >= 24) & (values < 40)).all()
    assert all(len(set(row)) == 3 for row in keys)  # distinct keys
    assert (ids[:, 6:-3] < 16).all()  # noise in between, in every segment after the facts
    assert (ids[:, -3] == task.query).all()
    for row in range(64):  # the answer is the value stored with the asked key
        asked = list(keys[row]).index(ids[row, -2])
        assert ids[row, -1] == values[row, asked]
    assert (labels[:, -2] == ids[:, -1]).all() and (np.delete(labels, -2, axis=1) == IGNORE).all()


def test_curriculum_sets_the_number_of_segments_per_step_and_seeds_repeat():
    task = RecallTask()
    data = RecallGenerator(task, 4, 16, curriculum=lambda step: 1 + step)
    assert data.batch(2, step=0).input_ids.shape == (2, 16)
    assert data.batch(2, step=2).input_ids.shape == (2, 48)
    assert data.batch(2).input_ids.shape == (2, 64)  # evaluation: every segment
    a = RecallGenerator(task, 2, 16, seed=3).batch(4).input_ids
    assert torch.equal(a, RecallGenerator(task, 2, 16, seed=3).batch(4).input_ids)
    with pytest.raises(ValueError, match="cannot hold"):
        RecallGenerator(task, 2, 8)
    with pytest.raises(ValueError, match="facts"):
        RecallTask(facts=9, keys=8)


def test_script_trains_and_prints_chance(capsys):
    spec = importlib.util.spec_from_file_location("recall_experiment", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    sys.modules["recall_experiment"] = script
    spec.loader.exec_module(script)
    results = script.main(
        ["--modules", "transformer", "rmt", "full-attention", "--segments", "2",
         "--steps", "3", "--jobs", "1", "--eval-examples", "8", "--segment-length", "12"]
    )  # fmt: skip
    assert set(results) == {(2, "transformer"), (2, "rmt"), (2, "full-attention")}
    out = capsys.readouterr().out
    assert "chance 6.25%" in out and "| Segments | transformer | rmt | full-attention |" in out
