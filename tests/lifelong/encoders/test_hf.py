import pytest
import torch

from lifelong.encoders.hf import HFEncoder, PackedLayout, load_encoder, supports_packing


@pytest.fixture(scope="module")
def padded_batch():
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[0, 5:] = 0  # three lengths: 5, 9, 2
    mask[2, 2:] = 0
    return ids * mask, mask


def test_stages_compose_to_the_plain_forward(padded_batch):
    encoder = load_encoder("tiny").eval()
    ids, mask = padded_batch
    plain = encoder(ids, mask).hidden  # (b, t, d)
    middle = encoder.run_stages(ids, mask, 0, 2)
    staged = encoder.run_stages(middle, mask, 2, encoder.num_layers + 1)
    real = mask.bool()
    torch.testing.assert_close(staged[real], plain[real], atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def ragged_batch():
    """Seven rows of lengths 1 to 9 in no order, one with a hole (real tokens after padding)."""
    torch.manual_seed(1)
    lengths = [4, 9, 1, 7, 2, 9, 5]
    mask = (torch.arange(9) < torch.tensor(lengths)[:, None]).long()
    mask[3, 2] = 0  # a hole: the row's real tokens are not all at the front
    ids = torch.randint(1000, 2000, mask.shape)
    return ids * mask, mask


def test_packed_layout_buckets_rows_by_length(ragged_batch):
    _, mask = ragged_batch
    layout = PackedLayout.of(mask, rows_per_bucket=3)
    n = int(mask.sum())
    assert torch.equal(layout.index, mask.reshape(-1).nonzero().squeeze(1))
    assert torch.equal(layout.order[layout.inverse], torch.arange(n))  # a permutation
    widths = [bucket.keep.shape[-1] for bucket in layout.buckets]
    rows = [bucket.keep.shape[0] for bucket in layout.buckets]
    # real tokens per row, sorted: 1 2 4 | 5 6 9 | 9 (the row with a hole has 6)
    assert rows == [3, 3, 1] and widths == [4, 9, 9]
    assert [b.stop - b.start for b in layout.buckets] == [7, 20, 9]
    assert layout.buckets[-1].stop == n
    single = PackedLayout.of(mask)  # few rows: one bucket, row-major order
    assert single.order is None and len(single.buckets) == 1


@pytest.mark.parametrize("start", [0, 1, 2])
@pytest.mark.parametrize("batch", ["padded_batch", "ragged_batch"])
def test_packed_layers_match_padded_ones_and_their_gradients(request, batch, start):
    encoder = load_encoder("tiny").eval()
    assert all(supports_packing(layer) for layer in encoder.model.encoder.layer)
    ids, mask = request.getfixturevalue(batch)
    layout = PackedLayout.of(mask, rows_per_bucket=2)  # several buckets when ragged
    x = encoder.run_stages(ids, mask, 0, start).detach()
    stop = encoder.num_layers + 1
    real = mask.bool()

    outputs, grads = [], []
    for packed in (False, True):
        encoder.zero_grad()
        out = encoder.run_stages(x, mask, start, stop, packed=packed, layout=layout)
        out[real].square().sum().backward()
        outputs.append(out)
        grads.append(
            {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
        )

    torch.testing.assert_close(outputs[1][real], outputs[0][real], atol=1e-5, rtol=0)
    assert torch.all(outputs[1][~real] == 0)  # padding positions are zero, not garbage
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("start", [0, 1, 2])  # 2: the last layer alone (adapt_scope top1)
@pytest.mark.parametrize("batch", ["padded_batch", "ragged_batch"])
def test_pooled_only_computes_the_first_position_exactly_and_nothing_else(request, batch, start):
    encoder = load_encoder("tiny").eval()
    ids, mask = request.getfixturevalue(batch)
    layout = PackedLayout.of(mask, rows_per_bucket=2)
    x = encoder.run_stages(ids, mask, 0, start).detach()
    stop = encoder.num_layers + 1

    outputs, grads = [], []
    for pooled_only in (False, True):
        encoder.zero_grad()
        out = encoder.run_stages(
            x, mask, start, stop, packed=True, layout=layout, pooled_only=pooled_only
        )
        out[:, 0].square().sum().backward()  # what a [CLS] head reads
        outputs.append(out)
        grads.append(
            {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
        )

    torch.testing.assert_close(outputs[1][:, 0], outputs[0][:, 0], atol=1e-5, rtol=0)
    assert torch.all(outputs[1][:, 1:] == 0)  # the other positions are not computed
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-4, rtol=1e-4)
    full = encoder.resume(x, mask, start, packed=True).pooled  # a resumed pass pools the same
    first = encoder.resume(x, mask, start, packed=True, pooled_only=True).pooled
    torch.testing.assert_close(first, full, atol=1e-5, rtol=0)


def test_first_tokens_are_listed_in_bucket_order_and_empty_rows_fall_back(ragged_batch):
    ids, mask = ragged_batch
    layout = PackedLayout.of(mask, rows_per_bucket=3)
    rows_in_bucket_order = torch.argsort(mask.sum(dim=1), stable=True)
    # the row-major flat position of each row's first real token is its position 0
    assert torch.equal(layout.index[layout.firsts], rows_in_bucket_order * mask.shape[1])
    encoder = load_encoder("tiny").eval()
    holed = mask.clone()
    holed[2] = 0  # a row without any real token: no first token to compute
    empty = PackedLayout.of(holed, rows_per_bucket=3)
    x = encoder.run_stages(ids * holed, holed, 0, 2).detach()
    full = encoder.run_stages(x, holed, 2, 3, packed=True, layout=empty)
    first = encoder.run_stages(x, holed, 2, 3, packed=True, layout=empty, pooled_only=True)
    torch.testing.assert_close(first, full)  # the full computation, nothing misplaced


def test_packing_needs_a_bert_style_layer():
    assert not supports_packing(torch.nn.Linear(2, 2))


def test_pooled_is_bert_s_pooler_output_when_asked():
    # both reference implementations read the pooler output (dense + tanh over [CLS])
    assert load_encoder("minilm").pooling == "cls"  # auto: MiniLM never trained its pooler
    encoder = load_encoder("minilm", pooling="pooler")
    assert encoder.pooling == "pooler"
    ids = torch.tensor([[101, 2054, 102]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        out = encoder(ids, mask)
        expected = torch.tanh(encoder.model.pooler.dense(out.hidden[:, 0]))
    assert torch.allclose(out.pooled, expected, atol=1e-6)
    with torch.no_grad():
        raw = load_encoder("minilm", pooling="cls")(ids, mask)
    assert torch.allclose(raw.pooled, out.hidden[:, 0], atol=1e-6)


def test_auto_pooling_reads_cls_where_no_pooler_was_trained_and_pooler_needs_one():
    assert load_encoder("tiny").pooling == "cls"  # random weights: no trained pooler to read
    assert load_encoder("tiny", pooling="pooler").pooling == "pooler"
    with pytest.raises(ValueError, match="no pooler layer"):
        HFEncoder(load_encoder("tiny").model, "tiny", "pooler")


def test_token_types_reach_bert_through_forward_and_every_stage(padded_batch):
    """Same ids, segment 0 vs 1: different states, so the types really reach the embeddings."""
    encoder = load_encoder("tiny").eval()
    assert encoder.reads_token_types  # BERT's two token types
    ids, mask = padded_batch
    zeros, ones = torch.zeros_like(ids), mask.clone()  # (b, t) segment 0 / segment 1
    with torch.no_grad():
        plain = encoder(ids, mask).hidden  # (b, t, d)
        first = encoder(ids, mask, zeros).hidden
        second = encoder(ids, mask, ones).hidden
        staged = encoder.run_stages(ids, mask, 0, 1, token_type_ids=ones)
        resumed = encoder.resume(staged, mask, 1).hidden
        packed = encoder.resume(ids, mask, 0, token_type_ids=ones, packed=True).hidden
    real = mask.bool()
    torch.testing.assert_close(first, plain)  # no types = segment 0
    assert (second[real] - first[real]).abs().max() > 1e-3
    torch.testing.assert_close(resumed[real], second[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(packed[real], second[real], atol=1e-5, rtol=0)
