import numpy as np
import pytest
import torch
from torch.nn import functional as F

from lifelong.encoders.layers import ModuleConfig, split_heads
from lifelong.encoders.memorizing import (
    KNNMemory,
    MemorizingTransformer,
    dense_memory_attention,
    knn_memory_attention,
)
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.encoders.segments import DocumentEncoder
from lifelong.memory import EpisodicMemory

VOCAB = 22


def make_config(causal: bool = True, layers: int = 2) -> ModuleConfig:
    return ModuleConfig(
        vocab_size=VOCAB,
        d_model=16,
        heads=2,
        layers=layers,
        ffn=32,
        max_positions=16,
        causal=causal,
    )


def make_model(memory_size: int = 12, k: int = 4, causal: bool = True, **kwargs):
    torch.manual_seed(0)
    return MemorizingTransformer(make_config(causal), memory_size, k, **kwargs).eval()


def segment(b: int, t: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (b, t), generator=generator)
    return ids, torch.ones(b, t, dtype=torch.long)


def prefix_mask(lengths: torch.Tensor, m: int) -> torch.Tensor:
    return torch.arange(m)[None, :] < lengths[:, None]  # (b, m)


def test_knn_attention_equals_dense_when_k_covers_the_memory():
    torch.manual_seed(0)
    q = torch.randn(3, 2, 5, 8)
    keys, values = torch.randn(3, 2, 7, 8), torch.randn(3, 2, 7, 8)
    lengths = torch.tensor([7, 4, 0])  # a full, a partly filled and an empty memory
    knn = knn_memory_attention(q, keys, values, k=7, lengths=lengths)
    mask = prefix_mask(lengths, 7)[:, None, None, :]  # (b, 1, 1, m)
    dense = dense_memory_attention(q, keys, values, mask=mask)
    diff = (knn - dense).abs().max().item()
    print(f"max |knn - dense| with k = memory size: {diff:.2e}")
    assert diff < 1e-5
    assert torch.all(knn[2] == 0)  # empty memory -> zeros, not NaN
    # k larger than the memory is the same as k = memory size
    torch.testing.assert_close(knn_memory_attention(q, keys, values, k=50, lengths=lengths), knn)


def test_knn_attention_with_small_k_is_dense_attention_over_the_true_top_k():
    torch.manual_seed(1)
    q = torch.randn(2, 2, 6, 8)
    keys, values = torch.randn(2, 2, 20, 8), torch.randn(2, 2, 20, 8)
    k = 5
    knn = knn_memory_attention(q, keys, values, k=k, scale=0.7)
    scores = torch.einsum("bhtd,bhmd->bhtm", q, keys)  # (b, h, t, m)
    top = scores.topk(k, dim=-1).indices
    mask = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, top, True)
    restricted = dense_memory_attention(q, keys, values, mask=mask, scale=0.7)
    everything = dense_memory_attention(q, keys, values, scale=0.7)
    diff = (knn - restricted).abs().max().item()
    print(f"max |knn - dense over true top-{k}|: {diff:.2e}")
    assert diff < 1e-5
    assert (knn - everything).abs().max() > 1e-3  # the restriction really matters


def test_knn_attention_is_differentiable_in_the_queries():
    torch.manual_seed(2)
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    keys, values = torch.randn(1, 2, 9, 8), torch.randn(1, 2, 9, 8)
    knn_memory_attention(q, keys, values, k=3).square().sum().backward()
    assert q.grad is not None and q.grad.abs().sum() > 0


def test_memory_is_fifo_bounded_and_evicts_the_oldest_first():
    model = make_model(memory_size=10, k=3)
    attention = model.layers[model.memory_layer].attention
    captured = []
    attention.key.register_forward_hook(lambda module, args, out: captured.append(out.detach()))
    memory, written = None, []
    for step in range(4):
        ids, mask = segment(2, 4, seed=step)
        memory = model(ids, mask, memory=memory).memory
        keys = F.normalize(split_heads(captured[-1], 2), dim=-1)  # (b, h, t, d_h)
        written.append(keys)
        assert memory.sizes() == [min(4 * (step + 1), 10)] * 2
        expected = torch.cat(written, dim=2)[:, :, -10:]  # newest 10 keys, oldest first
        for row, sample in enumerate(memory.samples):
            torch.testing.assert_close(sample.keys, expected[row], atol=1e-6, rtol=0)
            # the store of each head is the project's episodic memory, slots = positions
            assert all(isinstance(store, EpisodicMemory) for store in sample.stores)
            assert all(len(store) == sample.size for store in sample.stores)
            if sample.size:
                head0 = sample.stores[0]
                np.testing.assert_allclose(head0.keys[:, :-1], sample.keys[0].numpy())
                query = np.pad(sample.keys[0, -1:].numpy(), ((0, 0), (0, 1)))
                _, slots = head0.nearest(query, 1)
                assert slots[0, 0] == sample.size - 1  # a stored key finds itself
            assert sample.values.shape == (2, sample.size, 8)


