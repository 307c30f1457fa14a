"""The paper-scale bench runs end to end (tiny model, few keys) and prints every table."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "experiments" / "bench"


@pytest.mark.slow
def test_scale_bench_prints_phases_memory_and_projections(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("scale", None)
    import scale

    scale.main(
        [
            "--device", "cpu", "--size", "tiny", "--keys", "3000", "--steps", "6",
            "--strategies", "seq,replay,oml-er", "--scopes", "head", "--adapt-steps", "2",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    for row in ("seq train", "replay train", "oml-er train", "evaluation", "adapt reference all"):
        assert row in out
    assert "adapt fast head" in out and "3,000 keys of 768" in out
    projected = out.split("Projected full paper run")[1]
    assert "mbpa++" not in projected  # only the strategies asked for
    for name in ("seq", "replay", "oml-er"):
        hours = [line.split()[1] for line in projected.splitlines() if line.startswith(name)]
        assert hours and float(hours[0]) > 0  # every strategy trains at a cost
