"""MemSizer: the recurrent form equals the parallel form; the memory carries across segments."""

import math

import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memsizer import MemSizer, MemSizerAttention


def naive(layer: MemSizerAttention, x: torch.Tensor) -> torch.Tensor:
    """The paper's equations row by row: V_i = Σ_{j<=i} LN(W_l x_j) ⊗ LN(W_r x_j) / √i."""
    b, t, d = x.shape
    out = torch.zeros_like(x)
    for i in range(t):
        seen = x[:, : i + 1] if layer.causal else x
        left = layer.left_norm(layer.left(seen))  # (b, s, m)
        right = layer.right_norm(layer.right(seen))  # (b, s, d)
        values = left.transpose(1, 2) @ right / math.sqrt(seen.shape[1])  # (b, m, d)
        for h in range(layer.heads):
            weights = torch.softmax(x[:, i] @ layer.keys[h].T / math.sqrt(d), dim=-1)  # (b, m)
            out[:, i] += (weights[:, None] @ values)[:, 0] / layer.heads
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_parallel_form_is_the_papers_equations(causal):
    torch.manual_seed(0)
    layer = MemSizerAttention(16, slots=5, heads=3, causal=causal)
    x = torch.randn(2, 7, 16)
    out, (values, count) = layer(x, torch.ones(2, 7))
    torch.testing.assert_close(out, naive(layer, x), atol=1e-5, rtol=1e-5)
    assert values.shape == (2, 5, 16) and count.tolist() == [7.0, 7.0]


def test_recurrent_form_equals_parallel_form_and_keeps_a_constant_state():
    torch.manual_seed(0)
    layer = MemSizerAttention(16, slots=4, heads=2, causal=True)
    x = torch.randn(3, 9, 16)
    parallel, final = layer(x, torch.ones(3, 9))
    state, steps = None, []
    for i in range(9):
        out, state = layer.step(x[:, i], state)
        assert state[0].shape == (3, 4, 16)  # the same size after every token
        steps.append(out)
    torch.testing.assert_close(torch.stack(steps, 1), parallel, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state[0], final[0], atol=1e-5, rtol=1e-5)


def test_the_whole_stack_generates_token_by_token_as_it_reads_a_segment():
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=50, d_model=16, heads=2, layers=2, ffn=32, causal=True)
    model = MemSizer(config, slots=4).eval()
    ids = torch.randint(0, 50, (2, 6))
    whole = model(ids, torch.ones(2, 6))
    memory, vectors = None, []
    for i in range(6):
        vector, memory = model.generate_step(ids[:, i], i, memory)
        vectors.append(vector)
    torch.testing.assert_close(torch.stack(vectors, 1), whole.hidden, atol=1e-5, rtol=1e-5)


def test_segments_read_what_earlier_segments_wrote_and_padding_writes_nothing():
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=50, d_model=16, heads=2, layers=1, ffn=32, causal=True)
    model = MemSizer(config, slots=4).eval()
    ids = torch.randint(0, 50, (1, 8))
    first = model(ids[:, :4], torch.ones(1, 4))
    second = model(ids[:, 4:], torch.ones(1, 4), memory=first.memory)
    alone = model(ids[:, 4:], torch.ones(1, 4))
    # one layer: its writes do not depend on the memory, so the state adds up ...
    torch.testing.assert_close(second.memory[0][0], first.memory[0][0] + alone.memory[0][0])
    assert second.memory[0][1].item() == 8
    # ... and its reads do: the second segment reads what the first wrote
    assert not torch.allclose(second.hidden, alone.hidden, atol=1e-3)
    padded = model(torch.cat([ids[:, :4], ids[:, :2]], 1), torch.tensor([[1, 1, 1, 1, 0, 0]]))
    torch.testing.assert_close(padded.memory[0][0], first.memory[0][0], atol=1e-5, rtol=1e-5)
    assert padded.memory[0][1].item() == 4
