import pytest
import torch

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.factory import is_memory_encoder, load_run_encoder, tokenizer_name
from lifelong.encoders.layers import ModuleConfig, attend, causal_mask, segment_mask
from lifelong.encoders.memory_modules import MEMORY_MODULES, build_memory_module
from lifelong.encoders.segments import DocumentEncoder, SegmentEncoder, Transformer, mean_pool
from lifelong.mechanisms.scopes import parse_scope

CONFIG = ModuleConfig(vocab_size=40, d_model=16, heads=2, layers=2, ffn=32, max_positions=64)


class CountingMemory(SegmentEncoder):
    """Memory = running sum of each segment's token ids (b, 1); hidden = the memory everywhere."""

    def __init__(self) -> None:
        super().__init__(ModuleConfig(vocab_size=10, d_model=2, heads=1))
        self.calls = 0

    def forward(self, input_ids, attention_mask, *, memory=None):
        self.calls += 1
        memory = torch.zeros(len(input_ids), 1) if memory is None else memory
        memory = memory + (input_ids * attention_mask).sum(1, keepdim=True).float()  # (b, 1)
        hidden = memory[:, None, :].expand(*input_ids.shape, 1).repeat(1, 1, 2)  # (b, t, 2)
        return EncoderOutput(hidden=hidden, pooled=hidden[:, 0], memory=memory)


def test_attend_gives_zero_weights_to_a_query_with_no_allowed_key():
    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    mask = torch.tensor([[True, True, False], [False, False, False]])[None, None]
    out, weights = attend(q, k, v, mask)
    assert torch.isfinite(out).all()
    assert torch.equal(weights[0, 0, 1], torch.zeros(3))
    assert torch.allclose(weights[0, 0, 0].sum(), torch.tensor(1.0))
    assert weights[0, 0, 0, 2] == 0


def test_causal_mask_sees_all_memory_and_the_past():
    mask = causal_mask(2, 5)  # 3 memory positions, then 2 tokens
    assert mask.tolist() == [[True] * 4 + [False], [True] * 5]
    padded = segment_mask(torch.tensor([[1, 0]]), causal=False, memory_length=1)
    assert padded.shape == (1, 1, 1, 3) and padded[0, 0, 0].tolist() == [True, True, False]


def test_document_encoder_carries_memory_and_pools_each_rows_last_segment():
    module = CountingMemory()
    encoder = DocumentEncoder(module, segment_length=2)
    ids = torch.tensor([[1, 2, 3, 4, 5], [1, 1, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    out = encoder(ids, mask)
    assert module.calls == 3 and out.hidden.shape == (2, 5, 2)
    # row 0 saw every token; row 1 ended in segment 2, so segment 3 leaves its memory alone
    assert out.memory[:, 0].tolist() == [15.0, 3.0]
    assert out.pooled[:, 0].tolist() == [15.0, 3.0]


def test_document_encoder_skips_segments_that_are_all_padding():
    module = CountingMemory()
    ids = torch.tensor([[1, 2, 0, 0]])
    out = DocumentEncoder(module, 2)(ids, torch.tensor([[1, 1, 0, 0]]))
    assert module.calls == 1 and out.hidden.shape == (1, 4, 2)
    with pytest.raises(ValueError, match="empty"):
        DocumentEncoder(module, 2)(ids, torch.zeros_like(ids))
    with pytest.raises(ValueError, match="segment_length"):
        DocumentEncoder(module, 0)


def test_memory_less_transformer_through_segments_equals_per_segment_runs():
    torch.manual_seed(0)
    module = Transformer(CONFIG).eval()
    ids = torch.randint(0, 40, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    out = DocumentEncoder(module, 5)(ids, mask)
    for start in (0, 5, 10):
        part = module(ids[:, start : start + 5], mask[:, start : start + 5])
        torch.testing.assert_close(out.hidden[:, start : start + 5], part.hidden)
    last = module(ids[:, 5:10], mask[:, 5:10]).pooled
    torch.testing.assert_close(out.pooled[1], last[1])
    assert torch.allclose(out.pooled[0], module(ids[:, 10:], mask[:, 10:]).pooled[0])


def test_causal_transformer_does_not_look_ahead():
    torch.manual_seed(0)
    module = Transformer(ModuleConfig(**{**CONFIG.__dict__, "causal": True})).eval()
    ids = torch.randint(0, 40, (1, 8))
    changed = ids.clone()
    changed[0, 5:] = (changed[0, 5:] + 1) % 40
    mask = torch.ones_like(ids)
    a, b = module(ids, mask).hidden, module(changed, mask).hidden
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_document_encoder_stages_feed_head_only_adaptation():
    torch.manual_seed(0)
    encoder = DocumentEncoder(Transformer(CONFIG), 4).eval()
    ids, mask = torch.randint(0, 40, (3, 10)), torch.ones(3, 10, dtype=torch.long)
    full = encoder(ids, mask)
    final = encoder.run_stages(ids, mask, 0, 1)
    torch.testing.assert_close(encoder.resume(final, mask, 1).pooled, full.pooled)
    torch.testing.assert_close(encoder.resume(ids, mask, 0).pooled, full.pooled)
    assert parse_scope("head", encoder).stage == 1
    for scope in ("all", "top1"):
        with pytest.raises(ValueError, match="head"):
            parse_scope(scope, encoder)


def test_mean_pool_ignores_padding():
    hidden = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert mean_pool(hidden, torch.tensor([[1, 1, 0]])).item() == 2.0


def test_registry_names_and_errors():
    assert {"transformer", "transformer-xl", "memformer", "memoria"} <= set(MEMORY_MODULES)
    with pytest.raises(KeyError, match="known: transformer"):
        build_memory_module("lstm", CONFIG, 8)


def test_factory_maps_names_to_encoders_and_tokenizers():
    assert is_memory_encoder("memformer") and is_memory_encoder("memoria-minilm")
    assert not is_memory_encoder("tiny")
    assert tokenizer_name("memformer") == "minilm" and tokenizer_name("tiny") == "tiny"
    assert tokenizer_name("memoria-tiny") == "tiny"
    encoder = load_run_encoder("transformer", seed=3, segment_length=16)
    again = load_run_encoder("transformer", seed=3, segment_length=16)
    assert isinstance(encoder, DocumentEncoder) and encoder.segment_length == 16
    assert encoder.module.embed.words.num_embeddings == 30_522
    for p, q in zip(encoder.parameters(), again.parameters(), strict=True):
        assert torch.equal(p, q)
