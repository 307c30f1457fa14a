"""The devices page's account of the fourth and fifth GPU leases is their committed raw output.

`docs/guide/devices.md` ("The fourth GPU run", "The fifth GPU run") quotes
`results/gpu/h200_2026-12-04/` and `results/gpu/h200_2026-12-04b/`: the CUDA tests' counts, each
run's seconds (whole, and per phase) and average accuracy on the H200, the probe's seconds per
row, and the committed CPU runs they are set beside. A changed digit on either side fails here.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEASE = ROOT / "results" / "gpu" / "h200_2026-12-04"
FIFTH = ROOT / "results" / "gpu" / "h200_2026-12-04b"
DEVICES = ROOT / "docs" / "guide" / "devices.md"
CPU_RUNS = {"ncm": "text/ncm_i_s0", "ranpac": "text/ranpac_i_s0"}
"""The committed CPU runs (under results/real_budget/) set beside the H200's runs."""


@cache
def section(heading: str = "### The fourth GPU run: NVIDIA H200 (2026-12-04)") -> str:
    """A lease's section of the devices page (to the next heading), whitespace collapsed."""
    text = DEVICES.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.index("\n### ", start + len(heading))
    return " ".join(text[start:end].split())


@cache
def lease_runs() -> dict[str, dict]:
    """Each run of `runs.txt`: its exit status, wall seconds, average accuracy and matrix rows."""
    runs: dict[str, dict] = {}
    name = None
    for line in (LEASE / "runs.txt").read_text(encoding="utf-8").splitlines():
        if found := re.match(r"=== (\S+) \(limit", line):
            name = found.group(1)
            runs[name] = {"rows": {}}
        elif found := re.match(r"=== (\S+) rc=(\d+) wall=(\d+)s", line):
            runs[found.group(1)].update(rc=int(found.group(2)), wall=int(found.group(3)))
        elif name and (found := re.match(r"\s+average accuracy\s+([\d.]+)", line)):
            runs[name]["average"] = found.group(1)
        elif name and (found := re.match(r"INFO lifelong.learner: after (\w+): (.*)", line)):
            runs[name]["rows"][found.group(1)] = logged_row(found.group(2))
    return runs


def logged_row(cells: str) -> dict[str, float]:
    """A row as the learner logs it (``yelp 39.7, ag_news 0.0, ...``), by task."""
    return {k: float(v) for k, v in (cell.rsplit(" ", 1) for cell in cells.split(", "))}


def run_files(folder: Path) -> tuple[dict, dict[str, dict[str, float]]]:
    """A run folder's metrics and its accuracy matrix's rows, by task trained (and "before")."""
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    with open(folder / "accuracy.csv", encoding="utf-8") as handle:
        rows = {
            row.pop("row").removeprefix("after "): {k: float(v) for k, v in row.items()}
            for row in csv.DictReader(handle)
        }
    return metrics, rows


def cpu_run(path: str) -> tuple[dict, dict[str, dict[str, float]]]:
    """A committed CPU run (under ``results/real_budget/``): metrics and matrix rows."""
    return run_files(ROOT / "results" / "real_budget" / path)


def largest_gap(gpu: dict[str, dict[str, float]], cpu: dict[str, dict[str, float]]) -> float:
    """The largest absolute difference between the matrices' common cells, in points."""
    return max(abs(v - cpu[row][col]) for row, cells in gpu.items() for col, v in cells.items())


def test_the_cuda_test_count_is_the_leases_output():
    tail = (LEASE / "cuda_tests.txt").read_text(encoding="utf-8")
    found = re.search(r"(\d+) failed, (\d+) passed", tail)
    failed, passed = int(found.group(1)), int(found.group(2))
    assert f"**{passed} passed, {failed} failed**" in section()
    assert f"{passed} of {passed + failed} CUDA tests passed" in DEVICES.read_text(encoding="utf-8")
    failures = re.findall(r"_ test_every_strategy_runs_on_cuda_in_fp16\[(\w+)\] _", tail)
    assert sorted(failures) == ["ncm", "ranpac"]  # the two the page names


def test_the_finished_runs_are_the_leases_and_the_cpu_runs_they_are_set_beside():
    runs, gaps = lease_runs(), []
    for name, path in CPU_RUNS.items():
        run = runs[name]
        metrics, cpu_rows = cpu_run(path)
        assert run["rc"] == 0
        row = (
            f"| {name} | {run['wall']} s | {run['average']} | `results/real_budget/{path}` "
            f"| {metrics['average_accuracy']:.1f}, {metrics['seconds']:.0f} s |"
        )
        assert row in section(), row
        gaps.append(largest_gap(run["rows"], cpu_rows))
    assert max(gaps) <= 1.4 and "within 1.4 points" in section()
    assert f"(the largest gaps: {gaps[0]:.1f} and {gaps[1]:.1f})" in section()


