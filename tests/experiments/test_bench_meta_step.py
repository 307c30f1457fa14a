"""The Meta-MbPA step bench runs on a tiny model and prints each scope's cost against SEQ's."""

import re

import pytest
import torch


def test_meta_step_bench_prints_each_scope_against_seq(load_script, capsys):
    meta_step = load_script("bench/meta_step.py")

    meta_step.main(["--encoder", "tiny", "--steps", "1", "--scopes", "top1,head,head-loop"])
    out = capsys.readouterr().out
    assert "memory of 64 examples, K = 32" in out
    assert re.search(r"^seq\s+[\d.]+ s/example$", out, re.M)
    for scope in ("top1", "head", "head-loop"):
        ratio = re.search(rf"^meta-mbpa {scope}\s+[\d.]+ s/example\s+([\d.]+)x seq$", out, re.M)
        assert ratio and float(ratio.group(1)) > 0


def test_meta_step_bench_refuses_no_timed_steps(load_script):
    meta_step = load_script("bench/meta_step.py")

    with pytest.raises(SystemExit):
        meta_step.main(["--encoder", "tiny", "--steps", "0"])


def test_meta_step_bench_hands_its_batches_over_on_the_runs_device(load_script):
    """On an H100 the bench fed CPU batches to a CUDA model, then CPU rows to the memory's CUDA
    key network (index_selects across devices); the ``meta`` device stands for the GPU here."""
    meta_step = load_script("bench/meta_step.py")

    device = torch.device("meta")
    kind, data, fill = meta_step.budget_batches(None, 1, device)
    assert len(data) == 2 and sum(b.num_examples for b in fill) == 64
    key_rows = kind.key_rows(fill[0].examples)  # what the memory writer encodes
    for batch in [*data, *fill, key_rows]:
        assert batch.input_ids.device == device and batch.labels.device == device


def test_the_benchmarks_page_shows_the_committed_head_batching_run():
    from pathlib import Path

    root = Path(__file__).parents[2]
    committed = root / "results" / "bench" / "meta_step_head_batching_2026-12-02_cpu.txt"
    page = (root / "docs" / "guide" / "benchmarks.md").read_text(encoding="utf-8")
    assert committed.read_text().strip() in page
