import numpy as np
import pytest

from lifelong.memory.policies import (
    RandomWrite,
    ReservoirWrite,
    WriteAll,
    make_policy,
    policy_from_state,
)


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
