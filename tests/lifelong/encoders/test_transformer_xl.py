import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.encoders.segments import DocumentEncoder
from lifelong.encoders.transformer_xl import (
    Compression,
    CompressiveTransformer,
    TransformerXL,
    relative_distances,
    sinusoidal_embedding,
)


def config(causal: bool = True, layers: int = 2) -> ModuleConfig:
    return ModuleConfig(vocab_size=23, d_model=16, heads=2, layers=layers, ffn=32, causal=causal)


def ones(b: int, t: int) -> torch.Tensor:
    return torch.ones(b, t, dtype=torch.long)


def valid_counts(memory) -> list[int]:
    return memory["mask"].sum(dim=1).tolist()


@pytest.mark.parametrize("layers", [1, 2])
def test_recurrence_equals_one_pass_over_both_segments(layers):
    torch.manual_seed(0)
    model = TransformerXL(config(causal=True, layers=layers), memory_length=6)
    ids = torch.randint(0, 23, (2, 10))
    first, second = ids[:, :5], ids[:, 5:]
    one_pass = model(ids, ones(2, 10)).hidden[:, 5:]  # (b, 5, d)
    memory = model(first, ones(2, 5)).memory
    recurrent = model(second, ones(2, 5), memory=memory).hidden
    diff = (one_pass - recurrent).abs().max().item()
    assert diff < 1e-5, diff
    # memory shorter than the first segment: differs from one pass (it forgot tokens)
    short = TransformerXL(config(causal=True, layers=layers), memory_length=2)
    short.load_state_dict(model.state_dict())
    partial = short(second, ones(2, 5), memory=short(first, ones(2, 5)).memory).hidden
    assert (partial - one_pass).abs().max() > 1e-3


def naive_relative_attention(attention, x, context, causal):
    """Scores (q_i + u)·k_j + (q_i + v)·W_R R_(i-j), pair by pair, then softmax and W_O."""
    heads, (b, t, d) = attention.heads, x.shape
    p, dh = context.shape[1], d // heads
    source = torch.cat([context, x], dim=1)
    q = attention.query(x).view(b, t, heads, dh)
    k = attention.key(source).view(b, p + t, heads, dh)
    v = attention.value(source).view(b, p + t, heads, dh)
    scores = torch.full((b, heads, t, p + t), float("-inf"))
    for i in range(t):
        for j in range(p + t):
            if causal and j > p + i:
                continue
            distance = torch.tensor([p + i - j])
            r = attention.position(sinusoidal_embedding(distance, d)).view(heads, dh)
            content = ((q[:, i] + attention.content_bias) * k[:, j]).sum(-1)  # (b, h)
            position = ((q[:, i] + attention.position_bias) * r).sum(-1)  # (b, h)
            scores[:, :, i, j] = (content + position) / dh**0.5
    weights = scores.softmax(dim=-1)
    out = torch.einsum("bhts,bshd->bthd", weights, v).reshape(b, t, d)
    return attention.output(out)


@pytest.mark.parametrize("causal", [True, False])
def test_relative_attention_matches_pairwise_definition(causal):
    torch.manual_seed(0)
    model = TransformerXL(config(causal=causal), memory_length=3)
    x, context = torch.randn(2, 4, 16), torch.randn(2, 3, 16)
    positions = model._positions(torch.ones(2, 7, dtype=torch.bool), t=4)
    attention = model.layers[0].attention
    fast = attention(x, context, positions)
    slow = naive_relative_attention(attention, x, context, causal)
    diff = (fast - slow).abs().max().item()
    assert diff < 1e-5, diff


def test_relative_distances_skip_padding():
    key_valid = torch.tensor([[True, False, True, True, False, True]])
    distances = relative_distances(key_valid, t=2)  # queries = last two keys
    # positions: 0, -, 1, 2, -, 3 -> last query (position 3) is 3 from the first key
    assert distances[0, 1, [0, 2, 3, 5]].tolist() == [3, 2, 1, 0]


def test_no_gradient_crosses_segments():
    torch.manual_seed(0)
    model = TransformerXL(config(), memory_length=4)
    embedded = []
    model.embed.register_forward_hook(lambda module, args, out: embedded.append(out))
    out1 = model(torch.randint(0, 23, (2, 4)), ones(2, 4))
    out2 = model(torch.randint(0, 23, (2, 4)), ones(2, 4), memory=out1.memory)
    assert not any(s.requires_grad for s in out1.memory["states"])
    loss = out2.hidden.pow(2).sum()
    grad1, grad2 = torch.autograd.grad(loss, [embedded[0], embedded[1]], allow_unused=True)
    assert grad1 is None
    assert grad2 is not None and grad2.abs().sum() > 0


