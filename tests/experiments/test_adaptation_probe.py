"""The adaptation probe: a trained MbPA++ read without, with and with oracle adaptation."""

import numpy as np
import pytest

SWEEP = """
name: probe
run:
  stream: {name: fewrel, fewrel_tasks: 2, train_size: 2, test_size: 2}
  task: {max_length: 32, pair_loss: binary}
  encoder: {name: tiny}
  strategy:
    options:
      mbpa++: {replay_every: 8, replay_ratio: 0.25, adapt_scope: head, k: 4, steps: 2}
      mbpa: {adapt_scope: head, k: 4, steps: 2}
  training: {batch_size: 4, eval_batch_size: 8, lr: 1.0e-3, progress: false}
  tracking: {output_dir: OUT}
strategies: [mbpa++]
orders: ["0"]
seeds: [0]
"""


@pytest.fixture
def adaptation_probe(load_script):
    return load_script("adaptation_probe.py")


def test_slot_tasks_follow_the_stream_and_refuse_a_memory_that_dropped_examples(adaptation_probe):
    assert adaptation_probe.slot_tasks([2, 3], 5, 5, 5).tolist() == [0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="holds 4 of 5 offered"):
        adaptation_probe.slot_tasks([2, 3], 4, 4, 5)


def test_oracle_slots_hold_only_the_test_label_and_share_one_k(adaptation_probe):
    memory_labels = np.array([0, 1, 0, 2, 1, 0, 2])
    slots = adaptation_probe.oracle_slots(np.array([0, 2, 1]), memory_labels, 32, seed=0)
    assert slots.shape == (3, 2)  # K cut to the fewest memories a label has (2 and 1 twice)
    assert (memory_labels[slots] == np.array([[0], [2], [1]])).all()


@pytest.mark.parametrize("strategy", ["mbpa++", "mbpa"])
def test_the_as_run_column_is_the_learner_s_last_row(adaptation_probe, tmp_path, strategy):
    config = tmp_path / "probe.yaml"
    config.write_text(SWEEP.replace("OUT", str(tmp_path / "runs")))
    result = adaptation_probe.probe(config, None, "0", 0, strategy, ["top1"])
    names = result.predictors
    assert names == [
        "no adaptation",
        "as run (head)",
        "oracle: own label",
        "oracle: own task",
        "top1, nearest",
    ]
    assert [r.accuracy["as run (head)"] for r in result.rows] == pytest.approx(result.last_row)
    assert sum(r.test for r in result.rows) == 40  # 20 relations x 2 test sentences
    for row in result.rows:
        assert row.test > 0 and 0 <= row.same_label <= 100 and 0 <= row.same_task <= 100
    text = adaptation_probe.table(result)
    assert "| pooled | 40 |" in text and text.count("\n| ") == 1 + 2 + 2  # header, tasks, summaries
