"""The wider-scope MbPA++ runs change only adapt_scope, and are tabulated against head."""

import pytest

from tests.lifelong.experiment.test_reports import make_run


@pytest.fixture
def wider_scope(load_script):
    return load_script("text_classification/wider_scope.py")


def test_the_sweep_is_the_budget_s_mbpa_plus_plus_with_another_scope(budget, wider_scope):
    budget = budget.with_grid(["mbpa++"], ["i", "ii"], [0])
    sweep = wider_scope.at_scope(budget, "top1")
    assert sweep.name == "text_real_budget_top1" and sweep.strategies == ("mbpa++",)
    for point, before in zip(sweep.points(), budget.points(), strict=True):
        options = point.config.options_for()
        assert options == before.config.options_for() | {"adapt_scope": "top1"}
        assert before.config.options_for()["adapt_scope"] == "head"
        same = point.config.replace(strategy_options=before.config.strategy.options)
        assert same.replace(log_group=before.config.tracking.log_group) == before.config


def test_table_rows_per_scope_and_the_paired_difference(wider_scope, tmp_path):
    head, wide = tmp_path / "text_real_budget", tmp_path / "text_real_budget_top1"
    for order, seed, value in (("i", 0, 50.0), ("ii", 0, 54.0), ("i", 1, 52.0)):
        make_run(head / f"mbpa++_{order}_s{seed}", "mbpa++", order, seed, value)
        make_run(head / f"seq_{order}_s{seed}", "seq", order, seed, value - 30)  # left out
    for order, value in (("i", 55.0), ("ii", 60.0)):
        make_run(wide / f"mbpa++_{order}_s0", "mbpa++", order, 0, value)
    text = wider_scope.table(head, wide, "top1")
    rows = [line for line in text.splitlines() if line.startswith("| head") or "| top1" in line]
    assert rows[0].startswith("| head | 52.0 [") and rows[0].endswith("| 3 |")
    assert rows[1].startswith("| top1 | 57.5 [") and rows[1].endswith("| 2 |")
    assert "mbpa++ (top1) − mbpa++ (head) = +5.5 points" in text and "2 paired runs" in text
    assert "seq" not in text


def test_one_run_a_scope_prints_its_mean_alone(wider_scope, tmp_path):
    head, wide = tmp_path / "text_real_budget", tmp_path / "text_real_budget_top1"
    make_run(head / "mbpa++_i_s0", "mbpa++", "i", 0, 50.0)
    make_run(wide / "mbpa++_i_s0", "mbpa++", "i", 0, 53.0)
    text = wider_scope.table(head, wide, "top1")
    assert "| head | 50.0 | -5.0 | 5.0 | 1 |" in text and "nan" not in text
    assert "+3.0 points, no interval (one pair)" in text


def test_collected_runs_are_tabulated_without_running(wider_scope, tmp_path, capsys):
    make_run(tmp_path / "text" / "mbpa++_i_s0", "mbpa++", "i", 0, 50.0)
    make_run(tmp_path / "text_top1" / "mbpa++_i_s0", "mbpa++", "i", 0, 53.0)
    wider_scope.main(["--collected", str(tmp_path), "--output-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert "| head | 50.0 |" in out and "| top1 | 53.0 |" in out
    assert not (tmp_path / "runs").exists()  # nothing was run


def test_head_counts_only_the_grid_s_orders_and_seeds(wider_scope, tmp_path, capsys):
    make_run(tmp_path / "text" / "mbpa++_i_s0", "mbpa++", "i", 0, 50.0)
    make_run(tmp_path / "text" / "mbpa++_ii_s0", "mbpa++", "ii", 0, 70.0)  # another order
    make_run(tmp_path / "text" / "mbpa++_i_s1", "mbpa++", "i", 1, 60.0)  # another seed
    make_run(tmp_path / "text_top1" / "mbpa++_i_s0", "mbpa++", "i", 0, 53.0)
    wider_scope.main(["--collected", str(tmp_path), "--orders", "i", "--seeds", "0"])
    out = capsys.readouterr().out
    assert "| head | 50.0 | -5.0 | 5.0 | 1 |" in out and "| top1 | 53.0 |" in out
