"""The memory modules' shared argument checks: the name and the rule in every message."""

import math

import pytest
import torch

from lifelong.encoders.checks import check_at_least, check_positive, check_segment_inputs


def test_check_at_least_names_the_first_value_below_the_minimum():
    check_at_least(1, segment_length=4, passes=1)
    with pytest.raises(ValueError, match=r"passes must be >= 1, got 0"):
        check_at_least(1, segment_length=4, passes=0)
    with pytest.raises(ValueError, match="kl_weight must be >= 0, got nan"):
        check_at_least(0, kl_weight=math.nan)


def test_check_positive_refuses_zero_and_nan():
    check_positive(sigma0=1e-9)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="sigma0 must be positive"):
            check_positive(sigma0=bad)


def test_check_segment_inputs_wants_matching_two_dimensional_tensors():
    ids = torch.zeros(2, 5, dtype=torch.long)
    check_segment_inputs(ids, torch.ones(2, 5))
    with pytest.raises(ValueError, match=r"input_ids must be \(batch, tokens\)"):
        check_segment_inputs(ids[0], torch.ones(5))
    with pytest.raises(ValueError, match=r"attention_mask must match input_ids \(2, 5\)"):
        check_segment_inputs(ids, torch.ones(2, 4))


def test_modules_check_their_sizes_before_building():
    from lifelong.encoders.layers import ModuleConfig
    from lifelong.encoders.memorizing import MemorizingTransformer

    config = ModuleConfig(vocab_size=11, d_model=8, heads=2, layers=2, ffn=16)
    with pytest.raises(ValueError, match="memory_size must be >= 1, got 0"):
        MemorizingTransformer(config, memory_size=0, k=2)
