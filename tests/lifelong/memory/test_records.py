import numpy as np
import pytest

from lifelong.memory import EpisodicMemory
from lifelong.memory.records import ExampleRecords, RaggedStore


def test_records_select_and_keep_fields():
    records = ExampleRecords.build(tokens=[[1, 2], [3], [4, 5, 6]], label=[[0], [1], [2]])
    assert len(records) == 3 and records.names == ("tokens", "label")
    picked = records.select([2, 0])
    assert [r.tolist() for r in picked["tokens"]] == [[4, 5, 6], [1, 2]]
    assert picked.only(["label"]).names == ("label",)
    assert all(a.dtype == np.int32 for a in records["tokens"])
    with pytest.raises(KeyError, match="no field 'answer'"):
        records["answer"]
    with pytest.raises(ValueError, match="different numbers of examples"):
        ExampleRecords.build(tokens=[[1]], label=[[0], [1]])


def test_ragged_store_overwrites_and_compacts_without_losing_a_slot():
    rng = np.random.default_rng(0)
    store, mirror = RaggedStore(), {}
    store.put(np.arange(10), [np.full(5, i, np.int32) for i in range(10)])
    mirror.update({i: [i] * 5 for i in range(10)})
    for _ in range(3000):  # overwrites leave garbage; compaction must keep the live rows
        slot = int(rng.integers(10))
        row = rng.integers(0, 100, size=int(rng.integers(1, 9))).astype(np.int32)
        store.put(np.array([slot]), [row])
        mirror[slot] = row.tolist()
    assert store.used <= 2 * int(store.length.sum()) + 1024  # garbage was compacted away
    assert [r.tolist() for r in store.get(range(10))] == [mirror[i] for i in range(10)]
    flat, lengths = store.flat(), store.length.copy()
    again = RaggedStore.from_flat(flat, lengths)
    assert [r.tolist() for r in again.get(range(10))] == [mirror[i] for i in range(10)]


def test_fixed_width_fields_read_as_one_array_in_the_slots_shape():
    memory = EpisodicMemory(2)
    memory.write(ExampleRecords.build(token=[[5], [6], [7]], pair=[[1, 2], [3, 4], [5, 6]]),
                 np.eye(3, 2, dtype=np.float32))  # fmt: skip
    assert memory.get_array("token", np.array([[2, 0], [1, 1]]))[..., 0].tolist() == [
        [7, 5],
        [6, 6],
    ]
    assert memory.get_array("pair", np.array([1])).tolist() == [[3, 4]]
    with pytest.raises(IndexError, match=r"slots must be in \[0, 3\)"):
        memory.get_array("token", np.array([3]))
    with pytest.raises(KeyError, match="no field 'label'"):
        memory.get_array("label", np.array([0]))
    ragged = RaggedStore()
    ragged.put(np.array([0, 1]), [np.array([1]), np.array([1, 2])])
    with pytest.raises(ValueError, match="one length"):
        ragged.get_array(np.array([0, 1]))


def test_a_slot_written_twice_in_one_put_keeps_the_last_row():
    store = RaggedStore()
    store.put(np.array([0, 1, 0]), [np.array([1]), np.array([2, 3]), np.array([4, 5, 6])])
    assert [a.tolist() for a in store.get([0, 1])] == [[4, 5, 6], [2, 3]]
