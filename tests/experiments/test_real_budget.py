"""The budget protocol's shared pieces: the grid's options, the sweep at them, the copies' names."""

import argparse
import dataclasses

import pytest


@pytest.fixture
def real_budget(load_script):
    return load_script("text_classification/real_budget.py")


def _args(real_budget, *argv):
    parser = argparse.ArgumentParser()
    real_budget.add_grid_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_sweep_is_the_budget_at_the_asked_grid_data_and_output(real_budget, tmp_path):
    data = tmp_path / "text_real"
    data.mkdir()
    args = _args(
        real_budget, "--orders", "i,iii", "--seeds", "0,2", "--data-dir", str(data),
        "--output-dir", str(tmp_path),
    )  # fmt: skip
    sweep = real_budget.budget_sweep(args, ["replay"], train_size=500)
    assert sweep.root == tmp_path / "text_real_budget"
    points = list(sweep.points())
    assert [p.run_dir.name for p in points] == [
        "replay_i_s0", "replay_i_s2", "replay_iii_s0", "replay_iii_s2"
    ]  # fmt: skip
    config = points[0].config
    assert (config.stream.data_dir, config.stream.train_size) == (str(data), 500)
    plain = real_budget.budget_sweep(_args(real_budget), ["replay"])
    assert plain.base.stream.data_dir != str(data) and plain.base.stream.train_size != 500


def test_the_copies_are_named_as_the_collect_script_names_them(real_budget, tmp_path):
    budget = real_budget.budget_sweep(_args(real_budget), ["mbpa++"])
    named = lambda name: dataclasses.replace(budget, name=name)  # noqa: E731
    assert real_budget.collected(tmp_path, budget) == tmp_path / "text"
    assert real_budget.collected(tmp_path, named("text_real_budget_top1")) == tmp_path / "text_top1"
    assert (
        real_budget.collected(tmp_path, named("replay_rate_0.05")) == tmp_path / "replay_rate_0.05"
    )
    assert (
        real_budget.collected(tmp_path, named("text_real_budgets"))
        == tmp_path / "text_real_budgets"
    )


def test_the_table_is_printed_and_written_whole(real_budget, tmp_path, capsys):
    real_budget.emit("| a |\n", str(tmp_path / "t.md"))
    assert capsys.readouterr().out == "\n| a |\n\n"
    assert (tmp_path / "t.md").read_text() == "| a |\n"
    real_budget.emit("| b |\n", None)
    assert capsys.readouterr().out == "\n| b |\n\n"
