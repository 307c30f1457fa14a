"""``lifelong lm``: flags checked first; one row per module; knn-lm reuses the transformer."""

import json

import pytest

from lifelong.experiment.cli import main


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the cat sat on the mat. the dog sat on the log.\n" * 60, encoding="utf-8")
    return path


def lm(corpus, *flags):
    small = ["--width", "16", "--layers", "1", "--heads", "2", "--segment-length", "8"]
    return main(["lm", "--corpus", str(corpus), "--steps", "3", "--batch-size", "2",
                 "--no-progress", *small, *flags])  # fmt: skip


def test_rows_for_every_module_kind_and_the_json(corpus, tmp_path, capsys):
    out = tmp_path / "lm.json"
    modules = "knn-lm,memsizer,full-attention,spalm"
    flags = ["--modules", modules, "--segments", "2", "--json", str(out)]
    assert lm(corpus, *flags) == 0
    printed = capsys.readouterr().out
    assert "budget: width 16, 1 layers, 2 heads, window 16 = 2 x 8, 3 steps" in printed
    rows = json.loads(out.read_text())["modules"]
    assert list(rows) == ["knn-lm", "memsizer", "full-attention", "spalm"]  # transformer aside
    knn = rows["knn-lm"]
    assert knn["datastore"] > 0 and knn["extra"]["k"] in knn["extra"]["grid"]["k"]
    assert knn["extra"]["lambda"] in knn["extra"]["grid"]["lambda"] and knn["extra"]["lambda"] < 1
    assert knn["val_bpc"] is None  # tuned on the first half: only the held-out half is scored
    spalm = rows["spalm"]
    assert spalm["datastore"] == knn["datastore"]  # one datastore, two readers
    assert sum(spalm["extra"]["gate_histogram"]) == pytest.approx(1.0)
    assert 0 <= spalm["extra"]["gate_below_half"] <= 1
    for row in rows.values():
        scored = row["val_bpc"] is None if row is knn else row["val_bpc"] > 0
        assert scored and row["heldout_bpc"] > 0 and row["params"] > 0 and row["memory_mb"] > 0
        assert row["train_tokens_per_s"] > 0 and row["eval_tokens_per_s"] > 0
    assert "| knn-lm |" in printed and "| memsizer |" in printed and "| spalm |" in printed


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--modules", "transformer,gpt5"], "unknown module 'gpt5'"),
        (["--steps", "0"], "--steps must be a positive integer"),
        (["--lr", "nan"], "--lr must be a positive finite number"),
        (["--width", "10", "--heads", "4"], "not divisible"),
    ],
)
def test_bad_flags_are_one_line_errors_before_training(corpus, flags, message, capsys):
    assert lm(corpus, *flags) == 2
    assert message in capsys.readouterr().err


def test_a_non_utf8_corpus_names_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n" * 50 + b"caf\xe9\n")
    assert lm(bad) == 2
    assert "bad.txt:51: not UTF-8" in capsys.readouterr().err


def test_the_memory_token_and_recurrence_families_run_in_the_bench(corpus, tmp_path):
    out = tmp_path / "lm.json"
    modules = "rmt,ernie-doc,segatron,memory-transformer,memctrl,readtwice,feedback"
    assert lm(corpus, "--modules", modules, "--segments", "2", "--json", str(out)) == 0
    rows = json.loads(out.read_text())["modules"]
    assert list(rows) == modules.split(",")
    assert all(row["val_bpc"] > 0 for row in rows.values())


def test_the_json_is_written_per_row_and_a_rerun_resumes(corpus, tmp_path, capsys):
    out = tmp_path / "lm.json"
    assert lm(corpus, "--modules", "transformer", "--json", str(out)) == 0
    first = json.loads(out.read_text())
    capsys.readouterr()
    assert lm(corpus, "--modules", "transformer,memsizer", "--json", str(out)) == 0
    printed = capsys.readouterr().out
    assert "resuming: transformer already in" in printed
    assert "transformer: val bpc" not in printed  # not trained again
    second = json.loads(out.read_text())
    assert list(second["modules"]) == ["transformer", "memsizer"]
    assert second["modules"]["transformer"] == first["modules"]["transformer"]
    assert "| transformer |" in printed and "| memsizer |" in printed
    assert lm(corpus, "--modules", "memsizer", "--json", str(out)) == 0  # others kept
    assert list(json.loads(out.read_text())["modules"]) == ["memsizer", "transformer"]


