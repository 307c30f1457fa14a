import pytest
import torch

from lifelong.encoders import load_encoder
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memoria import (
    EngramKind,
    EngramMemory,
    EngramSettings,
    Memoria,
    MemoriaBert,
)
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.encoders.segments import DocumentEncoder

WM, STM, LTM = EngramKind.WORKING, EngramKind.SHORT_TERM, EngramKind.LONG_TERM


def memory(**kwargs) -> EngramMemory:
    sizes = dict(
        dim=4,
        working=1,
        short_term_retrieve=0,
        long_term_retrieve=0,
        short_term_capacity=4,
        lifespan=5.0,
        alpha=8.0,
        depth=10,
    )
    sizes.update(kwargs)
    dim, seed = sizes.pop("dim"), sizes.pop("seed", 0)
    return EngramMemory(dim, EngramSettings(**sizes), seed=seed)


def step(mem: EngramMemory, value: float) -> None:
    """One step with nothing remembered: a WM engram filled with ``value``."""
    mem.add_working(torch.full((mem.settings.working, mem.dim), value))
    mem.retrieve()
    mem.memorize(torch.zeros(0, dtype=torch.long), torch.zeros(0))


def tags(mem: EngramMemory, kind: EngramKind) -> list[float]:
    """The engrams of one kind, identified by their (constant) first coordinate."""
    return mem.vectors[mem.indices(kind), 0].tolist()


def config(causal: bool, layers: int = 2) -> ModuleConfig:
    return ModuleConfig(
        vocab_size=23, d_model=16, heads=2, layers=layers, ffn=32, max_positions=16, causal=causal
    )


def memoria(causal: bool, **kwargs) -> Memoria:
    torch.manual_seed(0)
    settings = EngramSettings(
        working=2, short_term_retrieve=3, long_term_retrieve=5, short_term_capacity=4
    )
    return Memoria(config(causal), settings, **kwargs).eval()


# -- bookkeeping ---------------------------------------------------------------------------------


def test_increments_share_alpha_times_remembered_by_contribution():
    mem = memory(working=3, short_term_retrieve=2, long_term_retrieve=3, short_term_capacity=2)
    torch.manual_seed(0)
    for _ in range(6):  # fill STM and LTM
        mem.add_working(torch.randn(3, 4))
        retrieval = mem.retrieve()
        r = retrieval.remembered
        mem.memorize(r, torch.rand(r.numel()))
    mem.add_working(torch.randn(3, 4))
    remembered = mem.retrieve().remembered
    assert remembered.numel() == 5  # 2 from STM + 3 from LTM
    before = mem.lifespans[remembered].clone()
    contributions = torch.tensor([0.1, 0.2, 0.3, 0.0, 0.4])
    increments = mem.extend_lifespans(remembered, contributions)
    assert increments.sum().item() == pytest.approx(8.0 * 5)  # Σ Inc = α |M_rem|
    torch.testing.assert_close(increments, contributions / contributions.sum() * 5 * 8.0)
    torch.testing.assert_close(mem.lifespans[remembered], before + increments)
    equal = mem.extend_lifespans(remembered, torch.zeros(5))  # no contribution: equal shares
    torch.testing.assert_close(equal, torch.full((5,), 8.0))


def test_lifespans_fall_by_one_per_step_and_dead_engrams_are_deleted():
    mem = memory(lifespan=2.5)
    step(mem, 1.0)
    assert mem.lifespans.tolist() == [1.5] and mem.ages.tolist() == [1]
    step(mem, 2.0)
    assert mem.lifespans.tolist() == [0.5, 1.5] and mem.ages.tolist() == [2, 1]
    step(mem, 3.0)  # engram 1 reaches -0.5 and is deleted
    assert tags(mem, STM) == [2.0, 3.0] and mem.lifespans.tolist() == [0.5, 1.5]
    assert mem.counts.shape == (2, 2)  # Count compacted with the store
    mem = memory(lifespan=1.0)  # lifespan exactly 0 after the first step: deleted at once
    step(mem, 1.0)
    assert len(mem) == 0


