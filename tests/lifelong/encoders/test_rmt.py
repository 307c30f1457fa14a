"""RMT: the memory tokens' layout, truncated BPTT against a hand-unrolled graph, the curriculum."""

import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.encoders.rmt import RecurrentMemoryTransformer, curriculum_segments


def tiny(causal: bool = True, **kwargs) -> RecurrentMemoryTransformer:
    torch.manual_seed(0)
    config = ModuleConfig(
        vocab_size=30, d_model=16, heads=2, layers=2, ffn=32, max_positions=20, causal=causal
    )
    return RecurrentMemoryTransformer(config, slots=3, **kwargs)


def unrolled(model: RecurrentMemoryTransformer, segments: list[torch.Tensor], cut: set[int]):
    """The model's equations written out segment by segment, detaching only before ``cut``.

    The causal layout: ``[mem; x; mem]`` through the layers, the last m outputs are the next
    memory. No depth bookkeeping: which boundaries are cut is given.
    """
    from lifelong.encoders.memory_tokens import embed_with_memory, sequence_mask

    b = segments[0].shape[0]
    tokens, hidden = model.memory.initial[None].expand(b, -1, -1), []
    for i, ids in enumerate(segments):
        if i in cut:
            tokens = tokens.detach()
        x = embed_with_memory(model.embed, ids, tokens, tokens)
        mask = sequence_mask(torch.ones_like(ids), 3, 3, True)
        for layer in model.layers:
            x = layer(x, mask)
        hidden.append(x[:, 3 : 3 + ids.shape[1]])
        tokens = x[:, 3 + ids.shape[1] :]
    return torch.cat(hidden, dim=1)


def grads(model, loss):
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def read(model, segments):
    memory, hidden = None, []
    for ids in segments:
        out = model.step(ids, torch.ones_like(ids), memory)
        hidden.append(out.hidden)
        memory = out.memory
    return torch.cat(hidden, dim=1)


@pytest.mark.parametrize(
    ("bptt", "count", "cut"), [(3, 3, set()), (2, 5, {2, 4}), (None, 4, set())]
)
def test_truncated_bptt_equals_back_propagation_through_the_unrolled_segments(bptt, count, cut):
    model = tiny(bptt=bptt)
    segments = [torch.randint(0, 30, (2, 4)) for _ in range(count)]
    weights = torch.randn(2, 4 * count, 16)
    ours = read(model, segments)
    reference = unrolled(model, segments, cut)
    torch.testing.assert_close(ours, reference)
    expected = grads(model, (reference * weights).sum())
    got = grads(model, (read(model, segments) * weights).sum())
    assert set(got) == set(expected)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], msg=name)


def test_gradient_reaches_the_first_segment_only_through_the_memory_within_the_window():
    segments = [torch.randint(0, 30, (1, 4)) for _ in range(3)]
    for bptt, reaches in ((3, True), (2, False)):
        model = tiny(bptt=bptt)
        embeddings: list[torch.Tensor] = []

        def keep(module, inputs, output, store=embeddings):
            output.retain_grad()
            store.append(output)

        handle = model.embed.words.register_forward_hook(keep)
        hidden = read(model, segments)
        handle.remove()
        hidden[:, -4:].sum().backward()  # a loss on the last segment only
        first = embeddings[0].grad
        assert (first is not None and bool(first.abs().sum() > 0)) is reaches


def test_causal_tokens_do_not_see_later_tokens_but_the_written_memory_reads_them_all():
    model = tiny().eval()
    ids = torch.randint(0, 30, (1, 6))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % 30
    a = model(ids, torch.ones_like(ids))
    b = model(changed, torch.ones_like(ids))
    torch.testing.assert_close(a.hidden[:, :-1], b.hidden[:, :-1])
    assert not torch.allclose(a.memory["tokens"], b.memory["tokens"])


def test_the_next_segment_reads_what_the_previous_one_wrote():
    model = tiny().eval()
    first = torch.randint(0, 30, (1, 4))
    other = (first + 1) % 30
    second = torch.randint(0, 30, (1, 4))
    after_first = model(second, torch.ones_like(second), memory=model(first, first * 0 + 1).memory)
    after_other = model(second, torch.ones_like(second), memory=model(other, other * 0 + 1).memory)
    assert not torch.allclose(after_first.hidden, after_other.hidden)


def test_bidirectional_layout_writes_at_the_read_positions():
    model = tiny(causal=False).eval()
    ids = torch.randint(0, 30, (2, 5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    out = model(ids, mask)
    assert out.hidden.shape == (2, 5, 16) and out.memory["tokens"].shape == (2, 3, 16)
    assert bool((out.hidden[1, 3:] == 0).all())
    changed = ids.clone()
    changed[1, 4] = (ids[1, 4] + 1) % 30  # a padded position changes nothing
    torch.testing.assert_close(model(changed, mask).memory["tokens"][1], out.memory["tokens"][1])


def test_built_by_name_with_room_for_the_memory_positions():
    config = ModuleConfig(vocab_size=30, d_model=16, heads=2, layers=1, ffn=32,
                          max_positions=8, causal=True)  # fmt: skip
    model = build_memory_module("rmt", config, segment_length=8, slots=4)
    assert model.embed.positions.num_embeddings == 16
    out = model.step(torch.randint(0, 30, (2, 8)), torch.ones(2, 8, dtype=torch.long))
    assert out.memory["depth"].tolist() == [1, 1]


def test_curriculum_adds_segments_in_equal_stages():
    schedule = [curriculum_segments(step, 8, 4) for step in range(8)]
    assert schedule == [1, 1, 2, 2, 3, 3, 4, 4]
    with pytest.raises(ValueError, match="max_segments"):
        curriculum_segments(0, 8, 0)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="bptt"):
        tiny(bptt=0)
    model = tiny()
    with pytest.raises(ValueError, match="memory tokens have shape"):
        wrong = {"tokens": torch.zeros(2, 5, 16), "depth": torch.zeros(2, dtype=torch.long)}
        model(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3), memory=wrong)


