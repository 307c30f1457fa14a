"""The [CLS]-only last-layer bench runs and reports agreeing pooled vectors."""

import re
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "experiments" / "bench"


def test_last_layer_bench_prints_a_ratio_and_a_tiny_gap(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("last_layer", None)
    import last_layer

    last_layer.main(["--encoder", "tiny", "--neighbours", "4", "--steps", "1"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("top")]
    assert [line[:4] for line in lines] == ["top1", "top2"]
    for line in lines:
        ratio, gap = re.search(r"([\d.]+)x the full one \(pooled gap ([\d.e+-]+)\)", line).groups()
        assert float(ratio) > 0 and float(gap) < 1e-4