def test_working_memory_moves_to_stm_and_stm_overflows_oldest_first_to_ltm():
    mem = memory(working=2, short_term_capacity=3, lifespan=100.0)
    mem.add_working(torch.tensor([[1.0] * 4, [2.0] * 4]))
    assert tags(mem, WM) == [1.0, 2.0]
    mem.memorize(torch.zeros(0, dtype=torch.long), torch.zeros(0))
    assert tags(mem, WM) == [] and tags(mem, STM) == [1.0, 2.0]
    step(mem, 3.0)
    assert tags(mem, STM) == [2.0, 3.0, 3.0] and tags(mem, LTM) == [1.0]
    step(mem, 4.0)
    assert tags(mem, STM) == [3.0, 4.0, 4.0] and tags(mem, LTM) == [1.0, 2.0, 3.0]


def test_deletion_comes_before_the_stm_overflow():
    # Spec order (paper Sec. 3.4): delete, then WM -> STM, then overflow. A dying STM engram frees
    # its slot; deleting last (Algorithm 3 / the code) would push engram 1 into the LTM here.
    mem = memory(short_term_capacity=3, lifespan=1.5)
    step(mem, 1.0)
    mem.lifespans[0] = 10.0
    step(mem, 2.0)
    mem.lifespans[1] = 10.0
    step(mem, 3.0)  # engram 3 has 0.5 left
    step(mem, 4.0)  # engram 3 dies; STM = [1, 2, 4] fits
    assert tags(mem, STM) == [1.0, 2.0, 4.0] and tags(mem, LTM) == []


def test_edge_weights_are_conditional_probabilities():
    mem = memory(working=3)
    mem.add_working(torch.randn(3, 4))
    mem.strengthen(torch.tensor([0, 1]))
    assert mem.edge_weights()[0, 1].item() == 1.0
    mem.strengthen(torch.tensor([0, 2]))  # 0 fires without 1
    weights = mem.edge_weights()
    assert weights[0, 1].item() == 0.5 and weights[0, 2].item() == 0.5
    assert weights[1, 0].item() == 1.0  # 1 never fired without 0
    assert weights[0, 0].item() == 1.0 and weights[2, 1].item() == 0.0
    with pytest.raises(ValueError, match="distinct"):
        mem.strengthen(torch.tensor([1, 1]))


def test_edge_weights_stay_in_unit_interval_over_random_steps():
    mem = memory(working=2, short_term_retrieve=2, long_term_retrieve=4, short_term_capacity=4)
    torch.manual_seed(1)
    for _ in range(40):
        mem.add_working(torch.randn(2, 4))
        remembered = mem.retrieve().remembered
        mem.memorize(remembered, torch.rand(remembered.numel()))
        weights = mem.edge_weights()
        assert float(weights.min()) >= 0.0 and float(weights.max()) <= 1.0
        assert torch.equal(weights.diagonal(), torch.ones(len(mem)))  # every engram fired
        assert torch.equal(mem.counts, mem.counts.T)


# -- retrieval -----------------------------------------------------------------------------------


def test_short_term_retrieval_ranks_by_closeness_to_working_memory():
    mem = memory(short_term_retrieve=2, short_term_capacity=10, lifespan=100.0)
    for value in (5.0, 0.5, 3.0, 0.25):
        step(mem, value)
    mem.add_working(torch.zeros(1, 4))
    retrieval = mem.retrieve()
    assert mem.vectors[retrieval.short_term, 0].tolist() == [0.25, 0.5]
    closeness = mem.closeness(mem.indices(STM))  # log-mean-exp of -d², no underflow far away
    assert torch.isfinite(closeness).all()
    assert closeness.argsort(descending=True).tolist() == [3, 1, 2, 0]


def graph_memory(long_term_retrieve: int = 10, depth: int = 10, seed: int = 0) -> EngramMemory:
    """One STM engram (position 0, at the origin) and LTM engrams 1..5 at distance 1..5."""
    mem = memory(
        working=6,
        short_term_retrieve=1,
        long_term_retrieve=long_term_retrieve,
        depth=depth,
        short_term_capacity=1,
        lifespan=100.0,
        seed=seed,
    )
    vectors = torch.zeros(6, 4)
    vectors[:, 0] = torch.arange(6.0)
    mem.add_working(vectors)
    mem.memorize(torch.zeros(0, dtype=torch.long), torch.zeros(0))
    mem.kinds[:] = int(LTM)
    mem.kinds[0] = int(STM)
    mem.counts.zero_()
    mem.counts.fill_diagonal_(10.0)
    return mem


