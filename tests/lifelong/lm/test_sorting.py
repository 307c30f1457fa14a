import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import MEMORY_MODULES, build_memory_module
from lifelong.encoders.segments import SegmentEncoder, Transformer, mean_pool
from lifelong.lm.sorting import (
    IGNORE,
    PAD,
    SEP,
    VOCAB_SIZE,
    SortingGenerator,
    SortingLM,
    cosine_schedule,
    evaluate_sorting,
    make_batch,
    sequence_length,
    sort_by_count,
    sorting_accuracy,
    sorting_loss,
    train_sorting,
)

SCRIPT = Path(__file__).resolve().parents[3] / "experiments" / "lm" / "sorting_table.py"


def config(d: int = 16, layers: int = 1, max_positions: int = 64) -> ModuleConfig:
    return ModuleConfig(
        vocab_size=VOCAB_SIZE,
        d_model=d,
        heads=2,
        layers=layers,
        ffn=2 * d,
        max_positions=max_positions,
        causal=True,
    )


@pytest.fixture
def one_thread():
    """Training loops of tiny models run far faster on one thread on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --- the generator ---------------------------------------------------------------------------


def test_sort_by_count_hand_checked():
    # counts: 1 x3, 3 x2, 7 x1; all other tokens unseen, appended by id
    target = sort_by_count(np.array([3, 3, 1, 1, 1, 7]))
    assert target.tolist() == [1, 3, 7, 0, 2, 4, 5, 6, 8, 9, *range(10, 20)]
    # ties (2 and 5 both twice) broken by token id, smaller first
    target = sort_by_count(np.array([5, 2, 5, 2, 9]))
    assert target.tolist()[:3] == [2, 5, 9]
    assert sorted(target.tolist()) == list(range(20))
    # every token seen once except 19 twice: 19 first, then 0..18
    assert sort_by_count(np.array([*range(20), 19])).tolist() == [19, *range(19)]


def test_sort_by_count_rejects_out_of_range_tokens():
    with pytest.raises(ValueError, match="tokens"):
        sort_by_count(np.array([0, 20]))


def test_sample_shapes_sep_and_targets():
    n = 37
    seqs = SortingGenerator(n, seed=3).sample(8)
    assert seqs.shape == (8, n + 21) and seqs.dtype == np.int64
    assert (seqs[:, n] == SEP).all()
    assert (seqs[:, :n] < 20).all() and (seqs[:, :n] >= 0).all()
    assert not (seqs == PAD).any()
    for row in seqs:
        assert row[n + 1 :].tolist() == sort_by_count(row[:n]).tolist()
        counts = np.bincount(row[:n], minlength=20)[row[n + 1 :]]
        assert (np.diff(counts) <= 0).all()  # descending counts


def test_batch_left_pads_to_whole_segments_and_labels_targets():
    n, s = 30, 24  # 51 tokens -> 3 segments of 24 = 72, 21 PADs in front
    seqs = SortingGenerator(n, seed=0).sample(4)
    batch = make_batch(seqs, s)
    total = batch.input_ids.shape[1]
    assert total == 72 and total % s == 0
    pad = total - (n + 21)
    assert (batch.input_ids[:, :pad] == PAD).all() and (batch.attention_mask[:, :pad] == 0).all()
    assert (batch.input_ids[:, pad:] != PAD).all() and (batch.attention_mask[:, pad:] == 1).all()
    assert (batch.input_ids[:, pad + n] == SEP).all()
    # SEP and the 20 targets sit in the last segment
    assert pad + n >= total - s
    labelled = batch.labels != IGNORE
    assert labelled.sum(1).tolist() == [20] * 4
    # position p is labelled with the token at p + 1 (the i-th target from the token before it)
    assert labelled[:, total - 21 : total - 1].all()
    assert torch.equal(batch.labels[:, -21:-1], batch.input_ids[:, -20:])
    # no padding when the length is already whole segments
    exact = make_batch(SortingGenerator(sequence_length(2, s), seed=0).sample(2), s)
    assert exact.input_ids.shape[1] == 2 * s and bool(exact.attention_mask.all())


def test_sequence_length_fills_segments_and_validates():
    assert sequence_length(4, 32) + 21 == 128
    with pytest.raises(ValueError, match="segment_length"):
        sequence_length(2, 20)
    with pytest.raises(ValueError, match="segments"):
        sequence_length(0, 32)


def test_drift_follows_the_mixture_exactly():
    n, b = 50, 2000
    gen = SortingGenerator(n, seed=1)
    p_init = np.full((b, 20), 0.0)
    p_init[:, 0] = 1.0  # all mass on token 0 at the start ...
    p_final = np.full((b, 20), 0.0)
    p_final[:, 19] = 1.0  # ... and on token 19 at the end
    tokens = gen.draw_tokens(p_init, p_final)
    assert set(np.unique(tokens).tolist()) == {0, 19}
    r = np.arange(1, n + 1) / n
    share_zero = (tokens == 0).mean(0)  # (n,)
    assert np.abs(share_zero - (1 - r)).max() < 0.05  # P(token_j = 0) = 1 - (j + 1) / n
    assert (tokens[:, -1] == 19).all()  # r = 1 at the last token


def test_drift_early_tokens_follow_p_init_more_than_late_ones():
    n, b = 200, 400
    gen = SortingGenerator(n, seed=2)
    p_init, p_final = gen.distributions(b)
    assert np.allclose(p_init.sum(1), 1) and (p_init.max(1) / p_init.min(1) < 9 + 1e-9).all()
    tokens = gen.draw_tokens(p_init, p_final)
    rows = np.arange(b)[:, None]
    # log-likelihood ratio log p_init(x) - log p_final(x), averaged per position
    llr = np.log(p_init[rows, tokens]) - np.log(p_final[rows, tokens])  # (b, n)
    early, late = llr[:, : n // 5].mean(), llr[:, -n // 5 :].mean()
    assert early > 0.1 and late < -0.1


def test_generator_is_seeded():
    a = SortingGenerator(40, seed=7).sample(5)
    b = SortingGenerator(40, seed=7).sample(5)
    c = SortingGenerator(40, seed=8).sample(5)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_generator_validates_arguments():
    with pytest.raises(ValueError, match="length"):
        SortingGenerator(0)
    with pytest.raises(ValueError, match="batch_size"):
        SortingGenerator(5).sample(0)
    with pytest.raises(ValueError, match="p_init"):
        SortingGenerator(5).draw_tokens(np.ones((2, 20)) / 20, np.ones((2, 19)) / 19)


# --- loss and accuracy -----------------------------------------------------------------------


def test_loss_and_accuracy_count_only_target_positions():
    batch = make_batch(SortingGenerator(11, seed=0).sample(3), 32)
    torch.manual_seed(0)
    logits = torch.randn(*batch.labels.shape, VOCAB_SIZE)
    scored = batch.labels != IGNORE
    perfect = logits.clone()
    perfect[scored] = F.one_hot(batch.labels[scored], VOCAB_SIZE).float() * 50
    assert sorting_accuracy(perfect, batch.labels) == (60, 60)
    assert sorting_loss(perfect, batch.labels) < 1e-6
    # garbage at unscored positions changes neither loss nor accuracy
    noisy = perfect.clone()
    noisy[~scored] = torch.randn(int((~scored).sum()), VOCAB_SIZE) * 100
    assert sorting_accuracy(noisy, batch.labels) == (60, 60)
    assert torch.equal(sorting_loss(noisy, batch.labels), sorting_loss(perfect, batch.labels))
    expected = F.cross_entropy(logits[scored], batch.labels[scored])
    assert torch.allclose(sorting_loss(logits, batch.labels), expected)


def test_model_loss_is_cross_entropy_on_the_20_targets():
    torch.manual_seed(0)
    model = SortingLM(Transformer(config()), 32)
    batch = make_batch(SortingGenerator(sequence_length(2, 32), seed=0).sample(2), 32)
    loss, out = model.loss(batch)
    assert out.start == 32 and out.logits.shape == (2, 32, VOCAB_SIZE)
    labels = batch.labels[:, 32:]
    scored = labels != IGNORE
    assert int(scored.sum()) == 40
    assert torch.allclose(loss, F.cross_entropy(out.logits[scored], labels[scored]))


# --- the model -------------------------------------------------------------------------------


class SumMemory(SegmentEncoder):
    """Toy memory: a learned start, plus a running sum of projected segment mean embeddings."""

    def __init__(self, cfg: ModuleConfig) -> None:
        super().__init__(cfg)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.initial = nn.Parameter(torch.randn(cfg.d_model))  # used by segment 1 only
        self.write = nn.Linear(cfg.d_model, cfg.d_model)
        self.grad_modes: list[bool] = []
        self._aux = None

    def forward(self, input_ids, attention_mask, *, memory=None):
        self.grad_modes.append(torch.is_grad_enabled())
        x = self.embed(input_ids)  # (b, t, d)
        if memory is None:
            memory = self.initial.expand(x.shape[0], -1)  # (b, d)
        hidden = x + memory[:, None]  # reads only previous segments: causal
        one = x.new_ones(())
        self._aux = one if self._aux is None else self._aux + one
        new = memory + self.write(mean_pool(x, attention_mask))
        return EncoderOutput(hidden, mean_pool(hidden, attention_mask), new)

    def auxiliary_loss(self):
        aux, self._aux = self._aux, None
        return aux


def _three_segment_batch():
    s = 24
    return make_batch(SortingGenerator(sequence_length(3, s), seed=0).sample(2), s), s


@pytest.mark.parametrize("grad_segments", [1, 2, 3])
def test_earlier_segments_run_without_grad(grad_segments):
    batch, s = _three_segment_batch()
    torch.manual_seed(0)
    module = SumMemory(config())
    model = SortingLM(module, s, grad_segments=grad_segments)
    loss, out = model.loss(batch)
    loss.backward()
    assert module.grad_modes == [False] * (3 - grad_segments) + [True] * grad_segments
    assert out.logits.shape[1] == grad_segments * s
    # the regulariser counts only the segments with a graph (1 per segment here)
    assert float(out.auxiliary) == grad_segments
    # the learned start memory is only read by segment 1: a gradient only when it has a graph
    initial = module.initial.grad
    assert (initial is not None and float(initial.abs().sum()) > 0) == (grad_segments == 3)
    # the memory write of segment 2 feeds segment 3 only when segment 2 has a graph
    write = module.write.weight.grad
    assert (write is not None and float(write.abs().sum()) > 0) == (grad_segments >= 2)


def test_gradient_equals_detached_memory_computation():
    batch, s = _three_segment_batch()
    torch.manual_seed(0)
    module = SumMemory(config())
    model = SortingLM(module, s)
    loss, _ = model.loss(batch)
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    # by hand: memory of segments 1-2 as constants, then segment 3 with a graph
    ids, mask = batch.input_ids, batch.attention_mask
    memory = module(ids[:, :s], mask[:, :s]).memory
    memory = module(ids[:, s : 2 * s], mask[:, s : 2 * s], memory=memory).memory.detach()
    hidden = module(ids[:, 2 * s :], mask[:, 2 * s :], memory=memory).hidden
    manual = sorting_loss(model.head(hidden), batch.labels[:, 2 * s :])
    manual_grads = torch.autograd.grad(manual, list(model.parameters()), allow_unused=True)
    assert torch.allclose(loss, manual + 1.0)  # + the toy regulariser of segment 3
    for got, want in zip(grads, manual_grads):
        if want is None:
            assert got is None or float(got.abs().max()) == 0
        else:
            assert torch.allclose(got, want, atol=1e-6)


def test_transformer_earlier_segments_run_without_grad():
    modes = []
    module = Transformer(config())
    module.register_forward_pre_hook(lambda *_: modes.append(torch.is_grad_enabled()))
    model = SortingLM(module, 24)
    model.loss(make_batch(SortingGenerator(sequence_length(4, 24), seed=0).sample(2), 24))
    assert modes == [False, False, False, True]


def test_model_validates_arguments():
    with pytest.raises(ValueError, match="causal"):
        SortingLM(Transformer(ModuleConfig(vocab_size=22, d_model=16, heads=2)), 32)
    with pytest.raises(ValueError, match="vocab_size"):
        SortingLM(Transformer(ModuleConfig(vocab_size=10, d_model=16, heads=2, causal=True)), 32)
    with pytest.raises(ValueError, match="grad_segments"):
        SortingLM(Transformer(config()), 32, grad_segments=0)
    model = SortingLM(Transformer(config()), 16)  # the targets would straddle two segments
    with pytest.raises(ValueError, match="target"):
        model.loss(make_batch(SortingGenerator(11, seed=0).sample(2), 16))


def test_transformer_learns_sorting_beyond_chance(one_thread):
    start = time.perf_counter()
    torch.manual_seed(0)
    model = SortingLM(Transformer(config(d=32, layers=2)), 32)
    n = sequence_length(1, 32)
    before = evaluate_sorting(model, n, examples=128)
    losses = train_sorting(model, n, steps=150, batch_size=32, lr=3e-3, seed=0)
    after = evaluate_sorting(model, n, examples=128)
    print(f"accuracy {before:.3f} -> {after:.3f} in {time.perf_counter() - start:.1f}s")
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.5
    assert after > 0.25 and after > before + 0.15  # chance is 0.05


def test_cosine_schedule_warms_up_then_decays_to_zero():
    factor = cosine_schedule(100, 10)
    assert factor(0) == pytest.approx(0.1) and factor(9) == pytest.approx(1.0)
    assert factor(10) == pytest.approx(1.0) and factor(55) == pytest.approx(0.5)
    assert factor(100) == pytest.approx(0.0) and factor(200) == pytest.approx(0.0)


def test_training_is_seeded(one_thread):
    def run():
        torch.manual_seed(0)
        model = SortingLM(Transformer(config()), 32)
        return train_sorting(model, 11, steps=3, batch_size=4, seed=5)

    assert run() == run()


@pytest.mark.parametrize("name", [n for n in MEMORY_MODULES if n != "transformer"])
def test_memory_modules_plug_in(name):
    module = build_memory_module(name, config(), 24)
    model = SortingLM(module, 24)
    batch = make_batch(SortingGenerator(sequence_length(2, 24), seed=0).sample(2), 24)
    loss, out = model.loss(batch)
    loss.backward()
    assert torch.isfinite(loss) and out.logits.shape == (2, 24, VOCAB_SIZE)
    assert model.head.weight.grad is not None


# --- the experiment script -------------------------------------------------------------------


def _script():
    spec = importlib.util.spec_from_file_location("sorting_experiment", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sorting_experiment"] = module  # its worker function must pickle by name
    spec.loader.exec_module(module)
    return module


def test_script_arguments():
    script = _script()
    args = script.parse_args([])
    assert args.segments == [2, 4, 8] and args.segment_length == 32
    assert (args.steps, args.lr, args.jobs, args.threads) == (400, 5e-3, 2, 1)
    assert "transformer" in args.modules and args.modules == list(MEMORY_MODULES)
    assert args.warmup == 100
    # Memformer's writer learns only through the memory: it trains over every segment
    assert script.grad_segments("memformer", 8, args) == 8
    assert script.grad_segments("infinity-former", 8, args) == 1
    args = script.parse_args(
        ["--modules", "transformer", "full-attention", "--segments", "2", "3", "--steps", "5"]
    )
    assert args.modules == ["transformer", "full-attention"] and args.segments == [2, 3]
    bad = (["--segment-length", "16"], ["--out", "x.txt"], ["--modules", "lstm"], ["--jobs", "0"])
    for argv in bad:
        with pytest.raises(SystemExit):
            script.parse_args(argv)


def test_script_end_to_end(tmp_path, capsys, one_thread):
    script = _script()
    common = ["--segments", "1", "2", "--segment-length", "24", "--steps", "2", "--batch-size"]
    common += ["4", "--d-model", "16", "--layers", "1", "--eval-examples", "8"]
    modules = ["--modules", "transformer", "full-attention"]
    results = script.main([*modules, *common, "--out", str(tmp_path / "table.md")])
    assert set(results) == {
        (1, "transformer"),
        (2, "transformer"),
        (1, "full-attention"),
        (2, "full-attention"),
    }
    assert all(0.0 <= v <= 1.0 for v in results.values())
    table = (tmp_path / "table.md").read_text()
    assert "| Segments | transformer | full-attention |" in table
    assert "| 2 |" in table and "| 1 |" in table
    assert "| Segments |" in capsys.readouterr().out
    # the same cells in two forked worker processes give the same numbers
    parallel = script.main([*modules, *common, "--jobs", "2", "--out", str(tmp_path / "t.csv")])
    assert parallel == results
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0] == "segments,module,accuracy" and len(lines) == 5


# --- the encoder benchmark (experiments/bench/encoders.py) -----------------------------------

BENCH = Path(__file__).resolve().parents[3] / "experiments" / "bench" / "encoders.py"


def test_encoder_benchmark_tiny_run(capsys, one_thread):
    spec = importlib.util.spec_from_file_location("encoder_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["--modules", "full-attention", "transformer", "--lengths", "64", "32", "--segment"]
    argv += ["32", "--d-model", "16", "--heads", "2", "--layers", "1", "--repeats", "1"]
    results = bench.main(argv)
    assert [r["length"] for r in results["full-attention"]] == [32, 64]  # sorted
    full, segmented = results["full-attention"], results["transformer"]
    assert all(r["fwd"] > 0 and r["train"] > 0 for r in full + segmented)
    # full attention saves its (b, h, L, L) attention weights: more than 2x when L doubles;
    # the segment-recurrent run back-propagates through one segment whatever L is
    assert full[1]["saved"] > 2 * full[0]["saved"]
    assert segmented[1]["saved"] == pytest.approx(segmented[0]["saved"], rel=0.05)
    out = capsys.readouterr().out
    assert "| L | fwd ms | x fwd |" in out and "| L | L/L0 | full-attention | transformer |" in out
