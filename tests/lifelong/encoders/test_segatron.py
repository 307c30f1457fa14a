"""Segatron: paragraph, sentence and token positions as the paper defines them, in attention."""

import numpy as np
import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.segatron import Segatron, boundary_ids, segment_distances, text_positions
from lifelong.encoders.transformer_xl import TransformerXL

TEXT = "Hi. Go!\nNo.\n"


def test_positions_of_a_two_paragraph_text():
    positions = text_positions(TEXT)
    paragraph, sentence, token = positions.T
    # paragraph 0 = "Hi. Go!\n", paragraph 1 = "No.\n"; sentences "Hi." " Go!" "\n" ...
    assert paragraph.tolist() == [0] * 8 + [1] * 4
    assert sentence.tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 3, 3, 3, 4]
    assert token.tolist() == list(range(12))
    # every paragraph starts a sentence; counters never restart (only differences are read)
    starts = np.flatnonzero(np.diff(paragraph)) + 1
    assert all(sentence[s] > sentence[s - 1] for s in starts)


def chars_model(chars: str, memory_length: int = 4) -> Segatron:
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=len(chars), d_model=24, heads=2, layers=2, ffn=32,
                          causal=True)  # fmt: skip
    ids = boundary_ids(lambda c: chars.index(c) if c in chars else None)
    return Segatron(config, memory_length, **ids).eval()


def test_the_module_counts_what_the_splitter_counts_across_segments():
    chars = "".join(sorted(set(TEXT)))
    model = chars_model(chars)
    ids = torch.tensor([[chars.index(c) for c in TEXT]])
    expected = torch.tensor(text_positions(TEXT)[:, [1, 0]], dtype=torch.float)  # sentence, par.
    torch.testing.assert_close(segment_distances(model, ids)[0], expected)
    first = model(ids[:, :5], torch.ones(1, 5))
    assert first.memory["counts"][0].tolist() == [1.0, 0.0]  # "Hi. G": one sentence end
    torch.testing.assert_close(first.memory["structure"][0, -4:], expected[1:5])
    second = model(ids[:, 5:], torch.ones(1, 7), memory=first.memory)
    torch.testing.assert_close(second.memory["structure"][0], expected[-4:])


def test_a_sentence_end_changes_attention_after_it_and_not_before():
    chars = "ab.\n"
    model = chars_model(chars, memory_length=0)
    ids = torch.tensor([[0, 1, 2, 1, 0, 1]])  # "ab.bab": a sentence ends at 2
    with_ends = model(ids, torch.ones_like(ids)).hidden
    model.ends.zero_()  # the same weights, blind to sentence ends
    token_only = model(ids, torch.ones_like(ids)).hidden
    torch.testing.assert_close(with_ends[:, :3], token_only[:, :3])  # every Δs is 0 up to "."
    assert not torch.allclose(with_ends[:, 3:], token_only[:, 3:])


def test_without_boundaries_only_the_token_block_varies():
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=10, d_model=24, heads=2, layers=1, ffn=32, causal=True)
    model = Segatron(config, 4).eval()
    relative, index, _ = model._positions(
        torch.ones(1, 6, dtype=torch.bool), 4, model._structure(
            torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.bool),
            model.initial_memory(1)),
    )  # fmt: skip
    assert len(relative) == 3 and relative[0].shape == (6, 24)
    assert bool((relative[0][:, 8:] == 0).all()) and bool((relative[1][:, :8] == 0).all())
    assert int(index[1].min()) == int(index[1].max())  # one sentence: every distance 0
    assert isinstance(model, TransformerXL)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Segatron(config, 4, sentence_ends=[10])
