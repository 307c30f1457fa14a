"""The LM loop bench runs its two loops side by side and prints their ratio."""

from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_lm_loop_bench_prints_both_loops_and_the_ratio(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT))
    from experiments.bench import lm_loop

    result = lm_loop.main(["--steps", "2", "--rounds", "1", "--width", "16", "--layers", "1"])
    out = capsys.readouterr().out
    assert "| plain |" in out and "| ours |" in out and "ours / plain:" in out
    assert result["ratio"] > 0 and result["plain"] > 0
