"""Means with 95% confidence intervals over runs, and paired comparisons of strategies."""

import argparse
import math

import pytest

from lifelong.experiment.cli import add_report_arguments
from lifelong.experiment.reports import (
    ReportError,
    command,
    compare,
    find_runs,
    pairwise_table,
    plot_summary,
    summary_table,
)
from lifelong.experiment.reports.stats import bootstrap_interval, summary_markdown, t_interval
from tests.lifelong.experiment.test_reports import make_run

PNG = b"\x89PNG\r\n\x1a\n"


def test_t_interval_of_known_values():
    ci = t_interval([1.0, 2.0, 3.0, 4.0])
    assert ci.mean == 2.5 and ci.n == 4
    assert ci.std == pytest.approx(1.2909944)
    assert ci.half_width == pytest.approx(3.1824463 * 1.2909944 / 2)  # t(0.975, 3) s / sqrt(n)
    one = t_interval([5.0])
    assert one.mean == 5.0 and math.isnan(one.low) and not one.excludes_zero()
    assert t_interval([]).n == 0


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    values = [0.5, 1.5, 2.0, 3.5, 1.0, 2.5]
    first, again = bootstrap_interval(values), bootstrap_interval(values)
    assert first == again  # the same runs give the same interval
    assert first.low < first.mean < first.high
    assert t_interval(values).low < first.high and first.low < t_interval(values).high


@pytest.fixture
def runs(tmp_path):
    """replay beats seq by 10 +- 1 on four (order, seed) pairs; ewc ties seq; one unpaired run."""
    shifts = {("i", 0): 9.0, ("i", 1): 11.0, ("ii", 0): 10.0, ("ii", 1): 10.5}
    for (order, seed), shift in shifts.items():
        base = 40.0 + 3 * seed + (5 if order == "ii" else 0)
        make_run(tmp_path / f"seq_{order}_{seed}", "seq", order, seed, base)
        make_run(tmp_path / f"replay_{order}_{seed}", "replay", order, seed, base + shift)
        tie = base + (1.0 if seed else -1.0)
        make_run(tmp_path / f"ewc_{order}_{seed}", "ewc", order, seed, tie)
    make_run(tmp_path / "replay_ii_5", "replay", "ii", 5, 99.0)  # no seq run to pair with
    return find_runs([tmp_path])


def test_compare_pairs_runs_by_order_and_seed(runs):
    (result,) = compare(runs, "replay", "seq")
    assert result.pairs == (("i", 0), ("i", 1), ("ii", 0), ("ii", 1))  # ii/5 left out
    assert result.difference.mean == pytest.approx(10.125)
    assert result.difference.excludes_zero() and result.verdict == "replay > seq"
    (flipped,) = compare(runs, "seq", "replay")
    assert flipped.verdict == "seq < replay"
    (tie,) = compare(runs, "ewc", "seq", method="bootstrap")
    assert tie.verdict == "not resolved" and tie.difference.low < 0 < tie.difference.high
    assert "ewc − seq = +0.0 points, 95% CI [" in tie.describe()
    with pytest.raises(ReportError, match="no run of strategy 'mtl'"):
        compare(runs, "mtl", "seq")


