"""The devices page's account of the fourth GPU lease is the lease's committed raw output.

`docs/guide/devices.md` ("The fourth GPU run") quotes `results/gpu/h200_2026-12-04/`: the CUDA
tests' count, each run's wall seconds and average accuracy on the H200, and the committed CPU
runs it is set beside. A changed digit on either side fails here.
"""

from __future__ import annotations

import csv
import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEASE = ROOT / "results" / "gpu" / "h200_2026-12-04"
DEVICES = ROOT / "docs" / "guide" / "devices.md"
CPU_RUNS = {"ncm": "text/ncm_i_s0", "ranpac": "text/ranpac_i_s0"}
"""The committed CPU runs (under results/real_budget/) set beside the H200's runs."""


@cache
def section() -> str:
    """The fourth lease's section of the devices page, whitespace collapsed."""
    text = DEVICES.read_text(encoding="utf-8")
    start = text.index("### The fourth GPU run: NVIDIA H200 (2026-12-04)")
    end = text.index("### Paper scale", start)
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
            cells = dict(cell.rsplit(" ", 1) for cell in found.group(2).split(", "))
            runs[name]["rows"][found.group(1)] = {k: float(v) for k, v in cells.items()}
    return runs


def cpu_run(path: str) -> tuple[dict, dict[str, dict[str, float]]]:
    """A committed CPU run's metrics and its accuracy matrix's rows after each task."""
    folder = ROOT / "results" / "real_budget" / path
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    with open(folder / "accuracy.csv", encoding="utf-8") as handle:
        rows = {
            row.pop("row").removeprefix("after "): {k: float(v) for k, v in row.items()}
            for row in csv.DictReader(handle)
        }
    return metrics, rows


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
    quoted = (
        f"an NVIDIA H200 on 2026-12-04: {found.group(2)} of {total} CUDA tests, NCM and RanPAC at "
        f"the real budget in {runs['ncm']['wall']} s and {runs['ranpac']['wall']} s"
    )
    assert quoted in readme