def test_segments_longer_than_the_memory_keep_their_newest_tokens():
    model = make_model(memory_size=3, k=2)
    attention = model.layers[model.memory_layer].attention
    captured = []
    attention.value.register_forward_hook(lambda module, args, out: captured.append(out.detach()))
    ids, mask = segment(1, 6, seed=0)
    memory = model(ids, mask).memory
    assert memory.sizes() == [3]
    values = split_heads(captured[-1], 2)[0]  # (h, t, d_h)
    torch.testing.assert_close(memory.samples[0].values, values[:, -3:], atol=1e-6, rtol=0)


def test_no_gradient_flows_into_the_memory_but_reaches_the_gate_and_projections():
    model = make_model(memory_size=12, k=3).train()
    ids1, mask1 = segment(2, 5, seed=3)
    ids2, mask2 = segment(2, 5, seed=4)
    memory = model(ids1, mask1).memory  # built with gradients on
    for sample in memory.samples:
        assert not sample.keys.requires_grad and not sample.values.requires_grad

    target = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))

    def grads(mem: KNNMemory) -> dict[str, torch.Tensor]:
        model.zero_grad()
        hidden = model(ids2, mask2, memory=mem).hidden  # (b, t, d)
        (hidden * target).sum().backward()  # LayerNorm makes hidden.square().mean() ~ constant
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    with_graph = grads(memory)
    with torch.no_grad():
        memory_no_grad = model(ids1, mask1).memory
    without_graph = grads(memory_no_grad)
    assert with_graph.keys() == without_graph.keys()
    for name in with_graph:
        torch.testing.assert_close(with_graph[name], without_graph[name], atol=0, rtol=0)
    prefix = f"layers.{model.memory_layer}.attention."
    for name in ("gate_bias", "log_scale", "query.weight", "key.weight", "value.weight"):
        grad = with_graph[prefix + name]
        print(f"{name}: max |grad| = {grad.abs().max().item():.2e}")
        assert grad.abs().max() > 0


def test_causal_segment_does_not_leak_future_tokens_even_with_memory():
    model = make_model(memory_size=12, k=3)
    ids1, mask1 = segment(2, 6, seed=5)
    memory = model(ids1, mask1).memory
    assert min(memory.sizes()) == 6
    ids2, mask2 = segment(2, 6, seed=6)
    changed = ids2.clone()
    changed[:, 3:] = (changed[:, 3:] + 7) % VOCAB
    out = model(ids2, mask2, memory=memory).hidden
    out_changed = model(changed, mask2, memory=memory).hidden
    torch.testing.assert_close(out[:, :3], out_changed[:, :3], atol=1e-6, rtol=0)
    assert (out[:, 3:] - out_changed[:, 3:]).abs().max() > 1e-3
    # the memory is really read: the same segment without memory gives other outputs
    assert (out - model(ids2, mask2).hidden).abs().max() > 1e-3


@pytest.mark.parametrize("causal", [True, False])
def test_padded_tokens_never_enter_memory_and_do_not_change_outputs(causal):
    model = make_model(memory_size=20, k=3, causal=causal)
    ids1, mask1 = segment(2, 6, seed=7)
    mask1[1, 4:] = 0  # row 1 has 4 real tokens in segment 1
    memory = model(ids1, mask1).memory
    assert memory.sizes() == [6, 4]
    junk = ids1.clone()
    junk[1, 4:] = (junk[1, 4:] + 5) % VOCAB  # other ids at the padded positions
    memory_junk = model(junk, mask1).memory
    torch.testing.assert_close(memory_junk.samples[1].keys, memory.samples[1].keys)
    torch.testing.assert_close(memory_junk.samples[1].values, memory.samples[1].values)

    ids2, mask2 = segment(2, 6, seed=8)
    mask2[0, 5:] = 0
    out = model(ids2, mask2, memory=memory)
    assert out.memory.sizes() == [11, 10]
    junk2 = ids2.clone()
    junk2[0, 5:] = (junk2[0, 5:] + 3) % VOCAB
    out_junk = model(junk2, mask2, memory=memory_junk)
    real = mask2.bool()
    torch.testing.assert_close(out_junk.hidden[real], out.hidden[real], atol=1e-6, rtol=0)
    torch.testing.assert_close(out_junk.pooled, out.pooled, atol=1e-6, rtol=0)
    # a row whose segment is all padding keeps its memory object untouched
    mask3 = torch.ones(2, 6, dtype=torch.long)
    mask3[1] = 0
    after = model(ids2, mask3, memory=memory).memory
    assert after.samples[1] is memory.samples[1]
    assert after.sizes() == [12, 4]


