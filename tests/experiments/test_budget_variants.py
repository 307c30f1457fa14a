"""The issue-65 variants of the budget sweep: ER's memory, warmed prototypes, probing runs."""

import pytest


@pytest.fixture
def er_memory(load_script):
    return load_script("text_classification/er_memory.py")


@pytest.fixture
def warmed_prototypes(load_script):
    return load_script("text_classification/warmed_prototypes.py")


@pytest.fixture
def probing(load_script):
    return load_script("text_classification/probing.py")


def test_er_at_another_memory_size_is_a_sweep_of_its_own(budget, er_memory):
    budget = budget.with_grid(["er"], ["i"], [0])
    assert budget.base.options_for("er")["memory_size"] == 10_000  # the budget's memory
    assert er_memory.at_size(budget, 10_000) is budget  # its runs are the budget's
    small = er_memory.at_size(budget, 200)
    assert small.name == "text_real_budget_er200"
    (point,) = small.points()
    assert point.config.options_for() == {"memory_size": 200}


def test_warmed_prototypes_set_only_the_warm_up(budget, warmed_prototypes):
    budget = budget.with_grid(["ncm", "ranpac"], ["i"], [0])
    warm = warmed_prototypes.warmed(budget, 0.375, ["ncm", "ranpac"])
    assert warm.name == "text_real_budget_warm"
    for point, before in zip(warm.points(), budget.points(), strict=True):
        options = point.config.options_for()
        assert options == before.config.options_for() | {"warmup_fraction": 0.375}


def test_probing_runs_probe_and_learn_as_the_budget(budget, probing, tmp_path):
    from types import SimpleNamespace

    args = SimpleNamespace(output_dir=str(tmp_path), data_dir=None, orders="i", seeds="0")
    probed = probing.budget_sweep(args, ["seq"], probe=True)
    (point,) = probed.points()
    assert point.config.training.probe is True
    (plain,) = probing.budget_sweep(args, ["seq"]).points()
    assert point.config.replace(probe=False) == plain.config


def test_the_tables_give_each_folder_its_rows_with_intervals(
    er_memory, warmed_prototypes, tmp_path
):
    from tests.lifelong.experiment.test_reports import make_run

    roots = {size: tmp_path / f"er{size}" for size in (200, 10_000)}
    for size, root in roots.items():
        for seed in (0, 1):
            make_run(root / f"er_i_s{seed}", "er", "i", seed, 60.0 + seed + size / 10_000)
    make_run(roots[200] / "er_ii_s0", "er", "ii", 0, 10.0)  # outside the grid: left out
    text = er_memory.table(roots, {"er_i_s0", "er_i_s1"})
    rows = [line for line in text.splitlines() if line.startswith("| 200 ") or "| 10000 " in line]
    assert rows == ["| 200 | 60.5 [54.2, 66.9] | 6.1 [5.4, 6.7] | 2 |",
                    "| 10000 | 61.5 [55.1, 67.9] | 6.2 [5.5, 6.8] | 2 |"]  # fmt: skip
    missing = {"none": tmp_path / "absent", "0.375": roots[200]}
    warm = warmed_prototypes.table(missing, {"er_i_s0"})
    assert warm.splitlines()[2:] == ["| er | 0.375 | 60.0 | 6.0 | 1 |"]


def test_the_probing_table_keeps_the_runs_asked_for(probing, tmp_path):
    """``--strategies``/``--orders`` select the table's runs: a folder that also holds other
    strategies' probing runs (as results/real_budget/text_probe does) does not change it."""
    import shutil
    from pathlib import Path

    committed = Path(__file__).resolve().parents[2] / "results" / "real_budget" / "text_probe"
    for name in ("seq_i_s0", "replay_i_s0"):
        shutil.copytree(committed / name, tmp_path / name)
    both = probing.table(tmp_path)
    assert [line.split(" | ")[0] for line in both.splitlines()[2:]] == [
        "| replay",
        "| seq",
        "| all",
    ]
    only = probing.table(tmp_path, {"seq_i_s0"})
    assert [line.split(" | ")[0] for line in only.splitlines()[2:]] == ["| seq"]
    assert only.splitlines()[2] in both.splitlines()
