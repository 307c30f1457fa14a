"""ReadTwice: the second read sees every segment's summaries (earlier ones only when causal)."""

import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import DOCUMENT_PASSES, build_memory_module
from lifelong.encoders.readtwice import ReadTwice
from lifelong.encoders.segments import DocumentEncoder


def tiny(causal: bool) -> ReadTwice:
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=2, ffn=32, causal=causal)
    return ReadTwice(config, block=2, memory_size=8).eval()


def test_summaries_are_a_linear_map_of_each_blocks_first_and_last_token():
    model = tiny(causal=False)
    h = torch.randn(1, 5, 16)
    vectors, valid = model.summaries(h, torch.tensor([[1, 1, 1, 1, 0]]))
    expected = [model.summarise(torch.cat([h[0, a], h[0, b]])) for a, b in ((0, 1), (2, 3), (4, 4))]
    torch.testing.assert_close(vectors[0], torch.stack(expected))
    assert valid.tolist() == [[True, True, False]]


def test_bidirectional_document_reads_later_segments_summaries_in_the_second_pass():
    model = tiny(causal=False)
    ids = torch.randint(0, 30, (1, 8))
    changed = ids.clone()
    changed[0, 7] = (ids[0, 7] + 1) % 30  # only the last segment changes
    document = DocumentEncoder(model, 4, passes=DOCUMENT_PASSES["readtwice"])
    a, b = document(ids, torch.ones_like(ids)), document(changed, torch.ones_like(ids))
    assert not torch.allclose(a.hidden[:, :4], b.hidden[:, :4])  # segment 1 read segment 2
    once = DocumentEncoder(model, 4)
    a1, b1 = once(ids, torch.ones_like(ids)), once(changed, torch.ones_like(ids))
    torch.testing.assert_close(a1.hidden[:, :4], b1.hidden[:, :4])  # one pass: it cannot
    assert int(a.memory["mask"].sum()) == 4  # two summaries per segment, not added twice


def test_causal_second_read_reads_only_earlier_segments_and_no_later_token():
    model = tiny(causal=True)
    ids = torch.randint(0, 30, (1, 8))
    memory, hidden = None, []
    for start in (0, 4):
        out = model(ids[:, start : start + 4], torch.ones(1, 4), memory=memory)
        hidden.append(out.hidden)
        memory = out.memory
    changed = ids.clone()
    changed[0, 6] = (ids[0, 6] + 1) % 30
    memory, again = None, []
    for start in (0, 4):
        out = model(changed[:, start : start + 4], torch.ones(1, 4), memory=memory)
        again.append(out.hidden)
        memory = out.memory
    torch.testing.assert_close(hidden[0], again[0])
    torch.testing.assert_close(hidden[1][:, :2], again[1][:, :2])  # tokens before position 6
    first_changed = ids.clone()
    first_changed[0, 0] = (ids[0, 0] + 1) % 30
    out1 = model(first_changed[:, :4], torch.ones(1, 4))
    out2 = model(first_changed[:, 4:], torch.ones(1, 4), memory=out1.memory)
    assert not torch.allclose(out2.hidden, hidden[1])  # segment 2 read segment 1's summary


def test_built_by_name_and_options_checked():
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=1, ffn=32)
    built = build_memory_module("readtwice", config, 32)
    assert built.block == 8 and built.memory_size == 32
    with pytest.raises(ValueError, match="block"):
        ReadTwice(config, block=0)
