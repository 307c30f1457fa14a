"""`lifelong.serialization.load_data`: a ``torch.save`` file is read as data or refused."""

import io
import os
import pickle
import random

import numpy as np
import pytest
import torch

from lifelong.batch import Batch
from lifelong.memory.records import ExampleRecords
from lifelong.serialization import UnreadableFileError, UnsafeFileError, load_data


class CreatesAFile:
    """Unpickling this calls ``open(path, "w")``: a planted file's way to act when read."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


class RunsAShell:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("payload", [CreatesAFile, RunsAShell], ids=["open", "os.system"])
@pytest.mark.parametrize("form", ["torch.save", "pickle-2", "pickle-4"])
def test_a_file_that_would_run_code_is_refused_and_runs_nothing(tmp_path, payload, form):
    marker = tmp_path / "created"
    planted = {"version": 1, "strategy": payload(marker)}
    if form == "torch.save":
        data = saved(planted)
    else:
        data = pickle.dumps(planted, protocol=int(form[-1]))
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(data)
    with pytest.raises(UnsafeFileError) as err:
        load_data(path, what="checkpoint")
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message and "refused" in message
    assert ("open" if payload is CreatesAFile else "system") in message
    assert not marker.exists()


def test_data_round_trips_exactly(tmp_path):
    records = ExampleRecords.build(input_ids=[[1, 2, 3], [4]], label=[[0], [1]])
    batch = Batch(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3), torch.tensor([0, 1]))
    batch = Batch(batch.input_ids, batch.attention_mask, batch.labels, examples=records)
    rng = np.random.default_rng(3)
    state = {
        "weights": {"w": torch.randn(3, 2)},
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "generator": rng.bit_generator.state,
        "array": np.arange(5, dtype=np.uint32),
        "scalar": np.float64(2.5),
        "pending": [batch],
        "bytes": b"\x00\x01",
        "nested": [(1, 2.0, "three", None, True)],
    }
    back = load_data(saved(state), what="checkpoint")
    assert torch.equal(back["weights"]["w"], state["weights"]["w"])
    assert back["python"] == state["python"]
    assert back["numpy"][0] == "MT19937"
    np.testing.assert_array_equal(back["numpy"][1], state["numpy"][1])
    assert back["generator"] == state["generator"]
    np.testing.assert_array_equal(back["array"], state["array"])
    assert back["array"].dtype == np.uint32 and back["scalar"] == 2.5
    (pending,) = back["pending"]
    assert isinstance(pending, Batch) and torch.equal(pending.labels, batch.labels)
    assert [list(r) for r in pending.examples["input_ids"]] == [[1, 2, 3], [4]]
    assert back["bytes"] == b"\x00\x01" and back["nested"] == state["nested"]


@pytest.mark.parametrize("data", [b"", b"not a checkpoint", saved({"a": 1})[:40]])
def test_a_truncated_or_foreign_file_is_unreadable_in_one_line(tmp_path, data):
    path = tmp_path / "state.pt"
    path.write_bytes(data)
    with pytest.raises(UnreadableFileError) as err:
        load_data(path, what="checkpoint")
    assert str(path) in str(err.value) and "\n" not in str(err.value)
