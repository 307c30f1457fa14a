import functools
import math

import pytest
import torch
import torch.nn.functional as F

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memformer import (
    Memformer,
    MemoryWriter,
    bptt_backward,
    mrbp_backward,
    write_mask,
)
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.encoders.profiling import SavedTensorMeter, peak_saved_bytes
from lifelong.encoders.segments import DocumentEncoder

VOCAB = 40
CONFIG = ModuleConfig(vocab_size=VOCAB, d_model=16, heads=2, layers=2, ffn=32, max_positions=16)


def make(seed=0, config=CONFIG, slots=4, **kwargs):
    torch.manual_seed(seed)
    return Memformer(config, slots, **kwargs)


def window(segments=4, b=3, t=6, seed=1):
    """Segments of a padded batch: row 1 ends inside segment 2, row 2 inside segment 1."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (b, segments * t), generator=g)
    mask = torch.ones(b, segments * t, dtype=torch.long)
    mask[1, 2 * t + 2 :] = 0
    mask[2, t + 3 :] = 0
    ids = ids * mask
    return [(ids[:, s : s + t], mask[:, s : s + t]) for s in range(0, segments * t, t)]


def lm_loss(segments, skip=(1,), seed=2):
    """A next-token-style cross-entropy through a fixed head; no loss on the ``skip`` segments."""
    g = torch.Generator().manual_seed(seed)
    head = torch.randn(CONFIG.d_model, VOCAB, generator=g)

    def loss_fn(index, out):
        if index in skip:
            return None
        ids, mask = segments[index]
        logits = out.hidden @ head  # (b, t, V)
        losses = F.cross_entropy(logits.transpose(1, 2), ids, reduction="none")  # (b, t)
        return (losses * mask).sum() / mask.sum().clamp(min=1)

    return loss_fn


def grads_of(module):
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def run_both(module, segments, memory, loss_fn, seed=None):
    results = {}
    for name, fn in (("bptt", bptt_backward), ("mrbp", mrbp_backward)):
        module.zero_grad()
        if seed is not None:
            torch.manual_seed(seed)
        meter = SavedTensorMeter(exclude=module.parameters())
        with meter:
            loss, final = fn(module, segments, memory, loss_fn)
        results[name] = (loss, final, grads_of(module), meter.peak, meter.current)
    return results


def max_grad_diff(a, b):
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_mrbp_gradients_equal_bptt_with_lower_peak_memory():
    module = make()
    segments = window(segments=4)
    results = run_both(module, segments, None, lm_loss(segments))
    (b_loss, b_mem, b_grads, b_peak, b_left), (m_loss, m_mem, m_grads, m_peak, m_left) = (
        results["bptt"],
        results["mrbp"],
    )
    diff = max_grad_diff(b_grads, m_grads)
    print(f"MRBP vs BPTT: max |grad diff| {diff:.3e}; peak saved bytes {m_peak} vs {b_peak}")
    assert len(b_grads) == len(list(module.parameters()))  # every parameter, v_bias included
    assert diff < 1e-5
    assert m_loss == pytest.approx(b_loss, rel=1e-6)
    torch.testing.assert_close(m_mem, b_mem, atol=1e-6, rtol=0)
    assert m_peak < b_peak
    assert m_peak < 0.5 * b_peak  # one segment's graph vs four
    assert b_left == 0 and m_left == 0  # every saved tensor was freed


def test_mrbp_matches_bptt_from_a_carried_memory_with_dropout():
    config = ModuleConfig(
        vocab_size=VOCAB, d_model=16, heads=2, layers=1, ffn=32, max_positions=16, dropout=0.1
    )
    module = make(config=config).train()
    first, *rest = window(segments=4)
    with torch.no_grad():
        memory = module(*first).memory  # a memory from an earlier window
    results = run_both(module, rest, memory, lm_loss(rest, skip=()), seed=5)
    diff = max_grad_diff(results["bptt"][2], results["mrbp"][2])
    print(f"MRBP vs BPTT with dropout 0.1, carried memory: max |grad diff| {diff:.3e}")
    assert diff < 1e-5  # the dropout masks are replayed exactly
    torch.testing.assert_close(results["mrbp"][1], results["bptt"][1], atol=1e-6, rtol=0)
    assert memory.grad is None  # the incoming memory is detached


def test_mrbp_final_memory_is_the_document_encoders():
    module = make()
    segments = window(segments=3)
    ids = torch.cat([s[0] for s in segments], dim=1)
    mask = torch.cat([s[1] for s in segments], dim=1)
    expected = DocumentEncoder(module, segments[0][0].shape[1])(ids, mask).memory
    _, final = mrbp_backward(module, segments, None, lm_loss(segments))
    torch.testing.assert_close(final, expected.detach(), atol=1e-6, rtol=0)


def test_initial_memory_is_normalized_bias_and_self_only_writes_return_to_it():
    module = make()
    target = module.memory_bias / module.memory_bias.norm(dim=-1, keepdim=True)  # (k, d)
    ids, mask = window(segments=1)[0]
    torch.testing.assert_close(module.initial_memory(3), target.expand(3, -1, -1))

    torch.manual_seed(3)
    memory = F.normalize(torch.randn(2, 4, 16), dim=-1)  # (b, k, d)
    hidden = torch.randn(2, 5, 16)
    no_tokens = torch.zeros(2, 5, dtype=torch.long)
    with torch.no_grad():
        unchanged, weights = module.writer(memory, hidden, no_tokens)
        torch.testing.assert_close(unchanged, memory)  # attends only to itself => unchanged
        assert torch.all(weights[..., 4:] == 0)
        distances = []
        for _ in range(30):
            memory = module.write(memory, hidden, no_tokens)
            distances.append((memory - target).norm(dim=-1).max().item())
    print(f"self-only writes: max distance to v̂_bias {distances[0]:.3f} -> {distances[-1]:.2e}")
    assert all(b <= a + 1e-7 for a, b in zip(distances, distances[1:]))
    assert distances[-1] < 1e-5


def test_an_empty_segment_only_applies_the_forgetting_step():
    module = make().eval()
    ids, mask = window(segments=1)[0]
    memory = F.normalize(torch.randn(3, 4, 16), dim=-1)
    with torch.no_grad():
        out = module(ids, torch.zeros_like(mask), memory=memory)
        torch.testing.assert_close(out.memory, F.normalize(memory + module.memory_bias, dim=-1))


@pytest.mark.parametrize("through_normalisation", [False, True])
def test_a_slot_update_does_not_depend_on_other_slots(through_normalisation):
    module = make()
    torch.manual_seed(4)
    memory = F.normalize(torch.randn(1, 4, 16), dim=-1)
    hidden = torch.randn(1, 6, 16)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])

    def step(m):
        return (
            module.write(m, hidden, mask)
            if through_normalisation
            else module.writer(m, hidden, mask)[0]
        )

    jacobian = torch.autograd.functional.jacobian(step, memory)[0, :, :, 0]  # (k, d, k, d)
    blocks = jacobian.abs().amax(dim=(1, 3))  # (k, k): largest |∂m'_i/∂m_j|
    off_diagonal = blocks[~torch.eye(4, dtype=torch.bool)]
    assert off_diagonal.max().item() == 0.0
    assert blocks.diagonal().min().item() > 1e-3


def test_lower_temperature_sharpens_the_write_attention():
    torch.manual_seed(5)
    sharp, flat = MemoryWriter(16, 2, temperature=0.25), MemoryWriter(16, 2, temperature=1.0)
    flat.load_state_dict(sharp.state_dict())
    memory = F.normalize(torch.randn(2, 4, 16), dim=-1)
    hidden = torch.randn(2, 7, 16)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0

    def entropy(weights):
        return -(weights * weights.clamp(min=1e-30).log()).sum(-1)  # (b, h, k)

    with torch.no_grad():
        _, w_sharp = sharp(memory, hidden, mask)
        _, w_flat = flat(memory, hidden, mask)
    e_sharp, e_flat = entropy(w_sharp), entropy(w_flat)
    print(f"write entropy τ=0.25 {e_sharp.mean():.3f} vs τ=1 {e_flat.mean():.3f}")
    assert torch.all(e_sharp < e_flat)
    assert torch.all(w_sharp.amax(-1) > w_flat.amax(-1))
    torch.testing.assert_close(w_sharp.sum(-1), torch.ones_like(e_sharp))


def test_write_mask_lets_a_slot_see_itself_and_real_tokens_only():
    mask = write_mask(torch.tensor([[1, 1, 0]]), 2)
    expected = torch.tensor([[True, False, True, True, False], [False, True, True, True, False]])
    assert mask.shape == (1, 1, 2, 5)
    assert torch.equal(mask[0, 0], expected)


@pytest.mark.parametrize("summary_tokens", [0, 2])
def test_slots_stay_on_the_unit_sphere(summary_tokens):
    module = make(summary_tokens=summary_tokens)
    segments = window(segments=4)
    ids = torch.cat([s[0] for s in segments], dim=1)
    mask = torch.cat([s[1] for s in segments], dim=1)
    out = DocumentEncoder(module, 6)(ids, mask)
    torch.testing.assert_close(out.memory.norm(dim=-1), torch.ones(3, 4))
    assert out.hidden.shape == (3, 24, 16)


@pytest.mark.parametrize("summary_tokens", [0, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_padded_tokens_never_influence_memory_or_real_tokens(causal, summary_tokens):
    config = ModuleConfig(
        vocab_size=VOCAB, d_model=16, heads=2, layers=2, ffn=32, max_positions=16, causal=causal
    )
    module = make(config=config, summary_tokens=summary_tokens).eval()
    torch.manual_seed(6)
    memory = F.normalize(torch.randn(2, 4, 16), dim=-1)
    ids = torch.randint(1, VOCAB, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[0, 5:] = 0
    other = ids.clone()
    other[0, 5:] = torch.randint(1, VOCAB, (3,))
    with torch.no_grad():
        a = module(ids, mask, memory=memory)
        b = module(other, mask, memory=memory)
        alone = module(ids[:1, :5], mask[:1, :5], memory=memory[:1])
    torch.testing.assert_close(a.memory, b.memory, atol=0, rtol=0)
    torch.testing.assert_close(a.hidden[0, :5], b.hidden[0, :5], atol=0, rtol=0)
    torch.testing.assert_close(a.memory[:1], alone.memory, atol=1e-6, rtol=0)
    torch.testing.assert_close(a.hidden[:1, :5], alone.hidden, atol=1e-6, rtol=0)
    torch.testing.assert_close(a.pooled[:1], alone.pooled, atol=1e-6, rtol=0)


def test_causal_segments_see_their_past_and_the_previous_memory_only():
    config = ModuleConfig(
        vocab_size=VOCAB, d_model=16, heads=2, layers=2, ffn=32, max_positions=16, causal=True
    )
    module = make(config=config).eval()
    ids, mask = window(segments=1)[0]
    later = ids.clone()
    later[:, 3:] = (later[:, 3:] + 7) % VOCAB
    with torch.no_grad():
        a, b = module(ids, mask), module(later, mask)
        carried = module(ids, mask, memory=a.memory)
    torch.testing.assert_close(a.hidden[:, :3], b.hidden[:, :3], atol=0, rtol=0)
    assert not torch.allclose(a.memory, b.memory)  # the write sees the whole segment
    assert (carried.hidden - a.hidden).abs().max() > 1e-3  # the memory is read


def test_document_encoder_gradients_reach_bias_and_writer_from_the_last_segment():
    module = make()
    segments = window(segments=3)
    ids = torch.cat([s[0] for s in segments], dim=1)
    mask = torch.cat([s[1] for s in segments], dim=1)
    out = DocumentEncoder(module, 6)(ids, mask)
    last = mask[:, 12:].bool()  # only row 0 has tokens in the last segment
    out.hidden[:, 12:][last].square().sum().backward()
    assert module.memory_bias.grad.abs().sum() > 0
    for name, p in module.writer.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_registry_builds_memformer_with_slots_from_the_segment_length():
    module = build_memory_module("memformer", CONFIG, 64, temperature=0.125)
    assert isinstance(module, Memformer)
    assert module.slots == 8 and module.writer.temperature == 0.125
    assert build_memory_module("memformer", CONFIG, 8).slots == 4


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="slots"):
        Memformer(CONFIG, 0)
    with pytest.raises(ValueError, match="temperature"):
        Memformer(CONFIG, 4, temperature=0.0)
    with pytest.raises(ValueError, match="bias_norm"):
        Memformer(CONFIG, 4, bias_norm=-1.0)
    module = make()
    ids, mask = window(segments=1)[0]
    with pytest.raises(ValueError, match="memory must be a tensor of shape"):
        module(ids, mask, memory=torch.zeros(3, 5, 16))
    with pytest.raises(ValueError, match="segments"):
        mrbp_backward(module, [], None, lm_loss([]))
    with pytest.raises(ValueError, match="scalar"):
        bptt_backward(module, [(ids, mask)], None, lambda i, out: out.hidden.sum(-1))


def test_saved_tensor_meter_counts_shared_storage_once_and_releases_it():
    x = torch.randn(100, requires_grad=True)

    def graph():
        y = x.exp()  # saves its output (400 bytes)
        return (y * y).sum()  # saves y twice: the same storage

    loss, peak = peak_saved_bytes(graph, exclude=[x])
    assert peak == 400
    with SavedTensorMeter() as meter:
        z = (x * x).sin().sum()
        assert meter.current == 2 * 400  # x (not excluded now, saved twice) and x * x
        z.backward()
        assert meter.current == 0
    assert meter.peak == 800
    assert math.isfinite(loss.item())


def recall_batch(b, g, keys=8, segments=4, length=4):
    """A key (0..keys-1) at the start of segment 1, noise tokens after it; recall it at the end."""
    key = torch.randint(0, keys, (b,), generator=g)
    ids = torch.randint(keys, keys + 6, (b, segments * length), generator=g)
    ids[:, 0] = key
    mask = torch.ones_like(ids)
    return [
        (ids[:, s : s + length], mask[:, s : s + length]) for s in range(0, ids.shape[1], length)
    ], key


def final_loss(head, key, last, index, out):
    return F.cross_entropy(head(out.pooled), key) if index == last else None


def recall_accuracy(horizon, steps=400, segments=4, seed=0):
    """Train on the recall task with MRBP windows of ``horizon`` segments (0 = no memory)."""
    torch.manual_seed(seed)
    config = ModuleConfig(vocab_size=14, d_model=32, heads=2, layers=1, ffn=64, max_positions=8)
    module = Memformer(config, 8, temperature=0.125)
    head = torch.nn.Linear(32, 8)
    opt = torch.optim.Adam([*module.parameters(), *head.parameters()], lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        window_segments, key = recall_batch(32, g, segments=segments)
        opt.zero_grad()
        if horizon == 0:
            F.cross_entropy(head(module(*window_segments[-1]).pooled), key).backward()
            opt.step()
            continue
        memory = None
        for start in range(0, segments, horizon):
            loss_fn = functools.partial(final_loss, head, key, segments - 1 - start)
            _, memory = mrbp_backward(
                module, window_segments[start : start + horizon], memory, loss_fn
            )
        opt.step()
    test_segments, key = recall_batch(256, torch.Generator().manual_seed(123), segments=segments)
    with torch.no_grad():
        memory = None
        for segment in test_segments if horizon else test_segments[-1:]:
            out = module(*segment, memory=memory)
            memory = out.memory
        return (head(out.pooled).argmax(-1) == key).float().mean().item()


@pytest.fixture
def one_thread():
    """Tiny models train several times faster on one thread than on the suite's two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_recall_needs_memory_and_a_long_enough_horizon(one_thread):
    accuracy = {h: recall_accuracy(h) for h in (0, 1, 4)}
    print(
        f"recall accuracy (chance 0.125): no memory {accuracy[0]:.3f}, "
        f"horizon 1 {accuracy[1]:.3f}, horizon 4 {accuracy[4]:.3f}"
    )
    assert accuracy[4] > 0.6
    assert accuracy[0] < 0.3 and accuracy[1] < 0.3
