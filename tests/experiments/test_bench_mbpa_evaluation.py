"""The whole-evaluation bench times the budget's MbPA++ evaluations with the savings and without."""

from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from experiments.bench import mbpa_evaluation

    return mbpa_evaluation


def test_both_ways_evaluate_the_same_memory_and_predict_alike(bench):
    lines = bench.main(["--encoder", "tiny", "--train-size", "8", "--test-size", "6",
                        "--evaluations", "2"])  # fmt: skip
    assert lines[0].startswith("MbPA++ (budget options), memory of 40 training rows, 2 evaluations")
    before, now = (line.split("|") for line in lines[4:6])
    assert before[1].strip() == "before the savings" and now[1].strip() == "now"
    assert before[3] == now[3]  # the same accuracy: the savings change values by rounding only
    assert "the evaluations' time falls by" in lines[-1]


def test_before_the_savings_turns_each_saving_off_and_back_on(bench):
    import torch

    import lifelong.mechanisms.neighbours as neighbours
    import lifelong.memory.keys as keys

    strategy, writer, _, _ = bench.build(None, 4, 2, "tiny")
    cache = writer.queries
    cpu = torch.device("cpu")
    assert keys.packs_keys(cpu) and neighbours.reads_pooled_only(strategy.trainer.model.head)
    with bench.before_the_savings(writer):
        assert not keys.packs_keys(cpu)
        assert not neighbours.reads_pooled_only(strategy.trainer.model.head)
        assert writer.queries is writer.key_encoder  # keyed at every call, nothing kept
    assert keys.packs_keys(cpu) and neighbours.reads_pooled_only(strategy.trainer.model.head)
    assert writer.queries is cache


def test_sizes_below_one_are_refused(bench):
    with pytest.raises(SystemExit):
        bench.main(["--evaluations", "0"])


def test_the_benchmarks_page_shows_the_committed_run():
    committed = (ROOT / "results" / "bench" / "mbpa_evaluation_2026-12-02_cpu.txt").read_text()
    table = committed.split("\n\n", 1)[1].strip()
    page = (ROOT / "docs" / "guide" / "benchmarks.md").read_text(encoding="utf-8")
    assert table in page
    ratio = committed.split("before / now: ")[1].split("x")[0]
    assert f"({ratio}x)" in page
