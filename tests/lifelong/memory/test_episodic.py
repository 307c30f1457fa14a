import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifelong.memory import (
    EpisodicMemory,
    MemoryFileError,
    RandomWrite,
    ReservoirWrite,
)
from tests.conftest import write


def rows(n, rng, vocab=1000):
    return [rng.integers(1, vocab, size=rng.integers(3, 12)).astype(np.int32) for _ in range(n)]


def filled(n=50, d=8, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    memory = EpisodicMemory(d, seed=seed, **kwargs)
    tokens = rows(n, rng)
    labels = rng.integers(0, 5, size=n)
    keys = rng.normal(size=(n, d)).astype(np.float32)
    write(memory, tokens, labels, keys)
    return memory, tokens, labels, keys


def test_write_and_get_round_trip_values():
    memory, tokens, labels, keys = filled()
    assert len(memory) == 50
    items = memory.get(np.array([3, 17]))
    assert [t.tolist() for t in items.examples["tokens"]] == [
        tokens[3].tolist(),
        tokens[17].tolist(),
    ]
    assert [int(y[0]) for y in items.examples["label"]] == [labels[3], labels[17]]
    np.testing.assert_array_equal(memory.keys[17], keys[17])


def test_nearest_matches_brute_force():
    memory, _, _, keys = filled(n=200, d=16)
    queries = np.random.default_rng(1).normal(size=(7, 16)).astype(np.float32)
    distances, slots = memory.nearest(queries, k=5)
    brute = ((queries[:, None, :] - keys[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(slots, np.argsort(brute, axis=1)[:, :5])
    np.testing.assert_allclose(distances, np.sort(brute, axis=1)[:, :5], rtol=1e-4)


def test_nearest_sees_later_writes_and_overwrites():
    memory = EpisodicMemory(2, policy=ReservoirWrite(capacity=3), seed=0)
    write(memory, [np.array([1])] * 3, np.zeros(3), np.array([[0, 0], [10, 0], [20, 0]]))
    assert memory.nearest(np.array([[19.0, 0.0]]), 1)[1][0, 0] == 2
    # Force an overwrite of every slot with far-away keys; the index must follow.
    for _ in range(50):
        write(memory, [np.array([2])], np.ones(1), np.array([[100.0, 100.0]]))
    assert len(memory) == 3
    distances, slots = memory.nearest(np.array([[100.0, 100.0]]), 3)
    stored = memory.keys[slots[0]]
    np.testing.assert_allclose(distances[0], ((stored - [100, 100]) ** 2).sum(-1))


def test_keys_computed_only_for_written_examples():
    asked = []

    def keys(chosen):
        asked.append(chosen.copy())
        return np.zeros((len(chosen), 4), np.float32)

    memory = EpisodicMemory(4, policy=RandomWrite(0.2), seed=3)
    slots = write(memory, rows(100, np.random.default_rng(0)), np.zeros(100), keys)
    assert len(asked) == 1 and len(asked[0]) == len(slots) == len(memory) < 100


def test_sample_is_distinct_and_in_range():
    memory, *_ = filled(n=30)
    items = memory.sample(10)
    assert len(set(items.slots.tolist())) == 10 and items.slots.max() < 30
    assert len(memory.sample(100).slots) == 30


def test_empty_memory_errors():
    memory = EpisodicMemory(4)
    with pytest.raises(ValueError, match="empty"):
        memory.sample(1)
    with pytest.raises(ValueError, match="empty"):
        memory.nearest(np.zeros((1, 4)), 1)


def test_wrong_key_shape_is_rejected():
    memory = EpisodicMemory(4)
    with pytest.raises(ValueError, match=r"shape \(2, 4\)"):
        write(memory, rows(2, np.random.default_rng(0)), np.zeros(2), np.zeros((2, 3)))


def test_save_load_round_trip(tmp_path):
    memory, tokens, labels, keys = filled(policy=ReservoirWrite(capacity=80))
    path = tmp_path / "memory.npz"
    memory.save(path)
    loaded = EpisodicMemory.load(path, key_dim=8)
    assert len(loaded) == 50
    assert loaded.policy.state() == memory.policy.state()
    np.testing.assert_array_equal(loaded.keys, memory.keys)
    for s in (0, 25, 49):
        assert loaded.get(np.array([s])).examples["tokens"][0].tolist() == tokens[s].tolist()
    # The generator state travels too: both draw the same sample next.
    assert loaded.sample(5).slots.tolist() == memory.sample(5).slots.tolist()
    q = np.random.default_rng(2).normal(size=(3, 8)).astype(np.float32)
    np.testing.assert_array_equal(loaded.nearest(q, 4)[1], memory.nearest(q, 4)[1])


def test_save_leaves_no_temporary_files(tmp_path):
    memory, *_ = filled()
    memory.save(tmp_path / "m.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_truncated_file_is_a_clear_error(tmp_path):
    memory, *_ = filled()
    path = tmp_path / "memory.npz"
    memory.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MemoryFileError, match="truncated or corrupt"):
        EpisodicMemory.load(path)


def test_mismatched_key_width_is_a_clear_error(tmp_path):
    memory, *_ = filled(d=8)
    path = tmp_path / "memory.npz"
    memory.save(path)
    with pytest.raises(MemoryFileError, match="width 8, expected 384"):
        EpisodicMemory.load(path, key_dim=384)


def test_other_npz_or_version_is_rejected(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, x=np.zeros(3))
    with pytest.raises(MemoryFileError, match="not a lifelong memory file"):
        EpisodicMemory.load(path)
    with pytest.raises(MemoryFileError, match="no such memory file"):
        EpisodicMemory.load(tmp_path / "missing.npz")


def test_other_version_is_rejected(tmp_path):
    import io
    import json

    memory, *_ = filled()
    with np.load(io.BytesIO(memory.to_bytes())) as archive:
        arrays = {k: archive[k] for k in archive.files}
    header = json.loads(arrays["header"].tobytes())
    header["version"] = 99
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    path = tmp_path / "future.npz"
    np.savez(path, **arrays)
    with pytest.raises(MemoryFileError, match="version 99, this lifelong reads 2"):
        EpisodicMemory.load(path)


@settings(max_examples=40, deadline=None)
@given(
    capacity=st.integers(1, 12),
    batches=st.lists(
        st.lists(st.lists(st.integers(1, 500), min_size=1, max_size=9), min_size=1, max_size=6),
        min_size=1,
        max_size=8,
    ),
)
def test_memory_holds_exactly_what_its_plans_wrote(capacity, batches):
    """Model-based: a dict of slot -> (tokens, label, key) mirrors every write."""
    memory = EpisodicMemory(3, policy=ReservoirWrite(capacity), seed=1)
    mirror = {}
    counter = 0
    for rows in batches:
        tokens = [np.array(r, dtype=np.int32) for r in rows]
        labels = np.arange(counter, counter + len(rows))
        keys = np.tile(labels[:, None], (1, 3)).astype(np.float32)
        slots = write(memory, tokens, labels, keys)
        for slot in slots:
            # the label identifies which incoming row went to this slot
            (row,) = [
                i
                for i in range(len(rows))
                if labels[i] == memory.get([slot]).examples["label"][0][0]
            ]
            mirror[int(slot)] = (rows[row], int(labels[row]))
        counter += len(rows)
        assert len(memory) == len(mirror) <= capacity
    items = memory.get(np.arange(len(memory)))
    for slot, (row, label) in mirror.items():
        assert items.examples["tokens"][slot].tolist() == row
        assert items.examples["label"][slot][0] == label
        assert memory.keys[slot].tolist() == [label] * 3
    distances, nearest = memory.nearest(memory.keys.copy(), 1)
    assert np.allclose(distances[:, 0], 0)


def test_a_memory_without_keys_is_written_sampled_and_saved_but_not_searched(tmp_path):
    rng = np.random.default_rng(0)
    memory = EpisodicMemory(0, seed=0)
    tokens, labels = rows(20, rng), rng.integers(0, 5, size=20)
    slots = write(memory, tokens, labels, None)
    assert len(memory) == 20 and not memory.keyed and slots.tolist() == list(range(20))
    assert len(memory.sample(5)) == 5
    with pytest.raises(ValueError, match="stores no keys"):
        memory.nearest(np.zeros((1, 0), np.float32), 1)
    memory.save(tmp_path / "m.npz")
    loaded = EpisodicMemory.load(tmp_path / "m.npz", key_dim=0)
    assert len(loaded) == 20 and loaded.get(np.array([7])).examples["tokens"][0].tolist() == (
        tokens[7].tolist()
    )


def test_a_keyed_memory_refuses_a_write_without_keys_and_diversity_needs_keys():
    from lifelong.memory import DiversityWrite

    with pytest.raises(ValueError, match="needs keys"):
        write(EpisodicMemory(4), rows(2, np.random.default_rng(0)), [0, 1], None)
    with pytest.raises(ValueError, match="decides by the keys"):
        EpisodicMemory(0, policy=DiversityWrite(rate=0.5))


def test_a_keyed_checkpoint_loads_into_a_memory_without_keys():
    """A checkpoint of a version whose REPLAY keyed its memory resumes: the keys are dropped."""
    keyed, tokens, _, _ = filled(n=10, d=8)
    unkeyed = EpisodicMemory(0)
    unkeyed.load_state_dict(keyed.state_dict())
    assert len(unkeyed) == 10 and not unkeyed.keyed and unkeyed.keys.shape == (10, 0)
    assert unkeyed.get(np.array([3])).examples["tokens"][0].tolist() == tokens[3].tolist()
