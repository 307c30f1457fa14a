"""The evaluation bench times each exact saving against its anchor and finds the same values."""

import re


def test_evaluation_bench_prints_three_ratios_exact_values_and_the_same_predictions(
    load_script, capsys
):
    evaluation = load_script("bench/evaluation.py")
    lines = evaluation.main(["--encoder", "tiny", "--rows", "24", "--rounds", "1",
                             "--batch-size", "8", "--evaluations", "2"])  # fmt: skip
    table = [line for line in lines if line.startswith("| ") and "x |" in line]
    assert [line.split("|")[1].strip().split(":")[0] for line in table] == [
        "keys",
        "head prefix",
        "query keys over 2 evaluations",
    ]
    for line in table:
        ratio, difference = re.search(r"\| ([\d.]+)x \| ([\d.e+-]+) \|", line).groups()
        assert float(ratio) > 0 and float(difference) < 1e-4
    assert "| identical |" in table[1]
    assert table[2].split("|")[5].strip() == "0.0e+00"  # cached keys are the very values


def test_the_benchmarks_page_shows_the_committed_run():
    from pathlib import Path

    root = Path(__file__).parents[2]
    committed = (root / "results" / "bench" / "evaluation_2026-12-02_cpu.txt").read_text()
    table = committed.split("\n\n", 1)[1].strip()
    assert table in (root / "docs" / "guide" / "benchmarks.md").read_text(encoding="utf-8")
