"""The papers' claimed orderings, judged by paired intervals on runs."""

import argparse
import json

import pytest

from lifelong.experiment.cli import add_report_arguments
from lifelong.experiment.reports import command
from lifelong.experiment.reports.claims import ABLATIONS, CHAINS, Claim, claims, judge
from lifelong.experiment.reports.stats import pairwise_table
from lifelong.experiment.rundir import find_runs
from lifelong.streams.registry import STREAMS
from tests.lifelong.experiment.test_reports import make_run


def test_a_chain_claims_every_pair_it_orders():
    fewrel = claims("fewrel")
    assert Claim("oml-er", "anml-er", "≈") in fewrel
    assert Claim("mtl", "seq", ">") in fewrel and Claim("replay", "agem", ">") in fewrel
    n = sum(len(g) for g in CHAINS["fewrel"])
    assert len(fewrel) == n * (n - 1) // 2  # every pair once
    assert Claim("mbpa++", "agem", ">") in claims("text")
    text = claims("text")
    n = sum(len(g) for g in CHAINS["text"])
    assert len(text) == n * (n - 1) // 2 + len(ABLATIONS["text"])
    assert len(set(text)) == len(text)  # no ablation repeats a pair of the chain
    assert text[-3:] == [Claim("mbpa++", "mbpa", ">"), Claim("mbpa++", "mbpa++-rand", ">"),
                         Claim("mbpa", "seq", ">")]  # fmt: skip


@pytest.fixture
def runs(tmp_path):
    """replay beats seq clearly; agem sits below replay; mtl ties replay."""
    for order in ("i", "ii"):
        for seed in (0, 1):
            base = 20.0 + 2 * seed + (3 if order == "ii" else 0)
            make_run(tmp_path / f"seq_{order}_{seed}", "seq", order, seed, base)
            make_run(tmp_path / f"replay_{order}_{seed}", "replay", order, seed, base + 30 + seed)
            make_run(tmp_path / f"agem_{order}_{seed}", "agem", order, seed, base + 10 + seed)
            tie = base + 30 + (1.0 if seed else -1.0)
            make_run(tmp_path / f"mtl_{order}_{seed}", "mtl", order, seed, tie)
    return tmp_path


def test_verdicts_follow_the_intervals(runs):
    judged = {str(j.claim): j.verdict for j in judge(find_runs([runs]), "text")}
    assert judged["replay > seq"] == "holds"
    assert judged["agem > replay"] == "reversed"
    assert judged["mtl > replay"] == "not resolved"
    assert judged["oml-er ≈ anml-er"] == "not run" and judged["mtl > meta-mbpa"] == "not run"


def test_report_claims_prints_one_row_per_claim(runs, capsys):
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    assert command(parser.parse_args([str(runs), "--claims", "text"])) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "| claim (text, average_accuracy) | a − b | 95% CI | paired runs | verdict |"
    )
    row = next(line for line in out.splitlines() if line.startswith("| replay > seq |"))
    assert row.endswith("| 4 | holds |")
    assert len(out.strip().splitlines()) == 2 + len(claims("text"))


def test_fewrel_claims_and_comparisons_are_judged_on_the_pooled_test_set(tmp_path, capsys):
    # Holla et al. (2020) score lifelong FewRel on one test set of every cluster's relations:
    # the pooled accuracy, which orders these runs the other way round from the cluster mean
    for order in (0, 1):
        for name, average, pooled in (("replay", 30.0, 60.0), ("seq", 40.0, 20.0)):
            run = tmp_path / f"{name}_{order}"
            make_run(run, name, value=average + order, stream="fewrel", cluster_order=order)
            metrics = json.loads((run / "metrics.json").read_text())
            metrics["pooled_accuracy"] = pooled + order
            (run / "metrics.json").write_text(json.dumps(metrics))
    records = find_runs([tmp_path])
    # each stream's spec says its measure; reports ask it, not a table of stream names
    measures = {name: spec.headline_metric for name, spec in STREAMS.items()}
    assert measures == {
        "text": "average_accuracy",
        "qa": "average_accuracy",
        "fewrel": "pooled_accuracy",
    }
    judged = {str(j.claim): j for j in judge(records, "fewrel")}
    assert judged["replay > seq"].verdict == "holds"  # two pairs, both +40
    assert judged["replay > seq"].comparison.metric == "pooled_accuracy"
    assert judged["replay > seq"].comparison.difference.mean == pytest.approx(40.0)
    averaged = {str(j.claim): j for j in judge(records, "fewrel", "average_accuracy")}
    assert averaged["replay > seq"].comparison.difference.mean == pytest.approx(-10.0)
    assert averaged["replay > seq"].verdict == "reversed"
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    assert command(parser.parse_args([str(tmp_path), "--compare", "replay,seq"])) == 0
    assert "pooled" in capsys.readouterr().out
    assert command(parser.parse_args([str(tmp_path), "--claims", "fewrel"])) == 0
    assert capsys.readouterr().out.startswith("| claim (fewrel, pooled_accuracy) |")
    pairs = pairwise_table(records)  # the report's table: the same measure
    assert pairs.loc[("fewrel", "replay", "seq"), "metric"] == "pooled_accuracy"
    assert pairs.loc[("fewrel", "replay", "seq"), "difference"] == pytest.approx(40.0)
