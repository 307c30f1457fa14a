"""The paper-scale bench runs end to end (tiny model, few keys) and prints every table."""

import pytest


@pytest.mark.slow
def test_scale_bench_prints_phases_memory_and_projections(load_script, capsys):
    scale = load_script("bench/scale.py")

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


@pytest.mark.slow
def test_meta_mbpa_is_timed_with_its_k_neighbours_not_an_empty_memory(load_script):
    # timed from an empty memory, Meta-MbPA's meta loss is the plain loss (no neighbours): the
    # first GPU runs of the bench timed that. `prefill` gives every timed example K neighbours.
    scale = load_script("bench/scale.py")

    from lifelong.encoders import load_tokenizer
    from lifelong.runtime import Runtime
    from lifelong.strategy import StrategyContext
    from lifelong.streams import batches, text_classification_stream
    from lifelong.tasks import TaskSettings, build_task

    runtime = Runtime.resolve("cpu", "fp32")
    stream = text_classification_stream("i")
    kind = build_task(
        "classification", load_tokenizer("minilm"), stream.label_names, TaskSettings(max_length=16)
    )
    pool = [e for t in stream for e in t.train][:96]
    data = [kind(c) for c in batches(pool, 32, shuffle=True, seed=0)]
    model = scale.fresh_model(kind, runtime, 0, "tiny")
    strategy = scale.registry.build("meta-mbpa", StrategyContext(model, kind, lr=1e-3, seed=0))
    assert [len(n) for n in strategy.neighbours(data[0])] == [0] * 32  # what was timed before
    stored = scale.prefill(strategy, data[1:])
    assert stored == 64 == len(strategy.memory) and scale.NEIGHBOURS + 1 <= stored
    assert [len(n) for n in strategy.neighbours(data[0])] == [scale.NEIGHBOURS] * 32
    assert strategy.memory.policy.__class__.__name__ == "DiversityWrite"  # its policy is back
    assert scale.prefill(scale.registry.build("seq", StrategyContext(model, kind)), data) == 0


def test_episodic_strategies_need_whole_episodes_in_the_timed_window(load_script, capsys):
    # OML-ER trains once per 6 batches: 2 timed batches held no update and printed 17,000x
    scale = load_script("bench/scale.py")

    with pytest.raises(SystemExit):
        scale.main(["--device", "cpu", "--size", "tiny", "--steps", "2", "--strategies", "oml-er"])
    assert "oml-er trains once per episode of 6 batches" in capsys.readouterr().err
