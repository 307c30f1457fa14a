"""The auto-recall bench checks an IVF choice on fresh queries and says whether it meets 0.95."""

import re


def test_auto_recall_bench_reports_the_choice_and_its_fresh_recall(load_script, monkeypatch):
    from lifelong.memory import search

    auto_recall = load_script("bench/auto_recall.py")
    monkeypatch.setattr(search, "APPROXIMATE_FROM", 1_000)  # an IVF at the smoke test's size
    lines = auto_recall.main(["--quick", "--sizes", "3000", "--draws", "1", "--cache-dir", "off"])
    line = lines[-1]
    assert line.startswith("draw 0: 3,000 keys: torch IVF")
    checked = float(re.search(r"recall@32 ([\d.]+) on 256 held-out keys", line).group(1))
    fresh = float(re.search(r"fresh queries recall@32 ([\d.]+) by slots", line).group(1))
    assert checked >= 0.95 and 0 < fresh <= 1
    assert ("meets" in line) == (fresh >= 0.95)


def test_the_benchmarks_page_shows_the_committed_run_and_it_meets_the_target():
    from pathlib import Path

    root = Path(__file__).parents[2]
    committed = (root / "results" / "bench" / "auto_recall_2026-12-02_cpu.txt").read_text()
    assert committed.strip() in (root / "docs" / "guide" / "benchmarks.md").read_text()
    draws = [line for line in committed.splitlines() if line.startswith("draw")]
    sizes = {line.split(": ")[1].split(" keys")[0] for line in draws}
    assert sizes == {"100,000", "1,000,000"}
    for line in draws:
        fresh = float(re.search(r"fresh queries recall@32 ([\d.]+) by slots", line).group(1))
        assert fresh >= 0.95, line