def test_empty_memory_uses_local_attention_only():
    model = make_model()
    ids, mask = segment(2, 5, seed=9)
    attention = model.layers[model.memory_layer].attention
    with torch.no_grad():
        first = model(ids, mask).hidden
        attention.gate_bias.fill_(4.0)
        second = model(ids, mask).hidden
    assert torch.isfinite(first).all()
    torch.testing.assert_close(first, second, atol=0, rtol=0)


def test_runs_over_several_segments_through_the_document_encoder():
    model = make_model(memory_size=8, k=3)
    document = DocumentEncoder(model, segment_length=4).train()
    ids, mask = segment(3, 12, seed=10)
    mask[1, 4:] = 0  # row 1 ends after the first segment
    mask[2, :4] = 0  # row 2 starts in the second segment (empty memory there)
    out = document(ids, mask)
    assert out.hidden.shape == (3, 12, 16) and out.pooled.shape == (3, 16)
    assert torch.isfinite(out.hidden).all() and torch.isfinite(out.pooled).all()
    assert out.memory.sizes() == [8, 4, 8]
    (out.pooled * torch.randn(3, 16)).sum().backward()
    assert model.layers[model.memory_layer].attention.gate_bias.grad.abs().max() > 0

    with torch.no_grad():
        # row 1's memory is its first segment's pairs
        alone = model(ids[1:2, :4], mask[1:2, :4]).memory.samples[0]
        torch.testing.assert_close(out.memory.samples[1].keys, alone.keys, atol=1e-6, rtol=0)
        # row 2's second segment read an empty memory: same as starting a document there
        fresh = model(ids[2:3, 4:8], mask[2:3, 4:8]).hidden[0]
        torch.testing.assert_close(out.hidden[2, 4:8], fresh, atol=1e-5, rtol=0)


def test_merge_memory_picks_rows():
    model = make_model(memory_size=8, k=2)
    ids, mask = segment(2, 3, seed=11)
    previous = model(ids, mask).memory
    updated = model(ids, mask, memory=previous).memory
    merged = model.merge_memory(updated, previous, torch.tensor([True, False]))
    assert merged.samples[0] is updated.samples[0] and merged.samples[1] is previous.samples[1]
    assert merged.sizes() == [6, 3]


def test_registry_and_defaults():
    config = make_config(layers=3)
    module = build_memory_module("memorizing", config, segment_length=4)
    assert isinstance(module, MemorizingTransformer)
    assert (module.memory_size, module.k, module.memory_layer) == (64, 32, 1)
    assert MemorizingTransformer(make_config(layers=1), 4, 2).memory_layer == 0
    ids, mask = segment(2, 4, seed=12)
    out = module(ids, mask)
    assert out.hidden.shape == (2, 4, 16) and out.memory.sizes() == [4, 4]


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"memory_size": 0, "k": 2}, "memory_size"),
        ({"memory_size": 4, "k": 0}, "k"),
        ({"memory_size": 4, "k": 2, "memory_layer": 2}, "memory_layer"),
        ({"memory_size": 4, "k": 2, "initial_scale": 0.0}, "initial_scale"),
    ],
)
def test_bad_arguments_raise(kwargs, word):
    with pytest.raises(ValueError, match=word):
        MemorizingTransformer(make_config(), **kwargs)


def test_bad_memory_raises():
    model = make_model()
    ids, mask = segment(2, 3, seed=13)
    memory = model(ids, mask).memory
    with pytest.raises(ValueError, match="memory"):
        model(ids[:1], mask[:1], memory=memory)
    with pytest.raises(ValueError, match="memory"):
        model(ids, mask, memory=torch.zeros(2, 3))
