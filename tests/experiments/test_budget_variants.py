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
