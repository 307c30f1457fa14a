"""``index: auto``: exact while small, a recall-checked IVF when large; overridable, logged."""

import logging

import numpy as np
import pytest
import torch

from lifelong.experiment.config import ConfigError, from_dict
from lifelong.mechanisms.replay import episodic_writer
from lifelong.memory import EpisodicMemory, ReservoirWrite
from lifelong.memory import search as search_module
from lifelong.memory.search import TorchFlatIndex, TorchIVFIndex, check_index, probe_schedule
from lifelong.strategy import StrategyContext
from tests.conftest import tiny_classifier, write

LOG = "lifelong.memory.episodic"


def clustered(n, d=16, centers=64, seed=0, spread=0.05):
    """Keys in ``centers`` tight clusters, as real keys cluster by domain and topic.

    The clusters are the same whatever ``seed`` (which draws the keys), so that queries drawn
    with another seed come from the stored keys' distribution, as test examples do.
    """
    middle = np.random.default_rng(1234).normal(size=(centers, d))
    rng = np.random.default_rng(seed)
    return (middle[rng.integers(centers, size=n)] + spread * rng.normal(size=(n, d))).astype(
        np.float32
    )


def fill(memory, keys):
    write(memory, [np.array([1], dtype=np.int32)] * len(keys), np.zeros(len(keys)), keys)


def brute_force(keys, queries, k):
    d2 = ((queries[:, None, :] - keys[None]) ** 2).sum(-1)
    return np.argsort(d2, axis=1, kind="stable")[:, :k]


def recall(found, exact):
    return np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)])


@pytest.fixture
def small_threshold(monkeypatch):
    """IVF from 1,000 keys (instead of the measured threshold), so tests stay tiny."""
    monkeypatch.setattr(search_module, "APPROXIMATE_FROM", 1_000)


def test_auto_is_the_default_and_searches_exactly_while_small(caplog):
    keys = clustered(500)
    memory = EpisodicMemory(16)
    fill(memory, keys)
    queries = clustered(20, seed=1)
    with caplog.at_level(logging.INFO, logger=LOG):
        slots = memory.nearest(queries, 8)[1]
    assert memory.index_spec == "auto" and memory.index_choice.describe() == "torch exact"
    np.testing.assert_array_equal(slots, brute_force(keys, queries, 8))
    assert "episodic memory search: auto -> torch exact (size 500)" in caplog.messages


def test_auto_switches_to_a_checked_ivf_as_the_memory_grows(small_threshold, caplog):
    keys = clustered(4_000)
    memory = EpisodicMemory(16)
    fill(memory, keys[:800])
    queries = clustered(200, seed=1)
    with caplog.at_level(logging.INFO, logger=LOG):
        memory.nearest(queries, 32)
        assert memory.index_choice.exact
        fill(memory, keys[800:1_500])  # grown less than twice: the same exact search
        memory.nearest(queries, 32)
        assert memory.index_choice.exact
        fill(memory, keys[1_500:])  # grown past twice the size it chose for: chooses again
        found = memory.nearest(queries, 32)[1]
    choice = memory.index_choice
    assert choice.spec == "IVF64,Flat" and choice.backend == "torch"
    assert choice.nprobe in probe_schedule(64) and choice.recall >= 0.95
    assert recall(found, brute_force(keys, queries, 32)) >= 0.95
    switches = [m for m in caplog.messages if m.startswith("episodic memory search: auto ->")]
    assert len(switches) == 2  # once per change, not once per search
    assert switches[1].startswith(
        f"episodic memory search: auto -> torch IVF64,Flat, nprobe {choice.nprobe}"
    )
    assert switches[1].endswith("(size 4,000)")


def test_auto_searches_exactly_where_no_ivf_setting_reaches_the_recall(
    small_threshold, monkeypatch, caplog
):
    monkeypatch.setattr(search_module, "probe_schedule", lambda lists: (1,))  # one list: poor
    keys = clustered(4_000)
    memory = EpisodicMemory(16)
    fill(memory, keys)
    queries = clustered(20, seed=1)
    with caplog.at_level(logging.INFO, logger=LOG):
        slots = memory.nearest(queries, 8)[1]
    assert memory.index_choice.describe() == "torch exact"
    np.testing.assert_array_equal(slots, brute_force(keys, queries, 8))
    assert any("below recall@32 0.95" in m for m in caplog.messages)