def test_memory_is_bounded_and_holds_only_real_tokens():
    torch.manual_seed(0)
    model = TransformerXL(config(), memory_length=6)
    memory, seen = None, torch.zeros(2, dtype=torch.long)
    for step in range(7):
        mask = ones(2, 4)
        mask[1, step % 4 :] = 0  # row 1: 0-3 real tokens per segment
        out = model(torch.randint(0, 23, (2, 4)), mask, memory=memory)
        memory, seen = out.memory, seen + mask.sum(dim=1)
        assert all(s.shape == (2, 6, 16) for s in memory["states"])
        assert valid_counts(memory) == seen.clamp(max=6).tolist()
        invalid = ~memory["mask"]
        assert all(s[invalid].abs().sum() == 0 for s in memory["states"])


def test_changing_padded_ids_changes_no_output():
    torch.manual_seed(0)
    model = TransformerXL(config(causal=False), memory_length=5)
    ids = torch.randint(0, 21, (2, 12))
    mask = ones(2, 12)
    mask[0, 2:7] = 0  # padding inside row 0, including a whole segment
    mask[1, 9:] = 0
    other = torch.where(mask.bool(), ids, torch.randint(0, 23, ids.shape))
    encoder = DocumentEncoder(model, segment_length=4)
    a, b = encoder(ids, mask), encoder(other, mask)
    torch.testing.assert_close(a.hidden, b.hidden, atol=0, rtol=0)
    torch.testing.assert_close(a.pooled, b.pooled, atol=0, rtol=0)
    for x, y in zip(a.memory["states"], b.memory["states"]):
        torch.testing.assert_close(x, y, atol=0, rtol=0)
    assert (a.hidden[~mask.bool()] == 0).all()


def test_fully_padded_segment_keeps_memory_in_document_encoder():
    torch.manual_seed(0)
    model = TransformerXL(config(), memory_length=4)
    ids = torch.randint(0, 23, (2, 8))
    mask = ones(2, 8)
    mask[1, 4:] = 0  # row 1 ends after the first segment
    out = DocumentEncoder(model, segment_length=4)(ids, mask)
    alone = model(ids[1:, :4], ones(1, 4)).memory
    for merged, single in zip(out.memory["states"], alone["states"]):
        torch.testing.assert_close(merged[1:], single, atol=1e-6, rtol=0)
    assert valid_counts(out.memory) == [4, 4]


def test_padding_between_tokens_does_not_shift_relative_positions():
    torch.manual_seed(0)
    model = TransformerXL(config(causal=False), memory_length=8)
    ids = torch.randint(0, 21, (1, 8))
    mask = ones(1, 8)
    mask[0, 3:5] = 0  # a pad ends segment 1 and another starts segment 2
    padded = DocumentEncoder(model, segment_length=4)(ids, mask).hidden[:, 5:]
    memory = model(ids[:, :3], ones(1, 3)).memory
    direct = model(ids[:, 5:], ones(1, 3), memory=memory).hidden
    torch.testing.assert_close(padded, direct, atol=1e-5, rtol=0)


def test_bidirectional_segments_see_later_tokens_and_causal_ones_do_not():
    torch.manual_seed(0)
    ids = torch.randint(0, 23, (1, 6))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % 23
    for causal in (True, False):
        model = TransformerXL(config(causal=causal), memory_length=4)
        a, b = model(ids, ones(1, 6)).hidden, model(changed, ones(1, 6)).hidden
        moved = (a[0, :-1] - b[0, :-1]).abs().max().item()
        assert (moved == 0) if causal else (moved > 1e-4)


def test_same_length_limits_every_query_to_the_same_window():
    torch.manual_seed(0)
    model = TransformerXL(config(), memory_length=3, same_length=True)
    ids = torch.randint(0, 23, (1, 8))
    full = model(ids, ones(1, 8)).hidden
    changed = ids.clone()
    changed[0, 0] = (ids[0, 0] + 1) % 23
    moved = (model(changed, ones(1, 8)).hidden - full).abs().amax(dim=-1)[0]  # (t,)
    # token 0 is in the window (3 back) of tokens 0-3 in layer 1; two layers reach token 6
    assert (moved[:7] > 0).all() and moved[7] == 0


def test_document_encoder_shapes_with_padding():
    torch.manual_seed(0)
    for name in ("transformer-xl", "compressive"):
        module = build_memory_module(name, config(causal=False), segment_length=4)
        ids = torch.randint(0, 23, (3, 11))
        mask = ones(3, 11)
        mask[0, 6:] = 0
        mask[2, 1:] = 0
        out = DocumentEncoder(module, segment_length=4)(ids, mask)
        assert out.hidden.shape == (3, 11, 16) and out.pooled.shape == (3, 16)
        assert torch.isfinite(out.hidden).all() and torch.isfinite(out.pooled).all()


