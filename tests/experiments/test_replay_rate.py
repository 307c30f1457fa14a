"""The replay-rate ablation changes only the rate, and tabulates each rate's runs with a CI."""

import pytest

from tests.lifelong.experiment.test_reports import make_run


@pytest.fixture
def replay_rate(load_script):
    return load_script("text_classification/replay_rate.py")


def test_each_rate_is_a_sweep_of_its_own_changing_only_the_ratio(budget, replay_rate, tmp_path):
    budget = budget.with_grid(["replay", "mbpa++"], ["i"], [0])
    sweep = replay_rate.at_ratio(budget, 0.05, ["replay", "mbpa++"])
    assert sweep.name == "replay_rate_0.05"
    for point, before in zip(sweep.points(), budget.points(), strict=True):
        options = point.config.options_for()
        assert options == before.config.options_for() | {"replay_ratio": 0.05}
        assert options["replay_every"] == 160  # the event schedule stays the budget's
        same = point.config.replace(strategy_options=before.config.strategy.options)
        assert same.replace(log_group=before.config.tracking.log_group) == before.config


def test_the_budget_s_own_rate_is_the_budget_sweep_itself(budget, replay_rate):
    budget = budget.with_grid(["replay", "mbpa++"], ["i"], [0])
    assert replay_rate.at_ratio(budget, 0.1, ["replay", "mbpa++"]) is budget  # its runs reused
    assert replay_rate.at_ratio(budget, 0.1, ["replay", "agem", "seq"]) is not budget


def test_table_has_a_row_per_strategy_and_rate_with_intervals(replay_rate, tmp_path):
    roots = {}
    for ratio, shift in ((0.05, 0.0), (0.2, 10.0)):
        root = roots[ratio] = tmp_path / f"replay_rate_{ratio:g}"
        for seed in (0, 1):
            options = {"replay": {"replay_every": 160, "replay_ratio": ratio}}
            make_run(root / f"replay_i_s{seed}", "replay", "i", seed, 40.0 + shift + seed,
                     strategy_options=options)  # fmt: skip
    text = replay_rate.table(roots)
    rows = [line for line in text.splitlines() if line.startswith("| replay |")]
    assert rows[0].startswith("| replay | 0.05 | 8 | 40.5 [")
    assert rows[1].startswith("| replay | 0.2 | 32 | 50.5 [") and rows[1].endswith("| 2 |")


def test_the_budget_folder_s_other_runs_stay_out_of_its_row(replay_rate, tmp_path):
    """The budget's folder holds the main table's runs too: only the grid's count at 0.1."""
    options = {"replay": {"replay_every": 160, "replay_ratio": 0.1}}
    budget = tmp_path / "text"
    make_run(budget / "replay_i_s0", "replay", "i", 0, 40.0, strategy_options=options)
    make_run(budget / "replay_ii_s0", "replay", "ii", 0, 60.0, strategy_options=options)
    make_run(budget / "replay_i_s1", "replay", "i", 1, 70.0, strategy_options=options)
    make_run(budget / "seq_i_s0", "seq", "i", 0, 10.0)
    text = replay_rate.table({0.1: budget}, {"replay_i_s0", "mbpa++_i_s0"})
    assert "| replay | 0.1 | 16 | 40.0 |" in text and "| 1 |" in text
    assert "seq" not in text and "60.0" not in text


def test_collected_runs_are_read_from_the_collected_layout(replay_rate, tmp_path, capsys):
    for ratio, folder, value in ((0.05, "replay_rate_0.05", 35.0), (0.1, "text", 40.0)):
        options = {"replay": {"replay_every": 160, "replay_ratio": ratio}}
        make_run(tmp_path / folder / "replay_i_s0", "replay", "i", 0, value,
                 strategy_options=options)  # fmt: skip
    replay_rate.main(["--collected", str(tmp_path), "--ratios", "0.025,0.05,0.1",
                      "--strategies", "replay", "--output-dir", str(tmp_path / "o")])  # fmt: skip
    out = capsys.readouterr().out
    assert "| replay | 0.05 | 8 | 35.0 |" in out and "| replay | 0.1 | 16 | 40.0 |" in out
    assert "| 0.025 |" not in out  # a rate not run yet has no row
    assert not (tmp_path / "o").exists()  # nothing was run