def test_the_faiss_backend_makes_the_same_choices_with_faiss_indexes(small_threshold):
    pytest.importorskip("faiss")
    keys = clustered(4_000)
    memory = EpisodicMemory(16, backend="faiss")
    fill(memory, keys)
    queries = clustered(100, seed=1)
    found = memory.nearest(queries, 32)[1]
    assert memory.index_choice.describe().startswith("FAISS IVF64,Flat, nprobe")
    assert recall(found, brute_force(keys, queries, 32)) >= 0.95


@pytest.mark.parametrize(
    ("index", "backend", "described"),
    [
        ("torch", "auto", "torch exact"),
        ("Flat", "auto", "FAISS Flat (exact)"),
        ("Flat", "torch", "torch exact"),
        ("IVF8,Flat", "torch", "torch IVF8,Flat"),
        ("IVF8,Flat", "auto", "FAISS IVF8,Flat"),
        ("HNSW32", "auto", "FAISS HNSW32"),
    ],
)
def test_any_index_can_be_asked_for_instead(index, backend, described):
    if index != "torch" and backend != "torch":
        pytest.importorskip("faiss")
    keys = clustered(600)
    memory = EpisodicMemory(16, index=index, backend=backend)
    fill(memory, keys)
    found = memory.nearest(keys[:10], 4)[1]
    assert memory.index_choice.describe() == described
    assert found[:, 0].tolist() == list(range(10))  # a stored key is its own nearest


def test_bad_index_values_are_clear_errors(monkeypatch):
    for good in ("auto", "torch", "Flat"):
        check_index(good)
    with pytest.raises(ValueError, match="'IVF': not a FAISS index_factory string"):
        EpisodicMemory(8, index="IVF")
    with pytest.raises(ConfigError, match="key 'memory_index': index 'bogus'"):
        from_dict({"memory_index": "bogus"})
    assert from_dict({"memory_index": "IVF256,Flat"}).training.memory_index == "IVF256,Flat"
    monkeypatch.setattr(search_module, "faiss_installed", lambda: False)
    with pytest.raises(ValueError, match="'HNSW32' needs FAISS, which is not installed"):
        check_index("HNSW32")


def test_the_run_configs_memory_index_reaches_the_writers_memory(task):
    context = StrategyContext(tiny_classifier(kind=task), task, memory_index="torch")
    assert episodic_writer(context).memory.index_spec == "torch"
    assert episodic_writer(StrategyContext(tiny_classifier(kind=task), task)).memory.index_spec == (
        "auto"
    )
    assert from_dict({}).training.memory_index == "auto"


def test_the_memory_index_flag_sets_the_config_key():
    from lifelong.experiment.cli import build_parser, config_from_args

    args = build_parser().parse_args(["run", "--memory-index", "IVF1024,Flat"])
    assert config_from_args(args).training.memory_index == "IVF1024,Flat"
    args = build_parser().parse_args(["run", "--memory-index", "Bogus"])
    with pytest.raises(ConfigError, match="key 'memory_index'"):
        config_from_args(args)


def test_torch_ivf_probing_every_list_is_exact_search():
    keys, queries = clustered(3_000, d=24), clustered(64, d=24, seed=1)
    flat = TorchFlatIndex(24, "cpu")
    ivf = TorchIVFIndex(24, 16, "cpu", nprobe=16)
    ivf.train(keys)
    for index in (flat, ivf):
        index.add(keys[:2_950])
        index.add(keys[2_950:])  # a few keys: they wait in the tail, searched exactly
    assert ivf.ntotal == 3_000 and len(ivf._tail) == 50
    d_flat, i_flat = flat.search(queries, 32)
    d_ivf, i_ivf = ivf.search(queries, 32)
    np.testing.assert_array_equal(i_ivf, i_flat)
    np.testing.assert_allclose(d_ivf, d_flat, rtol=1e-4, atol=1e-4)
    ivf.nprobe = 2  # fewer lists: true distances of the keys found, fewer of the nearest
    d_few, i_few = ivf.search(queries, 32)
    found = i_few >= 0
    true = ((queries[:, None, :] - keys[np.where(found, i_few, 0)]) ** 2).sum(-1)
    np.testing.assert_allclose(d_few[found], true[found], rtol=1e-3, atol=1e-3)