def test_compressed_memory_grows_by_evicted_over_rate_and_is_bounded():
    torch.manual_seed(0)
    model = CompressiveTransformer(
        config(), memory_length=4, compressed_length=5, compression_rate=2
    )
    memory, counts = None, []
    for _ in range(5):
        memory = model(torch.randint(0, 23, (2, 4)), ones(2, 4), memory=memory).memory
        counts.append(memory["compressed_mask"].sum(dim=1).tolist())
        assert valid_counts(memory) == [4, 4]
        assert all(c.shape == (2, 5, 16) for c in memory["compressed"])
    # 4 evicted per segment from the second on -> 2 compressed slots each, capped at 5
    assert counts == [[0, 0], [2, 2], [4, 4], [5, 5], [5, 5]]
    model.auxiliary_loss()


def test_padded_evictions_are_whole_groups_of_real_tokens():
    torch.manual_seed(0)
    model = CompressiveTransformer(
        config(), memory_length=4, compressed_length=8, compression_rate=2, compression="mean"
    )
    first = model(torch.randint(0, 23, (1, 4)), ones(1, 4)).memory
    mask = torch.tensor([[1, 1, 1, 0]])  # 7 real tokens for 4 slots: evict 4 (2 groups)
    second = model(torch.randint(0, 23, (1, 4)), mask, memory=first).memory
    assert valid_counts(second) == [3]
    assert second["compressed_mask"].sum().item() == 2
    # mean compression of the evicted first-segment vectors, pair by pair
    for old, compressed in zip(first["states"], second["compressed"]):
        expected = old[:, :4].view(1, 2, 2, 16).mean(dim=2)
        torch.testing.assert_close(compressed[:, -2:], expected, atol=1e-6, rtol=0)


def test_mean_compression_of_constant_memory_is_the_constant():
    constant = torch.full((2, 6, 16), 0.7)
    for rate in (1, 2, 3):
        out = Compression("mean", 16, rate)(constant)
        assert out.shape == (2, 6 // rate, 16)
        torch.testing.assert_close(out, torch.full_like(out, 0.7))
    torch.testing.assert_close(Compression("max", 16, 3)(constant), torch.full((2, 2, 16), 0.7))


def test_reconstruction_loss_trains_only_the_compression():
    torch.manual_seed(0)
    model = CompressiveTransformer(
        config(), memory_length=4, compressed_length=4, compression_rate=2
    )
    memory = model(torch.randint(0, 23, (2, 4)), ones(2, 4)).memory
    assert model.auxiliary_loss() is None  # nothing evicted yet: no loss was added
    model(torch.randint(0, 23, (2, 4)), ones(2, 4), memory=memory)
    loss = model.auxiliary_loss()
    assert loss is not None and torch.isfinite(loss) and loss.item() > 0
    assert model.auxiliary_loss() is None  # read resets it
    loss.backward()
    for name, parameter in model.named_parameters():
        has_grad = parameter.grad is not None and parameter.grad.abs().sum() > 0
        assert has_grad == name.startswith("compressions."), name


def test_reconstruction_loss_absent_without_learned_compression():
    model = CompressiveTransformer(
        config(), memory_length=2, compressed_length=4, compression_rate=2, compression="max"
    )
    memory = None
    for _ in range(3):
        memory = model(torch.randint(0, 23, (1, 4)), ones(1, 4), memory=memory).memory
    assert model.auxiliary_loss() is None


def test_compressive_attends_to_compressed_memory():
    torch.manual_seed(0)
    model = CompressiveTransformer(
        config(), memory_length=2, compressed_length=4, compression_rate=2
    )
    memory = model(torch.randint(0, 23, (1, 4)), ones(1, 4)).memory
    memory = model(torch.randint(0, 23, (1, 4)), ones(1, 4), memory=memory).memory
    ids = torch.randint(0, 23, (1, 4))
    with_compressed = model(ids, ones(1, 4), memory=memory).hidden
    memory["compressed_mask"] = torch.zeros_like(memory["compressed_mask"])
    without = model(ids, ones(1, 4), memory=memory).hidden
    assert (with_compressed - without).abs().max() > 1e-4


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="memory_length"):
        TransformerXL(config(), memory_length=-1)
    with pytest.raises(ValueError, match="compression"):
        CompressiveTransformer(config(), 4, 4, 2, compression="sum")
    with pytest.raises(ValueError, match="compression_rate"):
        CompressiveTransformer(config(), 4, 4, 0)
    with pytest.raises(ValueError, match="compressed_length"):
        CompressiveTransformer(config(), 4, 0, 2)
    with pytest.raises(ValueError, match="attention_mask"):
        TransformerXL(config(), 4)(torch.zeros(2, 3, dtype=torch.long), ones(2, 4))
