"""The `lifelong lm` table over seeds: one budget, per-seed columns, means and claim verdicts."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from lifelong.lm.bench import BenchSettings, Row, _write_rows


@pytest.fixture
def lm_table(load_script):
    return load_script("lm/lm_table.py")


def _budget(seed: int, steps: int = 1000) -> dict:
    settings = BenchSettings(segments=4, segment_length=32)
    budget = {**asdict(settings), "seed": seed, "corpus": "input.txt"}
    budget["train"]["steps"] = steps
    return budget


def _row(module: str, bpc: float, **extra) -> Row:
    return Row(module, 1000, bpc, bpc + 0.01, 4000.0, 60000.0, 40.0, seconds=120.0, **extra)


def _file(tmp_path: Path, seed: int, rows: list[Row], steps: int = 1000) -> Path:
    path = tmp_path / f"lm_s{seed}.json"
    _write_rows(path, _budget(seed, steps), rows)
    return path


def test_one_row_per_module_with_every_seed_and_their_mean(lm_table, tmp_path):
    s0 = _file(tmp_path, 0, [_row("transformer-xl", 2.4), _row("transformer", 2.6)])
    s1 = _file(tmp_path, 1, [_row("transformer", 2.8), _row("transformer-xl", 2.5)])
    text = lm_table.main([str(s0), str(s1)])
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [r.split("|")[1].strip() for r in rows[:2]] == ["`transformer`", "`transformer-xl`"]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[4:7] == ["2.600", "2.800", "2.700"]  # seed 0, seed 1, mean
    assert cells[-1] == "2.0"  # minutes
    assert "seeds 0, 1" in text and "4 x 32" in text and "1000 steps" in text


def test_a_module_missing_on_one_seed_shows_a_dash_and_the_mean_of_the_others(lm_table, tmp_path):
    s0 = _file(tmp_path, 0, [_row("transformer", 2.6), _row("pkm", 2.4)])
    s1 = _file(tmp_path, 1, [_row("transformer", 2.8)])
    text = lm_table.main([str(s0), str(s1)])
    pkm = next(line for line in text.splitlines() if line.startswith("| `pkm`"))
    assert [c.strip() for c in pkm.strip("|").split("|")][4:7] == ["2.400", "–", "2.400"]


def test_a_val_bpc_one_seed_lacks_gives_no_mean(lm_table, tmp_path):
    knn_scored_held_out_only = Row("knn-lm", 1000, None, 2.5, 4000.0, 60.0, 40.0, seconds=60.0)
    s0 = _file(tmp_path, 0, [_row("transformer", 2.6), knn_scored_held_out_only])
    s1 = _file(tmp_path, 1, [_row("transformer", 2.8), _row("knn-lm", 2.4)])
    text = lm_table.main([str(s0), str(s1)])
    knn = next(line for line in text.splitlines() if line.startswith("| `knn-lm`"))
    assert [c.strip() for c in knn.strip("|").split("|")][4:8] == ["–", "2.400", "–", "2.455"]


@pytest.mark.parametrize(
    ("knn", "verdict"),
    [((2.5, 2.7), "shows"), ((2.7, 2.9), "reversed"), ((2.5, 2.9), "mixed")],
)
def test_claims_are_judged_on_every_seeds_heldout_bpc(lm_table, tmp_path, knn, verdict):
    extra = {"k": 8, "lambda": 0.25, "eval_cost_vs_lm": 12.0, "index": None}
    files = [
        _file(
            tmp_path,
            seed,
            [_row("transformer", base), _row("knn-lm", k, extra=extra, datastore=1000)],
        )
        for seed, (base, k) in enumerate(zip((2.6, 2.8), knn, strict=True))
    ]
    text = lm_table.main([str(f) for f in files])
    line = next(row for row in text.splitlines() if row.startswith("| kNN-LM"))
    assert line.rstrip(" |").endswith(verdict)
    assert "12.0x the LM's own forward" in text
    assert "| not run |" in text  # the claims whose modules did not run


def test_runs_of_different_budgets_are_refused_naming_the_key(lm_table, tmp_path, capsys):
    s0 = _file(tmp_path, 0, [_row("transformer", 2.6)])
    s1 = _file(tmp_path, 1, [_row("transformer", 2.6)], steps=500)
    with pytest.raises(SystemExit):
        lm_table.main([str(s0), str(s1)])
    err = capsys.readouterr().err
    assert "'train'" in err and str(s1) in err and str(s0) in err


def test_a_repeated_seed_or_a_foreign_file_is_refused(lm_table, tmp_path, capsys):
    s0 = _file(tmp_path, 0, [_row("transformer", 2.6)])
    with pytest.raises(SystemExit):
        lm_table.main([str(s0), str(s0)])
    assert "seed 0 is already" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": []}))
    with pytest.raises(SystemExit):
        lm_table.main([str(other)])
    assert "not a `lifelong lm --json` file" in capsys.readouterr().err


def test_the_written_table_is_what_it_prints(lm_table, tmp_path):
    s0 = _file(tmp_path, 0, [_row("transformer", 2.6)])
    out = tmp_path / "table.md"
    assert lm_table.main([str(s0), "--out", str(out)]) == out.read_text()


def test_spalms_gate_distribution_is_reported_per_seed(lm_table, tmp_path):
    histogram = [0.0] * 8 + [0.05, 0.95]  # 5% of characters in [0.8, 0.9), the rest above 0.9
    gate = {"gate_mean": 0.97, "gate_below_half": 0.0001, "gate_histogram": histogram}
    s0 = _file(tmp_path, 0, [_row("transformer-xl", 2.5), _row("spalm", 2.4, extra=gate)])
    text = lm_table.main([str(s0)])
    assert "seed 0: mean 0.970; 5.0% of validation characters below 0.9, 0.01% below 0.5" in text


def test_a_causal_memory_transformers_tokens_read_nothing_so_its_claim_is_not_judged(lm_table):
    """Under the causal mask the [mem] tokens come first and attend only to each other: their
    outputs are the same for every input, so the LM table cannot test the paper's claim."""
    import torch

    from lifelong.encoders.layers import ModuleConfig
    from lifelong.encoders.memory_modules import build_memory_module

    config = ModuleConfig(vocab_size=20, d_model=16, heads=2, layers=2, ffn=32, causal=True,
                          max_positions=8, dropout=0.0)  # fmt: skip
    module = build_memory_module("memory-transformer", config, 8).eval()
    seen = []
    module.layers[-1].register_forward_hook(lambda m, args, out: seen.append(out))
    for seed in (0, 1):
        ids = torch.randint(0, 20, (1, 8), generator=torch.Generator().manual_seed(seed))
        module.step(ids, torch.ones_like(ids), None)
    slots = module.slots  # the [mem] positions come first: (1, slots + 8, d)
    assert torch.equal(seen[0][:, :slots], seen[1][:, :slots])  # the same for every input
    assert not torch.equal(seen[0][:, slots:], seen[1][:, slots:])
    (claim,) = [c for c in lm_table.CLAIMS if c.module == "memory-transformer"]
    diffs, verdict = lm_table.judge(claim, [(0, {})])
    assert verdict.startswith("not applicable") and "read" in verdict