def test_rmt_bert_with_its_memory_masked_out_is_the_pretrained_bert():
    from lifelong.encoders.hf import load_encoder
    from lifelong.encoders.rmt import RecurrentMemoryBert

    encoder = load_encoder("tiny").eval()
    model = RecurrentMemoryBert(encoder, slots=4).eval()
    ids = torch.randint(1000, 2000, (2, 8))
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    plain = encoder(ids, mask)
    alone = model(ids, mask, read_memory_tokens=False)
    torch.testing.assert_close(alone.hidden[0], plain.hidden[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(alone.hidden[1, :5], plain.hidden[1, :5], atol=1e-5, rtol=0)
    torch.testing.assert_close(alone.pooled, plain.pooled, atol=1e-5, rtol=0)
    read = model(ids, mask)
    assert not torch.allclose(read.hidden, alone.hidden)  # the memory is read when it may be
    assert read.memory["tokens"].shape == (2, 4, 128)


def test_rmt_bert_carries_the_first_segment_to_the_last_and_trains_its_memory():
    from lifelong.encoders.hf import load_encoder
    from lifelong.encoders.rmt import RecurrentMemoryBert
    from lifelong.encoders.segments import DocumentEncoder

    model = RecurrentMemoryBert(load_encoder("tiny"), slots=4, bptt=None)
    ids = torch.randint(1000, 2000, (1, 24))
    changed = ids.clone()
    changed[0, 2] = 999
    document = DocumentEncoder(model, 8)
    a, b = document(ids, torch.ones_like(ids)), document(changed, torch.ones_like(ids))
    assert not torch.allclose(a.hidden[:, 16:], b.hidden[:, 16:])  # segment 3 saw segment 1
    probe = torch.randn(128, generator=torch.Generator().manual_seed(0))
    (a.pooled @ probe).square().sum().backward()  # (a plain sum is constant after LayerNorm)
    assert model.memory.initial.grad is not None and model.memory.initial.grad.abs().max() > 0


def test_rmt_minilm_is_a_run_encoder_with_a_segment_limit_below_the_berts():
    from lifelong.encoders.factory import is_memory_encoder, load_run_encoder, tokenizer_name
    from lifelong.encoders.names import segment_position_limit

    assert is_memory_encoder("rmt-minilm") and tokenizer_name("rmt-minilm") == "minilm"
    assert segment_position_limit("rmt-minilm") == 512 - 10
    encoder = load_run_encoder("rmt-tiny", segment_length=8)
    out = encoder(torch.randint(1000, 2000, (2, 20)), torch.ones(2, 20, dtype=torch.long))
    assert out.hidden.shape == (2, 20, 128) and out.pooled.shape == (2, 128)


def test_causal_mask_lets_each_memory_block_see_itself_whole_and_no_token_a_later_one():
    from lifelong.encoders.memory_tokens import sequence_mask

    mask = sequence_mask(torch.tensor([[1, 1, 0]]), 2, 2, causal=True)[0, 0].int()
    expected = torch.tensor(
        [  # keys: read read | x1 x2 pad | write write
            [1, 1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0, 0],
            [1, 1, 1, 1, 0, 0, 0],
            [1, 1, 1, 1, 0, 0, 0],
            [1, 1, 1, 1, 0, 1, 1],
            [1, 1, 1, 1, 0, 1, 1],
        ]
    )
    assert torch.equal(mask, expected)


def test_every_rmt_bert_segment_starts_with_cls_and_ends_with_sep(tokenizer):
    """Bulatov et al. (2023) give each segment the BERT's special tokens; raw slices of one
    tokenised input left every segment but the first starting mid-text ("lazy")."""
    from lifelong.encoders.factory import load_run_encoder

    encoder = load_run_encoder("rmt-tiny", segment_length=8)
    seen = []
    module = encoder.module
    original = module.forward

    def spy(ids, mask, **kwargs):
        seen.append((ids.clone(), mask.clone()))
        return original(ids, mask, **kwargs)

    module.forward = spy
    texts = ["the quick brown fox jumps over the lazy dog again and again", "short"]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    out = encoder(batch["input_ids"], batch["attention_mask"])
    text = int(batch["attention_mask"][0].sum()) - 2  # the long row's tokens, [CLS]/[SEP] aside
    assert len(seen) == -(-text // 6) >= 2  # 6 of them per segment of 8
    for ids, mask in seen:
        for row, row_mask in zip(ids, mask):
            if row_mask.any():
                length = int(row_mask.sum())
                assert row[0] == tokenizer.cls_token_id
                assert row[length - 1] == tokenizer.sep_token_id
    # one vector per input position: the text's own, [CLS] the first segment's, padding zero
    assert out.hidden.shape[:2] == batch["input_ids"].shape
    assert not out.hidden[1, int(batch["attention_mask"][1].sum()) :].any()
