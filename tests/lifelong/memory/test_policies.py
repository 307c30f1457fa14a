import numpy as np
import pytest

from lifelong.memory import EpisodicMemory
from lifelong.memory.policies import (
    DiversityWrite,
    RandomWrite,
    ReservoirWrite,
    WriteAll,
    make_policy,
    policy_from_state,
)
from tests.conftest import write


def test_write_all_appends_everything():
    plan = WriteAll().plan(5, 3, np.random.default_rng(0))
    assert plan.indices.tolist() == [0, 1, 2, 3, 4]
    assert plan.slots.tolist() == [3, 4, 5, 6, 7]


def test_random_write_rate_is_close_to_p():
    rng = np.random.default_rng(0)
    plan = RandomWrite(0.1).plan(20_000, 0, rng)
    assert 0.09 < len(plan.indices) / 20_000 < 0.11
    assert plan.slots.tolist() == list(range(len(plan.indices)))


def test_reservoir_never_exceeds_capacity_and_is_uniform():
    counts = np.zeros(100)
    for seed in range(300):
        policy, rng, stored = ReservoirWrite(10), np.random.default_rng(seed), {}
        for start in range(0, 100, 7):
            n = min(7, 100 - start)
            plan = policy.plan(n, len(stored), rng)
            for i, s in zip(plan.indices, plan.slots):
                assert s <= len(stored)
                stored[int(s)] = start + int(i)
            assert len(stored) <= 10
        for item in stored.values():
            counts[item] += 1
    # each of the 100 items is kept with probability 10/100: 300 runs -> ~30 each
    assert counts.sum() == 3000
    assert counts[:50].sum() == pytest.approx(1500, rel=0.1)


def test_policy_state_round_trip():
    policy = ReservoirWrite(5)
    policy.plan(12, 0, np.random.default_rng(0))
    again = policy_from_state(policy.state())
    assert again == policy


def test_bad_policy_options():
    with pytest.raises(ValueError, match="unknown write policy"):
        make_policy("sometimes")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        make_policy("random", p=1.5)
    with pytest.raises(ValueError, match="bad options"):
        make_policy("reservoir", size=3)


def _diversity_memory(rate: float = 1.0) -> EpisodicMemory:
    memory = EpisodicMemory(4, policy=DiversityWrite(rate=rate, beta=10.0), seed=0)
    write(memory, [np.array([1])], np.array([0]), np.zeros((1, 4), np.float32))  # rate 1: stored
    return memory


def test_diversity_writes_a_near_duplicate_less_often_than_a_far_example():
    writes = {"near": 0, "far": 0}
    keys = {"near": np.full((1, 4), 0.01, np.float32), "far": np.full((1, 4), 5.0, np.float32)}
    for trial in range(400):
        for kind in ("near", "far"):
            memory = _diversity_memory()
            memory.rng = np.random.default_rng(trial)
            slots = write(memory, [np.array([2])], np.array([1]), keys[kind])
            writes[kind] += len(slots)
    assert writes["near"] < 20 < 300 < writes["far"]
    policy = DiversityWrite(beta=10.0)
    assert policy.novelty(0.0) == 0.0 and policy.novelty(np.inf) == 1.0
    assert policy.novelty(1.0) < policy.novelty(50.0)


def test_diversity_keeps_about_the_target_rate_of_a_stream():
    rng = np.random.default_rng(0)
    memory = EpisodicMemory(8, policy=DiversityWrite(rate=0.05), seed=0)
    for _ in range(100):  # 4,000 examples from a few clusters
        centres = rng.integers(0, 5, size=40)
        keys = (centres[:, None] * 3.0 + rng.normal(size=(40, 8))).astype(np.float32)
        write(memory, [np.array([1])] * 40, np.zeros(40, np.int64), keys)
    assert memory.policy.seen == 4000
    assert 0.03 < memory.policy.write_rate < 0.07
    assert memory.policy.written == len(memory)


def test_diversity_compares_with_examples_chosen_earlier_in_the_batch():
    memory = EpisodicMemory(4, policy=DiversityWrite(rate=1.0, beta=1.0), seed=0)
    keys = np.zeros((50, 4), np.float32)  # 50 copies of one key offered at once
    slots = write(memory, [np.array([1])] * 50, np.zeros(50, np.int64), keys)
    assert len(slots) == 1  # the first is new; the other 49 duplicate it


def test_diversity_state_round_trips_through_a_memory_file(tmp_path):
    memory = _diversity_memory()
    write(memory, [np.array([3])] * 3, np.zeros(3, np.int64), np.eye(3, 4, dtype=np.float32) * 9)
    memory.save(tmp_path / "m.npz")
    again = EpisodicMemory.load(tmp_path / "m.npz")
    assert again.policy == memory.policy and again.policy.seen == 4
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        make_policy("diversity", rate=0.0)


def test_literal_diversity_rule_favours_near_duplicates_as_its_formula_says():
    # log p ∝ −d/β read literally (Wang et al., 2020): the nearer to memory, the likelier
    writes = {"near": 0, "far": 0}
    keys = {"near": np.full((1, 4), 0.01, np.float32), "far": np.full((1, 4), 5.0, np.float32)}
    for trial in range(400):
        for kind in ("near", "far"):
            policy = DiversityWrite(rate=1.0, beta=10.0, rule="literal")
            memory = EpisodicMemory(4, policy=policy, seed=0)
            # stored: an empty memory scores 1 (and the first example sets the running mean)
            write(memory, [np.array([1])], np.array([0]), np.zeros((1, 4), np.float32))
            memory.rng = np.random.default_rng(trial)
            slots = write(memory, [np.array([2])], np.array([1]), keys[kind])
            writes[kind] += len(slots)
    assert writes["far"] < 20 < 300 < writes["near"]
    literal, dissimilar = DiversityWrite(rule="literal"), DiversityWrite()
    assert literal.score(0.0) == 1.0 and literal.score(1.0) > literal.score(50.0)
    assert dissimilar.score(1.0) == dissimilar.novelty(1.0)
    assert literal.score(np.inf) == dissimilar.score(np.inf) == 1.0  # empty memory


def test_literal_diversity_rule_still_writes_into_an_empty_memory_and_round_trips(tmp_path):
    memory = EpisodicMemory(4, policy=DiversityWrite(rate=1.0, rule="literal"), seed=0)
    assert len(write(memory, [np.array([1])], np.array([0]), np.zeros((1, 4), np.float32))) == 1
    memory.save(tmp_path / "m.npz")
    again = EpisodicMemory.load(tmp_path / "m.npz")
    assert again.policy.rule == "literal" and again.policy == memory.policy
    old = {k: v for k, v in DiversityWrite().state().items() if k != "rule"}
    assert policy_from_state(old).rule == "dissimilar"  # states saved before the option
    with pytest.raises(ValueError, match="'dissimilar' or 'literal'"):
        make_policy("diversity", rule="similar")