def test_long_term_search_follows_the_strongest_edges():
    mem = graph_memory(depth=2)
    mem.counts[0, 3] = 5.0  # start: STM 0 -> LTM 3
    mem.counts[3, 5] = 4.0  # then 3 -> 5 -> 2
    mem.counts[5, 2] = 3.0
    mem.counts[5, 3] = 9.0  # already visited: ignored
    mem.counts[2, 1] = 9.0  # beyond the depth
    mem.add_working(torch.zeros(1, 4))
    retrieval = mem.retrieve()
    assert retrieval.short_term.tolist() == [0]
    assert sorted(retrieval.found.tolist()) == [2, 3, 5]
    assert retrieval.long_term.tolist() == [2, 3, 5]  # ranked by closeness to the origin
    mem = graph_memory(long_term_retrieve=1, depth=2)
    mem.counts[0, 3], mem.counts[3, 5], mem.counts[5, 2] = 5.0, 4.0, 3.0
    mem.add_working(torch.zeros(1, 4))
    assert mem.retrieve().long_term.tolist() == [2]  # the closest found engram
    assert mem.retrieve().found.numel() <= 1 * (2 + 1)  # ≤ N_stm^rem (N_depth + 1)
    mem = graph_memory()
    mem.kinds[0] = int(LTM)  # no STM engram to start from: no LTM engram is found
    mem.add_working(torch.zeros(1, 4))
    assert mem.retrieve().remembered.numel() == 0


def test_ties_are_broken_at_random_by_the_seeded_generator():
    def start(seed: int) -> int:
        mem = graph_memory(depth=0, seed=seed)
        mem.counts[0, 2] = mem.counts[0, 4] = 5.0  # two equally strong edges
        mem.add_working(torch.zeros(1, 4))
        return int(mem.retrieve().found.item())

    picks = [start(seed) for seed in range(16)]
    assert set(picks) == {2, 4}
    assert picks == [start(seed) for seed in range(16)]  # reproducible


def test_long_term_memory_stays_bounded():
    n_stm, n_ltm, alpha = 4, 10, 8.0
    mem = memory(
        dim=8,
        working=4,
        short_term_retrieve=n_stm,
        long_term_retrieve=n_ltm,
        short_term_capacity=8,
        lifespan=5.0,
        alpha=alpha,
    )
    torch.manual_seed(0)
    sizes, ages = [], []
    for _ in range(200):
        mem.add_working(torch.randn(4, 8))
        retrieval = mem.retrieve()
        ages.append(mem.ages[retrieval.long_term].float().mean().nan_to_num().item())
        remembered = retrieval.remembered
        mem.memorize(remembered, torch.rand(remembered.numel()))
        sizes.append(mem.size(LTM))
    bound = alpha * (n_stm + n_ltm)  # the paper's steady state, 112
    print(f"max LTM size {max(sizes)}, mean over the last 100 steps {sum(sizes[100:]) / 100:.1f}")
    assert max(sizes) <= bound
    assert sum(sizes[100:]) / 100 > 0.25 * bound  # it is used, not empty
    early, late = sum(ages[20:70]) / 50, sum(ages[150:]) / 50
    print(f"mean age of retrieved LTM engrams: steps 20-69 {early:.1f}, steps 150-199 {late:.1f}")
    assert late > 2 * early  # old engrams keep being retrieved (the paper's Fig. 5)


# -- the Memoria Transformer ---------------------------------------------------------------------


def segments(model, ids, mask, length):
    outputs, state = [], None
    for start in range(0, ids.shape[1], length):
        out = model(ids[:, start : start + length], mask[:, start : start + length], memory=state)
        outputs.append(out)
        state = out.memory
    return outputs