def test_an_ivf_index_keeps_its_training_when_slots_are_overwritten():
    memory = EpisodicMemory(
        16, policy=ReservoirWrite(capacity=400), index="IVF4,Flat", backend="torch"
    )
    fill(memory, clustered(400))
    memory.nearest(clustered(4, seed=1), 4)
    centroids = memory._index.centroids
    memory._index.nprobe = 4  # every list: exact
    for seed in range(2, 6):
        fill(memory, clustered(100, seed=seed))  # the reservoir overwrites some slots
    queries = clustered(20, seed=9)
    slots = memory.nearest(queries, 8)[1]
    assert memory._index.centroids is centroids and memory._index.ntotal == 400
    np.testing.assert_array_equal(slots, brute_force(memory.keys, queries, 8))


def test_saved_memories_keep_their_index_setting_and_search_the_same(small_threshold, tmp_path):
    keys, queries = clustered(4_000), clustered(50, seed=1)
    memory = EpisodicMemory(16)
    fill(memory, keys)
    before = memory.nearest(queries, 32)
    memory.save(tmp_path / "auto.npz")
    again = EpisodicMemory.load(tmp_path / "auto.npz")
    assert again.index_spec == "auto"
    after = again.nearest(queries, 32)
    np.testing.assert_array_equal(after[1], before[1])  # the same seeded IVF, the same nprobe
    assert again.index_choice == memory.index_choice


def test_an_old_flat_checkpoint_loads_and_a_restored_memory_keeps_its_own_setting(tmp_path):
    pytest.importorskip("faiss")
    keys, queries = clustered(300), clustered(10, seed=1)
    old = EpisodicMemory(16, index="Flat")  # what every checkpoint said before auto
    fill(old, keys)
    old.save(tmp_path / "flat.npz")
    loaded = EpisodicMemory.load(tmp_path / "flat.npz")
    assert loaded.index_spec == "Flat" and loaded.backend == "faiss"
    np.testing.assert_array_equal(loaded.nearest(queries, 5)[1], brute_force(keys, queries, 5))
    restored = EpisodicMemory(16, index="torch")  # the run's config decides, not the file
    restored.load_state_dict(old.state_dict())
    assert restored.index_spec == "torch" and restored.backend == "torch"
    np.testing.assert_array_equal(restored.nearest(queries, 5)[1], brute_force(keys, queries, 5))
    assert isinstance(restored._index, TorchFlatIndex)


@pytest.mark.cuda
def test_auto_searches_exactly_on_cuda_at_any_size(small_threshold):
    memory = EpisodicMemory(16, device="cuda")
    fill(memory, clustered(4_000))
    memory.nearest(clustered(5, seed=1), 4)
    assert memory.index_choice.exact
    assert torch.device(memory.device).type == "cuda"


class _Returns:
    """An "index" returning fixed squared distances and slots (a stand-in approximate search)."""

    def __init__(self, distances, slots):
        self.distances, self.slots = np.asarray(distances, np.float32), np.asarray(slots)

    def search(self, queries, k):
        return self.distances[:, :k], self.slots[:, :k]


