"""The real-data campaign script: every sweep it starts is a valid grid of the acceptance table."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lifelong.experiment.cli import build_parser
from lifelong.experiment.sweep import load_sweep

ROOT = Path(__file__).parents[2]
CAMPAIGN = ROOT / "experiments" / "real_budget_campaign.sh"


@pytest.fixture
def calls(tmp_path):
    """Run the script with every command replaced by a recorder: the calls it would make."""
    log = tmp_path / "calls.txt"
    recorder = tmp_path / "record"
    recorder.write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {log}\n')
    recorder.chmod(0o755)
    for name in ("lifelong", "python", "avalanche-lifelong"):
        (tmp_path / name).symlink_to(recorder)
    env = {
        "PATH": "/usr/bin:/bin",
        "LIFELONG": str(tmp_path / "lifelong"),
        "PY": str(tmp_path / "python"),
        "AVALANCHE_LIFELONG": str(tmp_path / "avalanche-lifelong"),
    }
    out = tmp_path / "out"
    subprocess.run(["bash", str(CAMPAIGN), str(out)], env=env, check=True, cwd=tmp_path)
    return [shlex.split(line) for line in log.read_text().splitlines()]


def sweeps(calls: list[list[str]]) -> list:
    parser = build_parser()
    out = []
    for call in calls:
        if call[0] != "lifelong":
            continue
        args = parser.parse_args(call[1:])
        assert args.command == "sweep"
        sweep = load_sweep(ROOT / args.config).with_grid(
            args.strategies.split(","),
            args.orders.split(","),
            [int(s) for s in args.seeds.split(",")],
        )
        out.append((args, sweep))
    return out


def grid(found: list, name: str) -> set[tuple[str, str, int]]:
    return {(s, o, seed) for _, w in found if w.name == name for s in w.strategies
            for o in w.orders for seed in w.seeds}  # fmt: skip


def test_the_campaign_runs_the_acceptance_grid_of_both_streams(calls, tmp_path):
    found = sweeps(calls)
    assert all(args.output_dir == str(tmp_path / "out") for args, _ in found)
    text, fewrel = grid(found, "text_real_budget"), grid(found, "fewrel_real_budget")
    two_seeds = {"seq", "seq-star", "replay", "mbpa++", "meta-mbpa", "oml-er", "mtl"}
    ours = two_seeds | {"agem", "ewc", "mbpa", "mbpa++-rand", "anml-er", "maml-er"}
    for strategy in ours:
        for order in ("i", "ii", "iii", "iv"):
            assert (strategy, order, 0) in text
            assert ((strategy, order, 1) in text) == (strategy in two_seeds)
    for strategy in ("seq", "agem", "replay", "mbpa++", "oml-er", "anml-er", "mtl"):
        assert {(strategy, str(o), 0) for o in range(5)} <= fewrel
    # FewRel is cut from the shared sentences first; the two protocol checks run as scripts
    scripts = [c[1] for c in calls if c[0] == "python"]
    assert scripts[0] == "experiments/fewrel/prepare_cfrl.py"
    budget = {"er_memory.py", "warmed_prototypes.py", "probing.py"}  # what wins at a budget
    assert {Path(s).name for s in scripts[1:]} == {"replay_rate.py", "wider_scope.py", *budget}
    ablation = [c for c in calls if c[0] == "python" and c[1].endswith("replay_rate.py")]
    assert ablation[1][-2:] == ["--orders", "i,ii,iii,iv"]  # order i first, then all four
    assert ablation[2][ablation[2].index("--ratios") + 1] == "0.5,1.0"  # then 50% and 100%
    for strategy in ("er", "ncm", "ranpac"):  # the simple baselines over the full grid
        seeds = (0,) if strategy == "ncm" else (0, 1)  # NCM: no seed enters it
        assert {(strategy, o, s) for o in ("i", "ii", "iii", "iv") for s in seeds} <= text
    assert {("er", str(o), 0) for o in range(5)} <= fewrel


def test_meta_mbpa_seed_0_follows_the_seed_1_runs_and_the_longest_runs_come_last(calls):
    """Meta-MbPA's seed 0 (about 2 hours a run) follows the shorter seed-1 runs, as the six
    orderings the papers claim for it need it; its seed 1 and the wider scope come last, so that
    sittings of a few hours each finish the shorter runs instead of restarting long ones."""
    flat = [" ".join(c) for c in calls]
    long = [i for i, c in enumerate(flat) if "meta-mbpa" in c or "wider_scope.py" in c]
    seed_one = next(i for i, c in enumerate(flat) if "--seeds 1" in c and "mbpa++" in c)
    assert long[0] == seed_one + 1 and long[-2:] == [len(flat) - 2, len(flat) - 1]
    meta = [flat[i] for i in long if "meta-mbpa" in flat[i]]
    assert meta[0].endswith("--seeds 0") and meta[1].endswith("--seeds 1")
    assert all("--orders i,ii,iii,iv" in c for c in meta)
    assert "wider_scope.py" in flat[-1]


def test_avalanche_rows_run_in_their_own_environment(calls):
    # parsed, not validated: avalanche-lib does not import here (the registry would refuse)
    parser = build_parser()
    ava = set()
    for call in (c for c in calls if c[0] == "avalanche-lifelong"):
        args = parser.parse_args(call[1:])
        assert args.config == "experiments/text_classification/real_budget.yaml"
        ava |= {(s, o, int(seed)) for s in args.strategies.split(",")
                for o in args.orders.split(",") for seed in args.seeds.split(",")}  # fmt: skip
    for name in ("avalanche:naive", "avalanche:replay", "avalanche:ewc"):
        assert {(name, order, 0) for order in ("i", "ii", "iii", "iv")} <= ava
    assert {("seq", "i", s) for s in range(5)} <= ava  # paired with Naive over five seeds
    assert {("avalanche:naive", "i", s) for s in range(5)} <= ava


def test_the_avalanche_pair_runs_apart_from_the_text_table(calls, tmp_path):
    """Naive against SEQ over five seeds of order i goes to its own folder, so its extra seeds
    (2-4) stay out of the text table's SEQ row; the table's Avalanche rows go with the table."""
    parser = build_parser()
    folders = {}
    for call in (c for c in calls if c[0] == "avalanche-lifelong"):
        args = parser.parse_args(call[1:])
        folders[args.strategies] = args.output_dir
    assert folders["seq,avalanche:naive"] == str(tmp_path / "out" / "avalanche_pair")
    assert folders["avalanche:naive,avalanche:replay,avalanche:ewc"] == str(tmp_path / "out")


@pytest.mark.skipif(sys.platform == "win32", reason="bash script")
def test_without_the_avalanche_environment_its_rows_are_skipped_with_a_line(tmp_path):
    recorder = tmp_path / "record"
    recorder.write_text("#!/bin/sh\nexit 0\n")
    recorder.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "LIFELONG": str(recorder), "PY": str(recorder),
           "AVALANCHE_LIFELONG": str(tmp_path / "missing")}  # fmt: skip
    done = subprocess.run(["bash", str(CAMPAIGN), str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert "no Avalanche environment" in done.stderr


def sweeps_exiting(tmp_path: Path, status: int) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run the script (no Avalanche environment) with every `lifelong` call exiting ``status``;
    returns the script's result and the calls it made, one line each."""
    where = tmp_path / f"exit{status}"
    where.mkdir()
    log, sweep = where / "calls.txt", where / "lifelong"
    sweep.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit {status}\n')
    sweep.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "LIFELONG": str(sweep), "PY": "true",
           "AVALANCHE_LIFELONG": str(where / "missing")}  # fmt: skip
    done = subprocess.run(["bash", str(CAMPAIGN), str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, cwd=where)  # fmt: skip
    return done, log.read_text().splitlines()


@pytest.mark.skipif(sys.platform == "win32", reason="bash script")
def test_a_second_copy_passes_over_busy_runs_and_goes_on(tmp_path):
    """Two copies side by side: a sweep whose runs the other copy holds exits 4 (busy), and the
    script goes on to its next sweep instead of stopping: it makes every call a plain run does."""
    done, calls = sweeps_exiting(tmp_path, 4)
    assert done.returncode == 0, done.stderr
    assert calls == sweeps_exiting(tmp_path, 0)[1]


@pytest.mark.skipif(sys.platform == "win32", reason="bash script")
def test_a_failed_sweep_still_stops_the_campaign(tmp_path):
    done, calls = sweeps_exiting(tmp_path, 1)
    assert done.returncode == 1 and len(calls) == 1


COLLECT = ROOT / "experiments" / "collect_real_budget.sh"


def test_collect_copies_finished_runs_only(tmp_path):
    out, dest = tmp_path / "runs", tmp_path / "results"
    for name, files in {
        "text_real_budget/seq_i_s0": ["config.yaml", "accuracy.csv", "metrics.json", "log.txt"],
        "text_real_budget/replay_i_s0": ["config.yaml", "log.txt", "checkpoint.pt"],  # running
        "fewrel_real_budget/seq_0_s0": ["config.yaml", "accuracy.csv", "metrics.json"],
        "avalanche_pair/text_real_budget/seq_i_s2": ["config.yaml", "accuracy.csv", "metrics.json"],
        "replay_rate_0.05/replay_i_s0": ["config.yaml", "accuracy.csv", "metrics.json"],
        "text_real_budget_top1/mbpa++_i_s0": ["config.yaml", "accuracy.csv", "metrics.json"],
        "text_real_budget_probe/seq_i_s0": [
            "config.yaml",
            "accuracy.csv",
            "metrics.json",
            "probing.csv",
        ],  # fmt: skip
    }.items():
        (out / name).mkdir(parents=True)
        for file in files:
            (out / name / file).write_text(f"{name}/{file}")
    result = subprocess.run(["bash", str(COLLECT), str(out), str(dest)], check=True,
                            capture_output=True, text=True)  # fmt: skip
    assert "6 finished runs" in result.stdout
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert copied == [
        "avalanche_pair/seq_i_s2/accuracy.csv", "avalanche_pair/seq_i_s2/config.yaml",
        "avalanche_pair/seq_i_s2/metrics.json",
        "fewrel/seq_0_s0/accuracy.csv", "fewrel/seq_0_s0/config.yaml",
        "fewrel/seq_0_s0/metrics.json",
        "replay_rate_0.05/replay_i_s0/accuracy.csv", "replay_rate_0.05/replay_i_s0/config.yaml",
        "replay_rate_0.05/replay_i_s0/metrics.json",
        "text/seq_i_s0/accuracy.csv", "text/seq_i_s0/config.yaml", "text/seq_i_s0/metrics.json",
        "text_probe/seq_i_s0/accuracy.csv", "text_probe/seq_i_s0/config.yaml",
        "text_probe/seq_i_s0/metrics.json", "text_probe/seq_i_s0/probing.csv",
        "text_top1/mbpa++_i_s0/accuracy.csv", "text_top1/mbpa++_i_s0/config.yaml",
        "text_top1/mbpa++_i_s0/metrics.json",
    ]  # fmt: skip
    assert (
        dest / "text/seq_i_s0/metrics.json"
    ).read_text() == "text_real_budget/seq_i_s0/metrics.json"