def test_the_stopped_runs_are_the_leases_and_their_rows_match_the_cpu_runs_as_stated():
    runs = lease_runs()
    for name, strategy, bound in (("er", "er", 2.5), ("mbpa", "mbpa++", 2.7)):
        run = runs[name]
        metrics, cpu_rows = cpu_run(f"text_probe/{strategy}_i_s0")
        assert run["rc"] == 124 and run["wall"] >= 150  # stopped by its 150 s limit
        done = len(run["rows"])
        assert f"in task {done + 1} | rows 1–{done} within {bound} points" in section()
        assert round(largest_gap(run["rows"], cpu_rows), 1) <= bound
        seconds = f"{metrics['seconds']:,.0f}"
        assert f"| {metrics['average_accuracy']:.1f}, {seconds} s |" in section()


def test_the_readme_quotes_the_lease_as_the_devices_page_does():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    tail = (LEASE / "cuda_tests.txt").read_text(encoding="utf-8")
    found = re.search(r"(\d+) failed, (\d+) passed", tail)
    total = int(found.group(1)) + int(found.group(2))
    runs = lease_runs()
    fifth = {name: fifth_run(name)[0]["seconds"] for name in ("er", "mbpa")}
    quoted = (
        f"an NVIDIA H200 on 2026-12-04: {found.group(2)} of {total} CUDA tests, then the "
        f"{found.group(1)} fixed; NCM, RanPAC, `er` and MbPA++ at the real budget in "
        f"{runs['ncm']['wall']}, {runs['ranpac']['wall']}, {fifth['er']} and {fifth['mbpa']} s"
    )
    assert quoted in readme
    assert fifth_cuda_tests() == (4, 0)  # "then the 2 fixed": the fifth lease ran them


# -- the fifth lease ------------------------------------------------------------------------------
FIFTH_HEADING = "### The fifth GPU run: NVIDIA H200 (2026-12-04, a second lease)"
FIFTH_CPU = {"er": "text/er_i_s0", "mbpa": "text_probe/mbpa++_i_s0"}
"""The committed CPU runs set beside the fifth lease's finished runs (call2/run_files/<name>)."""


def fifth_cuda_tests() -> tuple[int, int]:
    """(passed, failed) of the fifth lease's CUDA tests."""
    tail = (FIFTH / "call1" / "cuda_tests.txt").read_text(encoding="utf-8")
    passed = re.search(r"(\d+) passed", tail)
    failed = re.search(r"(\d+) failed", tail)
    return int(passed.group(1)), int(failed.group(1)) if failed else 0


def fifth_run(name: str) -> tuple[dict, dict[str, dict[str, float]]]:
    """A finished run of the fifth lease's second call: its metrics and matrix rows."""
    return run_files(FIFTH / "call2" / "run_files" / name)


def probe_gaps(name: str) -> tuple[list[tuple[str, float]], dict[str, dict[str, float]]]:
    """A probed run's seconds from each row's evaluation to the next task's first step, and
    the rows it logged (one decimal), from its run folder's ``log.txt``."""
    lines = (FIFTH / "call1" / "run_files" / f"{name}_probe.log.txt").read_text().splitlines()
    stamp = lambda line: dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")  # noqa: E731
    gaps, rows, opened = [], {}, None
    for line in lines:
        if found := re.search(r"lifelong.learner: (before training|after (\w+)): (.*)", line):
            opened = (stamp(line), found.group(1))
            if found.group(2):
                rows[found.group(2)] = logged_row(found.group(3))
        elif opened and re.search(r"task \w+ step 0:", line):
            gaps.append((opened[1], round((stamp(line) - opened[0]).total_seconds(), 1)))
            opened = None
    return gaps, rows


def test_the_fifth_lease_ran_the_fixed_fp16_tests():
    assert fifth_cuda_tests() == (4, 0)
    assert "**4 passed**" in section(FIFTH_HEADING)


