"""The sorting table over seeds: means, the drop and each seed's cell at the most segments."""

import pytest


@pytest.fixture
def sorting_seeds(load_script):
    return load_script("lm/sorting_seeds.py")


def _table(seed: int, rows: dict[int, tuple[str, str]]) -> str:
    lines = [f"Sorting accuracy (%) over the 20 targets; lr 0.005, seed {seed}; chance 5%; 9s.", ""]
    lines += ["| Segments | transformer | memformer |", "|---|---|---|"]
    lines += [f"| {k} | {a} | {b} |" for k, (a, b) in rows.items()]
    return "\n".join(lines) + "\n"


def test_means_drop_and_per_seed_cells(sorting_seeds, tmp_path):
    s1 = tmp_path / "s1.md"
    s1.write_text(_table(1, {2: ("40.00", "60.00"), 8: ("20.00", "n/a")}))
    s0 = tmp_path / "s0.md"
    s0.write_text(_table(0, {2: ("42.00", "62.50"), 8: ("22.00", "30.25")}))
    text = sorting_seeds.main([str(s1), str(s0)])  # seeds ordered by the files' own seed
    lines = text.splitlines()
    assert lines[0] == (
        "| module | 2 segments | 8 segments | drop, 2 → 8 | seed 0, 8 | seed 1, 8 |"
    )
    assert lines[2] == "| `transformer` | 41.0 | 21.0 | 20.0 | 22.0 | 20.0 |"
    assert lines[3] == "| `memformer` | 61.2 | 30.2 | 32.2 | 30.2 | – |"  # n/a: left out


def test_a_file_that_is_not_a_table_is_refused(sorting_seeds, tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("seed 0\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    with pytest.raises(ValueError, match="not a sorting_table.py table"):
        sorting_seeds.main([str(bad)])