def test_the_recall_check_counts_a_tied_neighbour_as_found():
    # keys 1, 2 and 3 are the same vector: exact search of key 0 may return any two of them
    keys = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [5.0, 0.0]], np.float32)
    ids = np.array([0])
    exact = search_module.exact_neighbours(keys, ids, 3)
    assert exact[1][0, 0] == 0 and exact[0][0, 2] == pytest.approx(1.0)
    other_tie = _Returns([[0.0, 1.0, 1.0]], [[0, 3, 2]])  # not the exact slots, as near
    recall_, _ = search_module.sampled_recall(other_tie, keys, ids, exact, k=2)
    assert recall_ == 1.0
    farther = _Returns([[0.0, 1.0, 25.0]], [[0, 3, 4]])  # the far key 4 is a miss
    assert search_module.sampled_recall(farther, keys, ids, exact, k=2)[0] == 0.5
    without_self = _Returns([[1.0, 1.0, 25.0]], [[1, 2, 4]])  # own slot missing: first k others
    assert search_module.sampled_recall(without_self, keys, ids, exact, k=2)[0] == 1.0


def test_auto_uses_an_ivf_index_over_repeated_keys(small_threshold):
    # 150 keys 20 times each: of a key's 32 nearest, 12 are a pick among 20 equal copies, and
    # counted by slots no IVF setting matched an exact search's pick (recall about 0.9)
    keys = np.repeat(clustered(150, seed=2), 20, axis=0)
    keys = keys[np.random.default_rng(0).permutation(len(keys))]
    memory = EpisodicMemory(16)
    fill(memory, keys)
    queries = keys[:20] + np.float32(0.01) * np.random.default_rng(1).normal(size=(20, 16))
    distances = memory.nearest(queries.astype(np.float32), 32)[0]
    assert memory.index_choice.spec.startswith("IVF") and memory.index_choice.recall >= 0.95
    exact = ((queries[:, None] - keys[None]) ** 2).sum(-1)  # the same distances as exact search
    np.testing.assert_allclose(distances, np.sort(exact, 1)[:, :32], rtol=1e-3, atol=1e-4)


def test_the_recall_check_queries_keys_the_index_was_not_trained_on():
    rng = np.random.default_rng(0)
    trained = np.sort(rng.choice(5_000, 1_000, replace=False))
    choose, confirm = search_module.check_ids(5_000, trained, np.random.default_rng(1))
    assert len(choose) == len(confirm) == search_module.CHECK_QUERIES
    assert not set(choose) & set(confirm)  # the choice is confirmed on other keys
    assert not (set(choose) | set(confirm)) & set(trained)
    few, same = search_module.check_ids(300, np.arange(100), np.random.default_rng(1))
    assert np.array_equal(few, same) and len(few) == 200  # too few for two: both use all left


def test_an_auto_ivf_reaches_the_recall_target_on_fresh_queries(small_threshold):
    keys = clustered(6_000, seed=3, spread=1.0)  # overlapping clusters: IVF misses some
    memory = EpisodicMemory(16)
    fill(memory, keys)
    fresh = clustered(300, seed=4, spread=1.0)  # not stored: the queries a run serves
    memory.nearest(fresh[:1], 32)
    choice = memory.index_choice
    assert choice.spec.startswith("IVF") and choice.recall >= 0.95
    recall_, error = memory.recall(fresh, 32)
    found = memory.nearest(fresh, 32)[1]
    by_slots = recall(found, brute_force(keys, fresh, 32))  # a near-tie is found by distance
    assert by_slots <= recall_ <= by_slots + 0.01
    assert 0.95 <= recall_ < 1.0 and 0 < error < 0.01


def test_query_recall_is_one_for_exact_search_and_counts_misses_otherwise():
    keys = clustered(2_000, seed=5)
    queries = clustered(50, seed=6)
    exact = TorchFlatIndex(16, "cpu")
    exact.add(keys)
    assert search_module.query_recall(exact, keys, queries, 16) == (1.0, 0.0)
    ivf = TorchIVFIndex(16, 64, "cpu")
    ivf.train(keys)
    ivf.add(keys)
    ivf.nprobe = 1
    measured, _ = search_module.query_recall(ivf, keys, queries, 16)
    by_slots = recall(ivf.search(queries, 16)[1], brute_force(keys, queries, 16))
    assert measured == pytest.approx(by_slots, abs=1e-9) and measured < 1.0
