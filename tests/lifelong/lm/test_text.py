"""Character-level LM on real text: corpus, nanoGPT's schedule, training, evaluation."""

import math

import numpy as np
import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.learner import DivergenceError
from lifelong.lm.text import (
    DEFAULT_CORPUS,
    CausalLM,
    CharVocabulary,
    TrainSettings,
    evaluate_lm,
    learning_rate,
    lm_loss,
    load_corpus,
    train_lm,
    training_memory,
    whole_windows,
)
from lifelong.streams.core import DataFormatError


def tiny_lm(name="transformer", vocab=20, segment=8, **kwargs):
    torch.manual_seed(0)
    config = ModuleConfig(vocab_size=vocab, d_model=16, heads=2, layers=2, ffn=32, causal=True,
                          max_positions=segment)  # fmt: skip
    return CausalLM(build_memory_module(name, config, segment, **kwargs), segment)


def test_the_shipped_corpus_splits_as_nanogpt():
    corpus = load_corpus()
    assert corpus.path == DEFAULT_CORPUS
    assert corpus.vocab.size == 65  # nanoGPT's shakespeare_char vocabulary
    assert len(corpus.train) == 1_003_854 and len(corpus.val) == 111_540  # prepare.py's sizes
    assert corpus.vocab.decode(corpus.train[:14]) == "First Citizen:"


def test_bad_corpora_name_the_file_and_line(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"first line\nsecond caf\xe9\n")
    with pytest.raises(DataFormatError, match=r"latin1.txt:2: not UTF-8"):
        load_corpus(bad)
    with pytest.raises(DataFormatError, match="cannot read the corpus"):
        load_corpus(tmp_path / "missing.txt")
    short = tmp_path / "short.txt"
    short.write_text("ab")
    with pytest.raises(DataFormatError, match="too few"):
        load_corpus(short)


def test_vocabulary_round_trips():
    vocab = CharVocabulary.of("hello world")
    assert vocab.chars == " dehlorw" and vocab.decode(vocab.encode("hello")) == "hello"


def test_learning_rate_is_nanogpts_get_lr():
    lr = lambda step: learning_rate(step, 1e-3, 1e-4, 100, 2000)  # noqa: E731
    assert lr(0) == pytest.approx(1e-3 / 101) and lr(99) == pytest.approx(1e-3 * 100 / 101)
    assert lr(100) == pytest.approx(1e-3) and lr(2000) == pytest.approx(1e-4)
    assert lr(1050) == pytest.approx(1e-4 + 0.5 * 9e-4)  # half way: the cosine's middle
    assert lr(5000) == 1e-4


def test_windows_cover_the_data_in_order():
    data = np.arange(21)
    windows = list(whole_windows(data, 5, batch=3))
    x = torch.cat([w[0] for w in windows])
    y = torch.cat([w[1] for w in windows])
    assert x.shape == (4, 5) and torch.equal(y, x + 1)
    starts = np.concatenate([w[2] for w in windows])
    assert starts.tolist() == [0, 5, 10, 15] and torch.equal(x[:, 0], torch.from_numpy(starts))


def test_a_few_steps_lower_the_loss_and_memory_is_measured():
    text = "abcdefghij" * 200
    data = CharVocabulary.of(text).encode(text)
    model = tiny_lm(vocab=10)
    before, _ = evaluate_lm(model, data, 16)
    settings = TrainSettings(steps=30, batch_size=4, window=16, lr=1e-2, warmup=2)
    result = train_lm(model, data, settings, seed=0)
    after, tokens_per_second = evaluate_lm(model, data, 16)
    assert after < before - 1.0 and len(result.losses) == 30 and tokens_per_second > 0
    params = sum(p.numel() for p in model.parameters()) * 4
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert training_memory(model, settings, torch.device("cpu")) > 4 * params
    # measured on a copy: the model is left as it was
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    pkm = tiny_lm("pkm", vocab=10)  # batch norm: a step in train mode would move its statistics
    stats = pkm.module.layers[1].memory.query[1].running_mean.clone()
    training_memory(pkm, settings, torch.device("cpu"))
    assert torch.equal(pkm.module.layers[1].memory.query[1].running_mean, stats)


