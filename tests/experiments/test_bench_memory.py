"""The memory-search bench runs end to end in --quick mode and prints every index's row."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[2]


def fake_keys(fewrel_dir, cache_dir, device, *, per_source=None, log=print):
    """Clustered keys standing in for MiniLM's (encoding the samples takes ~15 s)."""
    rng = np.random.default_rng(0)
    middle = rng.normal(size=(20, 32))
    keys = middle[rng.integers(20, size=1_200)] + 0.1 * rng.normal(size=(1_200, 32))
    return keys.astype(np.float32), [("fake", 1_200)]


@pytest.fixture
def bench(monkeypatch):
    """The bench module (importing it sets OMP_WAIT_POLICY: undone after the test)."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    from experiments.bench import memory

    return memory


def test_the_bench_prints_a_table_per_size_with_the_auto_row(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "real_keys", fake_keys)
    bench.main(["--quick", "--sizes", "real,2000", "--cache-dir", "off", "--hnsw-max", "1500"])
    out = capsys.readouterr().out
    real, synthetic = out.split("\n== ")[1:]
    assert real.startswith("1,150 real keys, held-out real queries")
    assert synthetic.startswith("2,000 mixture keys (4 components, tied)")
    assert "HNSW32 and FAISS IVF128 skipped (> --hnsw-max)" in synthetic
    assert "mixture check, torch IVF32,Flat recall@32 at nprobe 1/2/4/6/8: real keys" in real
    real = real.split("\n  mixture check")[0]
    for table in (real, synthetic):
        rows = [line.split() for line in table.strip().splitlines()[2:]]
        names = [" ".join(r[:-5]) for r in rows]
        assert names[0] == "torch exact" and names[-1] == "auto -> torch exact"
        assert any(n.startswith("torch IVF32,Flat nprobe") for n in names)
        assert any(n.startswith("FAISS IVF") for n in names) and "FAISS Flat" in names
        assert all(0.0 <= float(r[-2]) <= 1.0 for r in rows)  # recall@32
        assert float(rows[0][-2]) == 1.0 and rows[0][-3] == "1.00x"
    assert "FAISS HNSW32 efSearch 64" in real


def test_sizes_are_counts_or_real(bench):
    assert [bench.parse_size(s) for s in ("real", "100k", "1m", "2500")] == [
        "real",
        100_000,
        1_000_000,
        2_500,
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "how", [["-m", "experiments.bench.memory"], ["experiments/bench/memory.py"]]
)
def test_the_bench_runs_as_a_module_and_as_a_script(how):
    done = subprocess.run(
        [sys.executable, *how, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "--sizes" in done.stdout and "--quick" in done.stdout