def test_the_fifth_leases_phase_table_is_its_runs_and_the_cpu_runs():
    text, columns = section(FIFTH_HEADING), {}
    for name, path in FIFTH_CPU.items():
        gpu, cpu = fifth_run(name)[0], cpu_run(path)[0]
        cells = []
        for phase in ("train", "evaluate", "adapt"):
            ours, theirs = gpu["cost"][phase]["seconds"], cpu["cost"][phase]["seconds"]
            cells.append(
                (f"{ours:,.1f} s", f"{theirs:,.1f} s", f"{theirs / ours:.1f}x") if ours else None
            )
        columns[name] = cells + [(gpu, cpu)]
        assert f"`results/real_budget/{path}`" in text
    er, mbpa = columns["er"], columns["mbpa"]
    for i, phase in enumerate(("train", "evaluate")):
        assert f"| {phase} | {' | '.join(er[i])} | {' | '.join(mbpa[i])} |" in text
    assert er[2] is None and f"| adapt | | | | {' | '.join(mbpa[2])} |" in text
    (er_gpu, er_cpu), (mbpa_gpu, mbpa_cpu) = er[3], mbpa[3]
    whole = er_cpu["seconds"] / er_gpu["seconds"]
    assert (
        f"| whole run | {er_gpu['seconds']:,.1f} s | {er_cpu['seconds']:,.1f} s | {whole:.1f}x "
        f"| {mbpa_gpu['seconds']:,.1f} s | | |" in text
    )
    accuracy = [f"{m['average_accuracy']:.1f}" for m in (er_gpu, er_cpu, mbpa_gpu, mbpa_cpu)]
    assert "| average accuracy | {} | {} | | {} | {} | |".format(*accuracy) in text


def test_the_fifth_leases_stated_shares_gaps_and_flops_hold():
    text = section(FIFTH_HEADING)
    (er, er_rows), (mbpa, mbpa_rows) = fifth_run("er"), fifth_run("mbpa")
    gaps = [
        largest_gap({r: c for r, c in rows.items() if r != "before"}, cpu_run(FIFTH_CPU[name])[1])
        for name, rows in (("er", er_rows), ("mbpa", mbpa_rows))
    ]
    assert f"within {max(gaps):.1f} points" in text
    assert f"(`er`: {gaps[0]:.1f}, MbPA++: {gaps[1]:.1f};" in text
    adapt, whole = mbpa["cost"]["adapt"]["seconds"], mbpa["seconds"]
    assert 0.45 < adapt / whole < 0.55 and f"half its run ({adapt} of {whole} s)" in text
    cpu = cpu_run(FIFTH_CPU["mbpa"])[0]["cost"]
    phases = sum(cpu[p]["seconds"] for p in ("train", "evaluate", "adapt"))
    assert 0.30 < cpu["adapt"]["seconds"] / phases < 0.36  # "a third of its phases"
    assert f"{whole / er['seconds']:.1f}x `er`'s time" in text
    assert f"for {er['average_accuracy'] - mbpa['average_accuracy']:.1f} points less" in text
    er_cpu = cpu_run(FIFTH_CPU["er"])[0]["cost"]
    for phase in ("train", "evaluate", "adapt"):
        assert er["cost"][phase]["flops"] == er_cpu[phase]["flops"]
    ours, theirs = mbpa["cost"]["train"]["flops"], cpu["train"]["flops"]
    for key in ("forward_rows", "forward_tokens", "backward_rows", "backward_tokens"):
        assert mbpa["cost"]["train"][key] == cpu["train"][key]
    stated = f"{100 * (ours / theirs - 1):.1f}% higher on CUDA ({ours:.4g} against {theirs:.4g})"
    assert stated.replace("e+", "e") in text
    rows = mbpa["cost"]["adapt"]["forward_rows"], cpu["adapt"]["forward_rows"]
    assert "counted {:,} neighbour rows against the CPU's {:,}".format(*rows) in text


def test_the_probed_runs_rows_equal_the_unprobed_and_their_probe_seconds_are_quoted():
    text = section(FIFTH_HEADING)
    for name, label in (("er", "for `er`, "), ("mbpa", "for MbPA++ ")):
        gaps, rows = probe_gaps(name)
        unprobed = fifth_run(name)[1]
        assert rows and all(
            round(unprobed[task][col], 1) == value
            for task, cells in rows.items()
            for col, value in cells.items()
        )
        seconds = [f"{s:.1f}" for _, s in gaps]
        assert label + seconds[0] in text
        assert ", ".join(seconds[1:-1]) + " and " + seconds[-1] in text
    assert len(probe_gaps("er")[1]) == 5 and len(probe_gaps("mbpa")[1]) == 4
    runs = {}
    for name in ("er", "mbpa"):
        out = (FIFTH / "call1" / f"runs_{name}.txt").read_text(encoding="utf-8")
        found = re.search(r"=== \S+ rc=(\d+) wall=(\d+)s", out)
        runs[name] = int(found.group(1)), int(found.group(2))
    assert runs == {"er": (124, 475), "mbpa": (124, 450)}
    assert "stopped at 475 s" in text and "MbPA++ at 450 s, after four" in text
    assert f"A whole `er` run takes {fifth_run('er')[0]['seconds']} s without it" in text
