"""The ∞-former ablation trains the named variants at `lifelong lm`'s budget and writes them."""

import json

import pytest
import torch

from lifelong.encoders.infinity_former import InfinityFormer
from lifelong.encoders.transformer_xl import RelativeAttention


@pytest.fixture
def ablation(load_script):
    return load_script("lm/infinity_former_ablation.py")


def test_unknown_variants_are_refused_before_training(ablation):
    with pytest.raises(SystemExit, match="unknown variants"):
        ablation.main(["--steps", "1", "--only", "infinity-former, no such thing"])


def test_the_variants_differ_in_what_they_say(ablation):
    vocab = 65
    old = ablation._old(vocab, 0).module
    assert old.positions == "distance-bias" and old.kl_weight == pytest.approx(1.28e-4)
    now = ablation._infinity(vocab, 0).module  # what `lifelong lm` builds
    assert isinstance(now.layers[0].attention, RelativeAttention) and now.kl_weight == 1e-6
    assert ablation._old(vocab, 0, kl_weight=0.0).module.kl_weight == 0.0
    empty = ablation._old(vocab, 0, empty_ltm=True)
    assert isinstance(empty.module, InfinityFormer)
    full = ablation._old(vocab, 0)
    window = torch.randint(0, vocab, (2, 4 * ablation.SEGMENT))
    empty(window), full(window)
    assert full.module.auxiliary_loss() is not None  # the LTM filled and was read
    assert empty.module.auxiliary_loss() is None  # never filled: every read is exactly zero


@pytest.mark.slow
def test_a_variant_trains_and_is_written(ablation, tmp_path):
    out, corpus = tmp_path / "rows.json", tmp_path / "corpus.txt"
    corpus.write_text("To be, or not to be, that is the question.\n" * 400, encoding="utf-8")
    name = "infinity-former, distance bias, KL off, LTM empty"
    rows = ablation.main(["--steps", "1", "--only", name, "--out", str(out),
                          "--corpus", str(corpus)])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["steps"] == 1 and list(written["rows"]) == list(rows)
    assert 4.0 < rows[name]["val_bpc"] < 9.0  # untrained: about log2 of the vocabulary