@pytest.mark.parametrize("causal", [True, False])
def test_memoria_runs_through_the_document_encoder(causal):
    model = memoria(causal)
    torch.manual_seed(1)
    ids = torch.randint(1, 23, (2, 40))
    mask = torch.ones_like(ids)
    mask[1, 21:] = 0
    out = DocumentEncoder(model, 8)(ids, mask)
    assert out.hidden.shape == (2, 40, 16) and out.pooled.shape == (2, 16)
    long, short = out.memory
    assert long.size(STM) == 4 and long.size(LTM) > 0
    # Row 1 has 21 tokens: three segments, the last two (padding only) leave its memory alone.
    alone = DocumentEncoder(model, 8)(ids[1:, :21], mask[1:, :21])
    assert len(short) == len(alone.memory[0])
    torch.testing.assert_close(short.vectors, alone.memory[0].vectors)
    torch.testing.assert_close(out.pooled[1], alone.pooled[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_padding_does_not_change_the_outputs(causal):
    model = memoria(causal)
    torch.manual_seed(2)
    ids = torch.randint(1, 23, (2, 36))
    mask = torch.ones_like(ids)
    mask[0, 29:] = 0  # row 0: 29 tokens, the last segment partly padded
    padded = DocumentEncoder(model, 8)(ids * mask, mask)
    alone = DocumentEncoder(model, 8)(ids[:1, :29], mask[:1, :29])
    torch.testing.assert_close(padded.hidden[0, :29], alone.hidden[0], atol=1e-5, rtol=0)
    noisy = ids.clone()
    noisy[0, 29:] = 7  # different tokens under the padding
    other = DocumentEncoder(model, 8)(noisy, mask)
    torch.testing.assert_close(other.hidden[0, :29], padded.hidden[0, :29], atol=1e-6, rtol=0)


def test_causal_memoria_has_no_leakage_from_future_tokens():
    model = memoria(True)
    torch.manual_seed(3)
    ids = torch.randint(1, 23, (1, 32))
    mask = torch.ones_like(ids)
    base = DocumentEncoder(model, 8)(ids, mask).hidden
    for position in (5, 13, 31):  # inside the first, second and last segment
        changed = ids.clone()
        changed[0, position] = (ids[0, position] + 1) % 23
        hidden = DocumentEncoder(model, 8)(changed, mask).hidden
        torch.testing.assert_close(hidden[:, :position], base[:, :position], atol=1e-6, rtol=0)
        assert (hidden[:, position] - base[:, position]).abs().max() > 1e-4


@pytest.mark.parametrize("causal", [True, False])
def test_gradients_reach_abstractor_and_cross_attention_but_not_stored_engrams(causal):
    model = memoria(causal)
    torch.manual_seed(4)
    ids = torch.randint(1, 23, (2, 24))
    mask = torch.ones_like(ids)
    outputs = segments(model, ids, mask, 8)
    for row in outputs[-1].memory:
        assert not row.vectors.requires_grad and len(row) > 0
        assert row.cue is None or not row.cue.requires_grad
    probe = torch.randn(16)
    loss = (outputs[-1].hidden @ probe).square().mean()
    # No back-propagation through time: the last segment's loss does not reach earlier segments.
    assert torch.autograd.grad(loss, outputs[0].hidden, retain_graph=True, allow_unused=True) == (
        None,
    )
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    for name in ("core.abstractor.queries", "core.abstractor.ffn.1.weight"):
        assert grads[name] is not None and grads[name].abs().max() > 0, name
    for name in ("memory.attention.key.weight", "memory.norm_remembered.weight"):
        grad = grads[f"layers.1.{name}"]
        assert grad is not None and grad.abs().max() > 0, name


def test_forward_does_not_mutate_the_memory_it_is_given():
    model = memoria(False)
    torch.manual_seed(5)
    ids = torch.randint(1, 23, (2, 8))
    mask = torch.ones_like(ids)
    state = segments(model, ids.repeat(1, 3), mask.repeat(1, 3), 8)[-1].memory
    snapshot = [(len(m), m.lifespans.clone(), m.counts.clone()) for m in state]
    first = model(ids, mask, memory=state)
    second = model(ids, mask, memory=state)
    torch.testing.assert_close(first.hidden, second.hidden)
    for m, (n, lifespans, counts) in zip(state, snapshot):
        assert len(m) == n and torch.equal(m.lifespans, lifespans) and torch.equal(m.counts, counts)
    assert all(a is not b for a, b in zip(first.memory, state))
    # A row whose segment is all padding keeps its memory object; merge_memory picks per row.
    pad = mask.clone()
    pad[1] = 0
    out = model(ids, pad, memory=state)
    assert out.memory[1] is state[1] and out.memory[0] is not state[0]
    rows = torch.tensor([True, False])
    assert model.merge_memory(out.memory, state, rows) == [out.memory[0], state[1]]


def test_memoria_arguments_are_checked_and_the_registry_builds_it():
    with pytest.raises(ValueError, match="memory_layer"):
        Memoria(config(True), EngramSettings(2, 2, 2, 4), memory_layer=0)
    with pytest.raises(ValueError, match="memory_layer"):
        Memoria(config(False), EngramSettings(2, 2, 2, 4), memory_layer=1)
    with pytest.raises(ValueError, match="working must be >= 1"):
        EngramSettings(0, 2, 2, 4)
    with pytest.raises(ValueError, match="short_term_capacity must be >= 0"):
        EngramSettings(2, 2, 2, -1)
    with pytest.raises(ValueError, match="lifespan must be positive"):
        EngramSettings(2, 2, 2, 4, lifespan=0.0)
    model = memoria(False)
    with pytest.raises(ValueError, match="memory"):
        model(torch.ones(2, 4, dtype=torch.long), torch.ones(2, 4), memory=[])
    built = build_memory_module("memoria", config(True), 16)
    assert isinstance(built, Memoria)
    assert built.core.settings == EngramSettings(2, 4, 10, 8)
    deep = Memoria(config(False, layers=4), EngramSettings(2, 2, 2, 4))
    assert deep.memory_layer == 1  # engrams from layer 1; layers 2 and 3 cross-attend


# -- BERT with Memoria ---------------------------------------------------------------------------


BERT_SETTINGS = EngramSettings(4, 4, 4, 8, lifespan=12.0)  # the paper's lifespan with BERT


@pytest.fixture(scope="module")
def bert_batch():
    torch.manual_seed(6)
    ids = torch.randint(1000, 2000, (2, 24))
    mask = torch.ones_like(ids)
    mask[1, 18:] = 0
    return ids * mask, mask


def test_memoria_bert_starts_as_the_pretrained_bert(bert_batch):
    encoder = load_encoder("tiny").eval()
    model = MemoriaBert(encoder, 0, BERT_SETTINGS).eval()
    assert model.hidden_size == 128
    ids, mask = bert_batch
    first = model(ids[:, :8], mask[:, :8])
    plain = encoder(ids[:, :8], mask[:, :8])
    torch.testing.assert_close(first.hidden, plain.hidden, atol=1e-5, rtol=0)
    torch.testing.assert_close(first.pooled, plain.hidden[:, 0], atol=1e-5, rtol=0)
    out = DocumentEncoder(model, 8)(ids, mask)  # three segments of 8 tokens
    assert out.hidden.shape == (2, 24, 128)
    for row in out.memory:  # 4 working engrams a segment, lifespan 12: nothing has died yet
        assert len(row) == 12 and row.size(STM) == 8 and row.size(LTM) == 4


def test_memoria_bert_trains_its_new_blocks(bert_batch):
    encoder = load_encoder("tiny")
    model = MemoriaBert(encoder, 0, BERT_SETTINGS)
    ids, mask = bert_batch
    probe = torch.randn(128, generator=torch.Generator().manual_seed(0))

    def backward():
        model.zero_grad()
        outputs = segments(model, ids, mask, 8)
        sum((out.hidden @ probe).square().mean() for out in outputs).backward()
        return {name: p.grad for name, p in model.named_parameters()}

    grads = backward()
    assert grads["reads.0.attention.output.weight"].abs().max() > 0
    assert grads["encoder.model.encoder.layer.0.output.dense.weight"].abs().max() > 0
    with torch.no_grad():  # a step on the zero-initialised output opens the path to the rest
        model.reads[0].attention.output.weight.add_(torch.randn(128, 128) * 0.01)
    grads = backward()
    for name in ("core.abstractor.queries", "reads.0.attention.key.weight"):
        assert grads[name] is not None and grads[name].abs().max() > 0, name
    with pytest.raises(ValueError, match="memory_layer"):
        MemoriaBert(encoder, 1, BERT_SETTINGS)
