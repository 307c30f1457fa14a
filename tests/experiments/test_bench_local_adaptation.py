"""The local-adaptation bench parses its rows and counts each path's work."""

from pathlib import Path

import pytest


@pytest.fixture()
def bench(load_script):
    return load_script("bench/local_adaptation.py")


def test_rows_name_scope_rank_batching_and_precision(bench):
    runs = bench.parse_runs("all,head,lora8,lora16vmap,lora8@bf16,all@bf16", 6)
    assert [r.label for r in runs] == [
        "reference all",
        "fast all",
        "fast head",
        "fast lora r=8",
        "fast lora r=16 (vmap)",
        "fast lora r=8 bf16",
        "fast all bf16",
    ]
    assert runs[0].precision == "fp32"  # the reference is the paper's fp32 path
    assert (runs[4].rank, runs[4].batching) == (16, "vmap")
    with pytest.raises(SystemExit, match="precision must be"):
        bench.parse_runs("lora8@int8", 6)
    with pytest.raises(ValueError):
        bench.parse_runs("top9", 6)  # more layers than the encoder has


def test_a_row_may_set_its_own_chunk(bench):
    runs = bench.parse_runs("lora8,lora8:4,all:2@bf16,top1:4", 6)
    assert [(r.label, r.chunk) for r in runs[1:]] == [
        ("fast lora r=8", None),  # --chunk decides
        ("fast lora r=8 x4", 4),
        ("fast all x2 bf16", 2),
        ("fast top1 x4", 4),
    ]
    assert runs[3].precision == "bf16"
    with pytest.raises(SystemExit, match="whole number"):
        bench.parse_runs("lora8:four", 6)


def test_token_layers_count_padding_for_the_reference_only(bench):
    # one test input of 3 tokens, its K = 2 neighbours of 4 and 2 tokens, 2 layers, 1 step
    args = (2, 1, [3], [[4, 2]], [4, 2])
    assert bench.token_layers("reference", *args) == 1 * 3 * 2 * 2 * 4 + 2 * 3
    # the fast path's last layer computes [CLS] alone: t / 6 + 5 / 6 token-layers for a row
    last = [4 / 6 + 5 / 6, 2 / 6 + 5 / 6]
    assert bench.token_layers("all", *args) == pytest.approx(
        3 * (6 + sum(last)) + 3 + 3 / 6 + 5 / 6
    )
    assert bench.token_layers("lora", *args) == 2 * 2 * 6 + 2 * 3
    assert bench.token_layers("head", *args) == 2 * 6 + 2 * 3


def test_the_benchmarks_page_shows_the_committed_cpu_run():
    """The page's 2026-12-03 table is the printed file to the digit, and its prose numbers too."""
    root = Path(__file__).parents[2]
    committed = (root / "results" / "bench" / "local_adaptation_2026-12-03_cpu.txt").read_text()
    page = (root / "docs" / "guide" / "benchmarks.md").read_text(encoding="utf-8")
    assert committed.strip() in page
    rows = {
        line[:30].strip(): line[30:].split()
        for line in committed.splitlines()
        if line.startswith(("reference", "fast"))
    }
    section = page.split("**Re-measured with today's code")[1].split("**Demo.**")[0]
    for label, speed_up in [
        ("fast all", "1.4x"),
        ("fast top1", "15.3x"),
        ("fast head", "218.8x"),
        ("fast lora r=8", "1.6x"),
        ("fast lora r=8 (vmap)", "0.7x"),
    ]:
        assert rows[label][1] == speed_up and speed_up in section.split("```")[2], label
    assert rows["fast top1"][2] == "41.9x" and "41.9x" in section.split("```")[2]


def test_the_benchmarks_page_shows_the_batched_cpu_runs():
    """Both chunked runs are on the page to the digit, and the prose reads their speed-ups."""
    root = Path(__file__).parents[2]
    page = (root / "docs" / "guide" / "benchmarks.md").read_text(encoding="utf-8")
    section = page.split("**Batched over test examples, against the per-example reference")[1]
    section = section.split("**Demo.**")[0]
    prose = section.split("```")[4]  # after the second table
    speed_ups = {}
    for name in ("unsorted", "sorted"):
        suffix = "_unsorted" if name == "unsorted" else ""
        path = f"local_adaptation_2026-12-03_cpu_chunks{suffix}.txt"
        committed = (root / "results" / "bench" / path).read_text()
        assert committed.strip() in section, path
        assert f"results/bench/{path}" in section
        speed_ups[name] = {
            line[:30].strip(): line[30:].split()[1]
            for line in committed.splitlines()
            if line.startswith(("reference", "fast"))
        }
    assert speed_ups["unsorted"]["fast all x2"] == "0.9x"  # before width-sorted chunks
    assert "fell to 0.9x" in section.split("```")[2]
    sorted_run = speed_ups["sorted"]
    for label in ("fast all x2", "fast all x4", "fast top1 x4", "fast lora r=8 (vmap) x2"):
        assert float(sorted_run[label][:-1]) >= 1.0, label  # batched: at least the reference
    for label, speed_up in [
        ("fast all x2", "1.1x"),
        ("fast all x4", "1.0x"),
        ("fast top1 x4", "6.5x"),
        ("fast lora r=8 (vmap) x2", "1.2x"),
        ("fast lora r=8 (vmap) x4", "1.1x"),
        ("fast all", "1.7x"),
        ("fast top1", "21.3x"),
    ]:
        assert sorted_run[label] == speed_up and speed_up in prose, label
    assert speed_ups["unsorted"]["fast head"] == "280.3x" and "280.3x" in prose
    for label in ("fast lora r=8 x2", "fast lora r=8 x4"):
        assert speed_ups["unsorted"][label] in prose, label