def test_a_non_finite_loss_stops_training_at_its_step():
    text = "abcdefghij" * 50
    data = CharVocabulary.of(text).encode(text)
    calls = []

    def logits(model, x, starts):
        calls.append(1)
        out = model(x)
        return out * float("nan") if len(calls) == 5 else out  # step 4

    settings = TrainSettings(steps=12, batch_size=2, window=8, warmup=1)
    with pytest.raises(DivergenceError, match="training loss is nan at step 4"):
        train_lm(tiny_lm(vocab=10), data, settings, logits=logits)
    assert len(calls) == 5  # no step after it


def test_the_head_is_tied_to_the_input_embedding():
    model = tiny_lm()
    assert model.head.weight is model.module.embed.words.weight


@pytest.mark.parametrize("name", ["transformer", "transformer-xl", "rmt", "memsizer"])
def test_an_untrained_lm_starts_near_the_uniform_loss(name):
    """nanoGPT's N(0, 0.02) embeddings: the tied head's first logits are small, loss ~ ln V.

    With PyTorch's N(0, 1) default the bench's untrained model scored about 75 nats/char.
    """
    torch.manual_seed(0)
    vocab = 65
    config = ModuleConfig(vocab_size=vocab, d_model=128, heads=4, layers=2, ffn=512,
                          causal=True, max_positions=32)  # fmt: skip
    model = CausalLM(build_memory_module(name, config, 32), 32)
    assert model.module.embed.words.weight.std().item() == pytest.approx(0.02, rel=0.1)
    x = torch.randint(0, vocab, (4, 64))
    with torch.no_grad():
        loss = lm_loss(model(x)[:, :-1], x[:, 1:]).item()
    assert abs(loss - math.log(vocab)) < 0.5


@pytest.mark.parametrize("name", ["transformer-xl", "memsizer", "pkm", "memformer"])
def test_memory_modules_train_as_text_lms(name):
    text = "to be or not to be " * 40
    data = CharVocabulary.of(text).encode(text)
    model = tiny_lm(name, vocab=len(set(text)))
    settings = TrainSettings(steps=3, batch_size=2, window=16, warmup=1)
    result = train_lm(model, data, settings)
    assert all(math.isfinite(v) for v in result.losses)
    nats, _ = evaluate_lm(model, data, 16)
    assert math.isfinite(nats)


@pytest.mark.parametrize("name", ["compressive", "infinity-former"])
def test_a_modules_regulariser_is_trained_each_step_and_never_carried_over(name, monkeypatch):
    from lifelong.encoders import segments

    text = "to be or not to be " * 40
    data = CharVocabulary.of(text).encode(text)
    model = tiny_lm(name, vocab=len(set(text)))  # memories default to multiples of 8 tokens
    drained = []
    real = segments.drain_auxiliary

    def spy(m):
        out = real(m)
        drained.append(out)
        return out

    monkeypatch.setattr("lifelong.lm.text.drain_auxiliary", spy)
    settings = TrainSettings(steps=3, batch_size=2, window=64, warmup=1)
    train_lm(model, data, settings)
    # per step: nothing left before the forward, the window's regulariser after it
    assert len(drained) == 6 and all(d is None for d in drained[::2])
    assert all(d is not None and d.requires_grad for d in drained[1::2])
    assert real(model) is None  # nothing accumulates across steps (it grew without bound)


def test_compressions_network_learns_from_the_reconstruction_loss():
    text = "to be or not to be " * 40
    data = CharVocabulary.of(text).encode(text)
    model = tiny_lm("compressive", vocab=len(set(text)))
    compression = model.module.compressions
    before = [p.detach().clone() for p in compression.parameters()]
    train_lm(model, data, TrainSettings(steps=2, batch_size=2, window=64, warmup=1))
    grads = [p.grad for p in compression.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    assert any(not torch.equal(b, p) for b, p in zip(before, compression.parameters()))
