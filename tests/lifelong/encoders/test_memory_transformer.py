"""Memory Transformer: the three variants' equations, written out, and their masks."""

import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.encoders.memory_tokens import embed_with_memory
from lifelong.encoders.memory_transformer import MemoryTransformer


def tiny(variant: str, causal: bool = False) -> MemoryTransformer:
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=1, ffn=32,
                          max_positions=12, causal=causal)  # fmt: skip
    return MemoryTransformer(config, slots=3, variant=variant).eval()


def sublayer(layer, x, source):
    """``LN(A + FF(A)), A = LN(x + MH(x, source, source))`` with the layer's parameters."""
    a = layer.norm1(x + layer.attention(x, source))
    return layer.norm2(a + layer.ffn(a))


@pytest.mark.parametrize("variant", ["memctrl", "bottleneck"])
def test_controller_variants_compute_the_papers_equations(variant):
    model = tiny(variant)
    ids = torch.randint(0, 30, (2, 5))
    x = embed_with_memory(model.embed, ids, model.memory.expand(2), None)
    mem, seq = x[:, :3], x[:, 3:]
    layer = model.layers[0]
    h_mem = sublayer(layer.memory, mem, torch.cat([mem, seq], 1))  # MH_mem(X_mem, X_ms, X_ms)
    source = h_mem if variant == "bottleneck" else torch.cat([mem, seq], 1)
    expected = sublayer(layer.sequence, seq, source)
    torch.testing.assert_close(model(ids, torch.ones_like(ids)).hidden, expected)


def test_memtransformer_is_a_plain_transformer_over_memory_and_sequence():
    model = tiny("memtr")
    ids = torch.randint(0, 30, (2, 5))
    x = embed_with_memory(model.embed, ids, model.memory.expand(2), None)
    expected = sublayer(model.layers[0], x, x)[:, 3:]
    torch.testing.assert_close(model(ids, torch.ones_like(ids)).hidden, expected)


def test_bottleneck_sequence_reads_other_tokens_only_through_the_memory():
    model = tiny("bottleneck")
    ids = torch.randint(0, 30, (1, 5))
    changed = ids.clone()
    changed[0, 4] = (ids[0, 4] + 1) % 30
    with torch.no_grad():  # a memory that reads nothing: the sequence cannot see other tokens
        model.layers[0].memory.attention.value.weight.zero_()
        model.layers[0].memory.attention.value.bias.zero_()
        model.layers[0].memory.attention.output.bias.zero_()
    a, b = model(ids, torch.ones_like(ids)), model(changed, torch.ones_like(ids))
    torch.testing.assert_close(a.hidden[:, :4], b.hidden[:, :4])


@pytest.mark.parametrize("variant", ["memtr", "memctrl"])
def test_causal_variants_never_show_a_token_a_later_one(variant):
    model = tiny(variant, causal=True)
    ids = torch.randint(0, 30, (1, 6))
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 1) % 30
    a, b = model(ids, torch.ones_like(ids)), model(changed, torch.ones_like(ids))
    torch.testing.assert_close(a.hidden[:, :5], b.hidden[:, :5])
    assert not torch.allclose(a.hidden[:, 5], b.hidden[:, 5])


def test_padding_is_never_read_and_options_are_checked():
    model = tiny("memctrl")
    ids = torch.randint(0, 30, (1, 6))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 1) % 30
    torch.testing.assert_close(model(ids, mask).pooled, model(changed, mask).pooled)
    with pytest.raises(ValueError, match="no causal form"):
        tiny("bottleneck", causal=True)
    with pytest.raises(ValueError, match="variant"):
        tiny("memnet")
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=1, ffn=32, max_positions=8)
    built = build_memory_module("memctrl", config, 8)
    assert built.variant == "memctrl" and built.embed.positions.num_embeddings == 28
