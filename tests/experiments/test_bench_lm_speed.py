"""The LM speed bench trains its families side by side and prints each one's ratio."""

from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def lm_speed(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from experiments.bench import lm_speed

    return lm_speed


def test_the_bench_prints_every_family_against_the_transformer(lm_speed, capsys):
    tiny = ["--steps", "1", "--rounds", "1", "--width", "16", "--layers", "1", "--segments", "2",
            "--segment-length", "8", "--eval-chars", "64"]  # fmt: skip
    rates = lm_speed.main(["--modules", "transformer,pkm,pkm:dense", *tiny])
    out = capsys.readouterr().out
    assert set(rates) == {"transformer", "pkm", "pkm:dense"}
    assert "| transformer |" in out and "| 1.00 |" in out and "| pkm:dense |" in out


def test_pkm_dense_trains_its_values_densely_and_pkm_sparsely(lm_speed):
    from lifelong.encoders.pkm import sparse_parameters
    from lifelong.lm.bench import BenchSettings, build_lm

    settings = BenchSettings(width=16, layers=1, heads=2, segment_length=8)
    sparse = build_lm("pkm", 10, settings, 0, sparse_values=lm_speed.family("pkm")[1])
    dense = build_lm("pkm", 10, settings, 0, sparse_values=lm_speed.family("pkm:dense")[1])
    assert sparse_parameters(sparse) and not sparse_parameters(dense)


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        ("pkm,transformer", "start with 'transformer'"),
        ("transformer,pkn", "unknown module 'pkn'"),
        ("transformer,memsizer:dense", "':dense' applies to"),
        ("transformer,knn-lm", "reads a datastore"),
    ],
)
def test_bad_module_lists_are_refused_before_any_model_is_built(lm_speed, modules, message):
    with pytest.raises(SystemExit, match=message):
        lm_speed.main(["--modules", modules])
