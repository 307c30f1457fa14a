"""The [CLS]-only last-layer bench runs and reports agreeing pooled vectors."""

import re


def test_last_layer_bench_prints_a_ratio_and_a_tiny_gap(load_script, capsys):
    last_layer = load_script("bench/last_layer.py")

    last_layer.main(["--encoder", "tiny", "--neighbours", "4", "--steps", "1"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("top")]
    assert [line[:4] for line in lines] == ["top1", "top2"]
    for line in lines:
        ratio, gap = re.search(r"([\d.]+)x the full one \(pooled gap ([\d.e+-]+)\)", line).groups()
        assert float(ratio) > 0 and float(gap) < 1e-4
