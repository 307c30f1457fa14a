"""The collected layout is named in two places; one round trip keeps them in agreement.

`experiments/collect_real_budget.sh` renames the campaign's sweep folders when it copies them
(``text_real_budget`` → ``text``, ``text_real_budget_<scope>`` → ``text_<scope>``), and
``real_budget.collected`` says where ``replay_rate.py --collected`` and ``wider_scope.py
--collected`` look for the copies. Here runs are written where the scripts' own sweeps put them,
collected with the shell script, and read back by both scripts: a rename in either fails this
test.
"""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lifelong.experiment.test_reports import make_run

ROOT = Path(__file__).parents[2]
COLLECT = ROOT / "experiments" / "collect_real_budget.sh"


@pytest.fixture
def scripts(load_script):
    names = ("replay_rate", "wider_scope", "real_budget")
    return tuple(load_script(f"text_classification/{name}.py") for name in names)


def _budget(real_budget, strategies, out):
    """The budget sweep as the scripts' ``main`` build it: order i, seed 0, output in ``out``."""
    parser = argparse.ArgumentParser()
    real_budget.add_grid_arguments(parser)
    return real_budget.budget_sweep(parser.parse_args(["--output-dir", str(out)]), strategies)


@pytest.mark.skipif(sys.platform == "win32", reason="bash script")
def test_the_scripts_read_what_the_collect_script_copies(scripts, tmp_path, capsys):
    replay_rate, wider_scope, real_budget = scripts
    out, dest = tmp_path / "runs", tmp_path / "results"
    budget = _budget(real_budget, ["replay"], out)
    for ratio, value in ((0.1, 40.0), (0.05, 35.0)):  # 0.1: the budget's rate, its own folder
        sweep = replay_rate.at_ratio(budget, ratio, ["replay"])
        options = {"replay": {"replay_every": 160, "replay_ratio": ratio}}
        make_run(sweep.root / "replay_i_s0", "replay", "i", 0, value, strategy_options=options)
    head = _budget(real_budget, ["mbpa++"], out)
    assert head.root == budget.root  # the head runs are the budget sweep's own
    make_run(head.root / "mbpa++_i_s0", "mbpa++", "i", 0, 50.0)
    make_run(wider_scope.at_scope(head, "top1").root / "mbpa++_i_s0", "mbpa++", "i", 0, 53.0)

    subprocess.run(["bash", str(COLLECT), str(out), str(dest)], check=True, capture_output=True)

    replay_rate.main(["--collected", str(dest), "--ratios", "0.05,0.1", "--strategies", "replay"])
    tables = capsys.readouterr().out
    assert "| replay | 0.05 | 8 | 35.0 |" in tables and "| replay | 0.1 | 16 | 40.0 |" in tables
    wider_scope.main(["--collected", str(dest), "--scope", "top1"])
    tables = capsys.readouterr().out
    assert "| head | 50.0 |" in tables and "| top1 | 53.0 |" in tables
