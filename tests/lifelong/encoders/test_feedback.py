"""Feedback Transformer: its step-by-step computation against the paper's equations, slowly."""

import math

import pytest
import torch

from lifelong.encoders.feedback import FeedbackTransformer
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module


def tiny(span: int = 4) -> FeedbackTransformer:
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=30, d_model=8, heads=2, layers=2, ffn=16, causal=True)
    model = FeedbackTransformer(config, span=span).eval()
    with torch.no_grad():
        model.layer_weights.copy_(torch.randn(3))  # not uniform, so the mix is tested
    return model


def naive(model: FeedbackTransformer, ids: torch.Tensor) -> torch.Tensor:
    """One row, one token, one layer, one head at a time: m_t, z_t^l, x_t^(l+1)."""
    x0 = model.embed(ids)[0]  # (t, d)
    w = torch.softmax(model.layer_weights, 0)
    heads, dh = model.config.heads, model.config.d_model // model.config.heads
    memories, out = [], []
    for t in range(ids.shape[1]):
        states = [x0[t]]
        for layer in model.layers:
            x = states[-1]
            q = layer.query(x)
            z = torch.zeros(model.config.d_model)
            window = memories[-model.span :]
            if window:
                for h in range(heads):
                    part = slice(h * dh, (h + 1) * dh)
                    scores = []
                    for j, m in enumerate(window):
                        delta = len(window) - j  # m_(t - delta)
                        k = model.key(m)[part]
                        p = model.positions[h, delta - 1]
                        scores.append((q[part] @ k + q[part] @ p) / math.sqrt(dh))
                    weights = torch.softmax(torch.stack(scores), 0)
                    z[part] = sum(a * model.value(m)[part] for a, m in zip(weights, window))
            a = layer.norm1(x + layer.output(z))  # nothing to read: z = 0
            states.append(layer.norm2(a + layer.ffn(a)))
        memories.append(sum(w[n] * s for n, s in enumerate(states)))
        out.append(states[-1])
    return torch.stack(out)[None]


def test_step_by_step_equals_the_equations_evaluated_directly():
    model = tiny(span=4)
    ids = torch.randint(0, 30, (1, 7))  # longer than the span: the window slides
    out = model(ids, torch.ones_like(ids))
    torch.testing.assert_close(out.hidden, naive(model, ids), atol=1e-5, rtol=1e-5)


def test_the_memory_carries_to_the_next_segment_as_if_read_at_once():
    model = tiny(span=4)
    ids = torch.randint(0, 30, (2, 8))
    whole = model(ids, torch.ones_like(ids)).hidden
    first = model(ids[:, :5], torch.ones(2, 5))
    second = model(ids[:, 5:], torch.ones(2, 3), memory=first.memory)
    torch.testing.assert_close(torch.cat([first.hidden, second.hidden], 1), whole)


def test_the_lowest_layer_reads_the_highest_layers_past():
    model = tiny()
    ids = torch.randint(0, 30, (1, 3))
    out = model(ids, torch.ones_like(ids))
    model.layers[-1].ffn.net[0].bias.data.add_(1.0)  # change only the top layer
    changed_first_layer = []
    hook = model.layers[0].register_forward_hook(lambda m, i, o: changed_first_layer.append(o))
    model(ids, torch.ones_like(ids))
    hook.remove()
    assert not torch.allclose(out.hidden, model(ids, torch.ones_like(ids)).hidden)
    # the bottom layer's output at step 2 moved: it read the top layer through the memory
    reference = []
    model.layers[-1].ffn.net[0].bias.data.sub_(1.0)
    hook = model.layers[0].register_forward_hook(lambda m, i, o: reference.append(o))
    model(ids, torch.ones_like(ids))
    hook.remove()
    torch.testing.assert_close(changed_first_layer[0], reference[0])  # step 0 reads nothing
    assert not torch.allclose(changed_first_layer[1], reference[1])


def test_padding_writes_no_memory_and_options_are_checked():
    model = tiny()
    ids = torch.randint(0, 30, (1, 5))
    out = model(ids, torch.tensor([[1, 1, 1, 0, 0]]))
    assert out.memory["mask"][0].tolist() == [True, True, False, False]
    assert bool((out.hidden[0, 3:] == 0).all())
    with pytest.raises(ValueError, match="span"):
        FeedbackTransformer(model.config, span=0)
    config = ModuleConfig(vocab_size=30, d_model=8, heads=2, layers=1, ffn=16)
    assert build_memory_module("feedback", config, 16).span == 16
