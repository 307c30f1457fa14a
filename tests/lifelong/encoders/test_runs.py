"""Memory-augmented encoders in lifelong classification runs, from the CLI."""

import pandas as pd
import pytest

from lifelong import registry
from lifelong.encoders import MEMORY_MODULES
from lifelong.experiment.cli import main

SAMPLE = ["--tasks", "ag_news,yelp", "--train-size", "16", "--test-size", "8"]
SMALL = {  # keep the costly parts small: the test is that each strategy runs
    "ewc": ["-o", "fisher_samples=8"],
    "mtl": ["-o", "epochs=1"],
    "ranpac": ["-o", "projection=64"],  # the paper's 10,000 solves take minutes
    **{n: ["-o", "k=4", "-o", "steps=3"] for n in ("mbpa", "mbpa++", "mbpa++-rand", "meta-mbpa")},
}


def run(tmp_path, encoder, strategy, *extra):
    return main(
        [
            "run",
            "--no-progress",
            "--encoder",
            encoder,
            "--segment-length",
            "16",
            "--max-length",
            "48",
            "--lr",
            "1e-3",
            "--strategy",
            strategy,
            "--output-dir",
            str(tmp_path),
            *SAMPLE,
            *SMALL.get(strategy, []),
            *extra,
        ]
    )


def accuracy(tmp_path):
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return pd.read_csv(run_dir / "accuracy.csv", index_col="row"), run_dir


@pytest.mark.parametrize("encoder", [*MEMORY_MODULES, "memoria-tiny"])
def test_every_memory_encoder_runs_a_classification_stream(encoder, tmp_path, capsys):
    assert run(tmp_path, encoder, "replay", "-o", "replay_every=8") == 0
    out = capsys.readouterr().out
    assert "Accuracy matrix" in out and "forgetting" in out
    frame, run_dir = accuracy(tmp_path)
    assert list(frame.columns) == ["ag_news", "yelp"] and frame.shape == (3, 2)
    assert f"encoder:\n  name: {encoder}" in (run_dir / "config.yaml").read_text()


@pytest.mark.parametrize("name", registry.available())
def test_every_strategy_runs_with_a_memory_encoder(name, tmp_path, capsys):
    assert run(tmp_path, "memformer", name) == 0
    assert "Accuracy matrix" in capsys.readouterr().out


def test_local_adaptation_of_all_weights_is_refused_with_a_memory_encoder(tmp_path, capsys):
    assert run(tmp_path, "memorizing", "mbpa", "-o", "adapt_scope=all") != 0
    assert "adapt_scope 'head' only" in capsys.readouterr().err