def test_a_repeated_order_and_seed_pairs_the_later_run_and_says_so(runs, tmp_path, caplog):
    """Two runs of one (order, seed) are not paired silently: the warning names both."""
    again = make_run(tmp_path / "again" / "replay_i_0", "replay", "i", 0, 60.0)
    (result,) = compare([*runs, *find_runs([again])], "replay", "seq")
    assert result.difference.mean == pytest.approx(10.125 + (60.0 - 49.0) / 4)  # 40 + 9 -> 60
    (said,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"replay on text, order i, seed 0: pairing {again}, not " in said
    assert str(tmp_path / "replay_i_0") in said
    caplog.clear()
    compare(runs, "replay", "seq")
    assert not caplog.records


def test_a_bootstrap_over_few_pairs_warns_and_reports_t_beside_it(runs):
    """Issue 64: on 4 pairs a bootstrap can declare what t does not; it now says so."""
    (boot,) = compare(runs, "replay", "seq", method="bootstrap")
    (t,) = compare(runs, "replay", "seq")
    assert len(boot.pairs) == 4 and boot.t_difference == t.difference
    line = boot.describe()
    assert "(warning: a bootstrap over fewer than 10 pairs is too narrow; t: [" in line
    assert line.endswith(f"], {t.verdict})")
    assert t.t_difference is None and "warning" not in t.describe()


def test_summary_and_pairwise_tables(runs):
    summary = summary_table(runs, ["average_accuracy"])
    replay = summary.loc[("text", "replay", "average_accuracy")]
    assert replay["n"] == 5 and replay["orders"] == 2 and replay["seeds"] == 3
    assert replay["low"] < replay["mean"] < replay["high"]
    pairs = pairwise_table(runs)  # strategies in order of first appearance: ewc, replay, seq
    assert list(pairs.index) == [
        ("text", "ewc", "replay"),
        ("text", "ewc", "seq"),
        ("text", "replay", "seq"),
    ]
    assert pairs.loc[("text", "replay", "seq"), "verdict"] == "replay > seq"
    assert pairs.loc[("text", "ewc", "seq"), "pairs"] == 4
    assert pairs.loc[("text", "ewc", "seq"), "verdict"] == "not resolved"


def test_summary_plot_has_error_bars(runs, tmp_path):
    path = plot_summary(runs, tmp_path / "summary.png")
    assert path.read_bytes()[:8] == PNG


def test_report_command_compares_and_the_report_holds_the_intervals(runs, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    root = str(runs[0].run_dir.parent)
    assert command(parser.parse_args([root, "--compare", "replay,seq"])) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("text: average accuracy replay − seq = +10.1 points, 95% CI [+")
    assert line.endswith("4 paired runs: replay > seq")
    assert command(parser.parse_args([root, "--out", str(tmp_path / "r"), "--no-plots"])) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert "## text: over all runs" in report and "| replay | 5 |" in report
    header = (
        "| forgetting | memory (examples) | memory (MB) | compute (TFLOPs) | minutes per run "
        "| CPU minutes per run |"
    )
    assert header in report  # what runs cost
    replay = next(line for line in report.splitlines() if line.startswith("| replay | 5 |"))
    assert replay.endswith("| 0.0 [0.0, 0.0] | – |")  # 1.5 s each, as made; CPU not counted
    assert "| text | average accuracy | replay | seq | +10.1 | [" in report
    with pytest.raises(ReportError, match="expected two strategies"):
        command(parser.parse_args([root, "--compare", "replay"]))


def test_reports_leave_out_a_joint_learners_transfer_and_forgetting(tmp_path):
    import json

    make_run(tmp_path / "seq_i_0", "seq", "i", 0, 40.0)
    make_run(tmp_path / "mtl_i_0", "mtl", "i", 0, 70.0)  # an older run: numbers, no flag
    path = make_run(tmp_path / "mtl_ii_0", "mtl", "ii", 0, 72.0) / "metrics.json"
    metrics = json.loads(path.read_text())
    path.write_text(json.dumps({**metrics, "bwt": None, "fwt": None, "joint_training": True}))
    records = find_runs([tmp_path])
    assert [r.joint_training for r in records] == [True, True, False]
    assert records[0].metrics["bwt"] is None and records[0].metrics["average_accuracy"] == 70.0
    table = summary_table(records, ["average_accuracy", "bwt", "forgetting"])
    assert table.loc[("text", "mtl", "average_accuracy"), "n"] == 2
    assert table.loc[("text", "mtl", "bwt"), "n"] == 0
    assert table.loc[("text", "mtl", "forgetting"), "n"] == 0
    assert table.loc[("text", "seq", "bwt"), "n"] == 1
    assert "| mtl | 2 | 71.0 [58.3, 83.7] | – | – |" in summary_markdown(table)