def test_a_json_of_another_budget_is_refused_before_training(corpus, tmp_path, capsys):
    out = tmp_path / "lm.json"
    assert lm(corpus, "--modules", "transformer", "--json", str(out)) == 0
    capsys.readouterr()
    assert lm(corpus, "--modules", "transformer", "--seed", "1", "--json", str(out)) == 2
    err = capsys.readouterr().err
    assert "holds rows of another budget (seed: 0 there, 1 now)" in err
    out.write_text("{not json", encoding="utf-8")
    assert lm(corpus, "--modules", "transformer", "--json", str(out)) == 2
    assert "not a `lifelong lm` JSON" in capsys.readouterr().err


def test_segatron_reads_the_corpus_sentence_and_line_ends():
    from lifelong.lm.bench import BenchSettings, build_lm

    chars = " .\nacdeghlmnost"
    model = build_lm("segatron", len(chars), BenchSettings(), 0, chars).module
    ends = model.ends.nonzero().tolist()  # (id, 0 = sentence, 1 = paragraph)
    assert sorted(ends) == [[chars.index("."), 0], [chars.index("\n"), 0], [chars.index("\n"), 1]]


def test_pkm_trains_its_values_with_sparse_updates_as_the_paper():
    """Lample et al. (2019, §4.2): the value table takes sparse Adam updates (lr 1e-3), not the
    dense AdamW with weight decay of the other weights."""
    import torch

    from lifelong.encoders.pkm import sparse_parameters
    from lifelong.lm.bench import BenchSettings, build_lm
    from lifelong.lm.text import TrainSettings, adamw

    settings = BenchSettings(width=16, layers=2, heads=2, segment_length=8)
    model = build_lm("pkm", 20, settings, seed=0)
    (values,) = sparse_parameters(model)
    model(torch.randint(0, 20, (2, 8))).sum().backward()
    assert values.grad is not None and values.grad.is_sparse  # only the rows read
    dense = {id(p) for g in adamw(model, 1e-3).param_groups for p in g["params"]}
    assert id(values) not in dense and TrainSettings().sparse_lr == 1e-3


def test_a_json_resumes_from_another_copy_of_the_same_corpus_but_not_another_text(
    corpus, tmp_path, capsys
):
    """The budget names the corpus by file name and digest, not path: a checkout elsewhere (or a
    moved file) resumes; other text is refused."""
    out = tmp_path / "lm.json"
    assert lm(corpus, "--modules", "transformer", "--json", str(out)) == 0
    budget = json.loads(out.read_text())["budget"]
    assert budget["corpus"] == "corpus.txt" and len(budget["corpus_sha256"]) == 16
    moved = tmp_path / "elsewhere" / "corpus.txt"
    moved.parent.mkdir()
    moved.write_bytes(corpus.read_bytes())
    assert lm(moved, "--modules", "transformer,memsizer", "--json", str(out)) == 0
    assert set(json.loads(out.read_text())["modules"]) == {"transformer", "memsizer"}
    moved.write_text("other text entirely. " * 100, encoding="utf-8")
    capsys.readouterr()
    assert lm(moved, "--modules", "pkm", "--json", str(out)) != 0
    assert "corpus_sha256" in capsys.readouterr().err


def test_the_committed_tables_resume_with_the_shipped_corpus():
    from pathlib import Path

    from lifelong.lm.bench import corpus_identity

    root = Path(__file__).parents[3]
    shipped = corpus_identity(
        root / "lifelong" / "streams" / "samples" / "tinyshakespeare" / "input.txt"
    )
    for name in ("lm_s0.json", "lm_s1.json", "lm_2layers_s0.json"):
        budget = json.loads((root / "results" / "lm" / name).read_text())["budget"]
        assert {k: budget[k] for k in shipped} == shipped, name