def test_the_encoders_pages_lm_table_is_the_scripts_output_on_the_committed_files(lm_table):
    """The block between the page's ``lm-table`` markers is what the command in its opening
    marker prints from the committed JSON files: a changed digit on either side fails here."""
    import re
    import shlex
    from pathlib import Path

    root = Path(__file__).parents[2]
    page = (root / "docs" / "guide" / "encoders.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- lm-table: (?P<cmd>[^>]*?) -->\n(?P<block>.*?)<!-- /lm-table -->",
                      page, re.S)  # fmt: skip
    assert found, "docs/guide/encoders.md has no lm-table block"
    command = shlex.split(found["cmd"])
    assert command[:2] == ["python", "experiments/lm/lm_table.py"]
    printed = lm_table.main([str(root / arg) for arg in command[2:]])
    assert found["block"].strip() == printed.strip(), (
        f"the encoders page's LM table is not the committed files' (regenerate: {found['cmd']})"
    )


def test_the_knn_note_gives_the_grid_searched_and_the_held_out_recall(lm_table, tmp_path):
    extra = {
        "k": 1024,
        "lambda": 0.4,
        "grid": {"k": [8, 32, 128, 512, 1024, 2048], "lambda": [0.0, 0.25, 0.5]},
        "eval_cost_vs_lm": 140.0,
        "index": "torch IVF1024,Flat, nprobe 64",
        "held_out_recall": {"k": 1024, "queries": 512, "recall": 0.9871, "se": 0.0012},
    }
    rows = [_row("transformer", 2.6), _row("knn-lm", 2.4, datastore=5000, extra=extra)]
    text = lm_table.main([str(_file(tmp_path, 0, rows))])
    assert (
        "kNN-LM, seed 0: k 1024, λ 0.4 (of k 8, 32, 128, 512, 1024, 2048; λ up to 0.5); "
        "evaluation 140.0x the LM's own forward per token (datastore 5,000 entries); search "
        "torch IVF1024,Flat, nprobe 64: recall@1024 0.987 (± 0.001) on 512 held-out contexts"
    ) in text
