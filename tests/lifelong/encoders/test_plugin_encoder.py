"""The guide's "Add an encoder" example, installed as an out-of-tree package and run by name."""

import re
import sys
from pathlib import Path

import pytest

from lifelong.encoders import names
from lifelong.experiment.cli import main
from tests.conftest import install_plugin

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guide" / "write-your-own-encoder.md"


def guide_example() -> str:
    return re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.S).group(1)


@pytest.fixture
def installed_encoder(tmp_path, monkeypatch):
    """The example installed as a package declaring its row (entry-point group)."""
    rows = "[lifelong.encoders]\nrunning-mean = my_encoders:ENTRY\n"
    install_plugin(tmp_path, monkeypatch, "my_encoders", guide_example(), rows)
    yield
    names.ENCODERS.pop("running-mean", None)
    sys.modules.pop("my_encoders", None)


def test_the_example_is_short():
    assert len(guide_example().strip().splitlines()) < 50


def test_an_installed_encoder_is_listed_and_runs_by_name(installed_encoder, tmp_path, capsys):
    assert "running-mean" in names.installed_encoders()
    assert main(["encoders"]) == 0
    assert "each segment reads the mean of the earlier segments" in capsys.readouterr().out
    assert names.is_segmented("running-mean") and names.layer_count("running-mean") == 0
    argv = ["run", "--encoder", "running-mean", "--segment-length", "16", "--max-length", "64"]
    argv += ["--tasks", "ag_news,yelp", "--train-size", "24", "--test-size", "8"]
    argv += ["--strategy", "seq", "--no-progress", "--output-dir", str(tmp_path / "runs")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Accuracy matrix" in out and "after yelp" in out


def test_a_row_is_declared_once_and_a_name_is_taken_once():
    entry = names.ENCODERS["memformer"]
    assert entry.build == "lifelong.encoders.memory_modules:build_memformer"
    with pytest.raises(ValueError, match="already in the table"):
        names.register_encoder("memformer", entry)
    with pytest.raises(ValueError, match="build must be 'module:function'"):
        names.register_encoder("nothing", names.EncoderEntry("a", "b", "c"))


def test_every_built_in_builder_imports_and_builds():
    from lifelong.encoders.layers import ModuleConfig
    from lifelong.encoders.memory_modules import MEMORY_MODULES, build_memory_module

    config = ModuleConfig(d_model=16, heads=2, layers=1, ffn=32, vocab_size=50, max_positions=16)
    assert list(MEMORY_MODULES) == list(names.MEMORY_FAMILIES) and len(MEMORY_MODULES) == 16
    for name in MEMORY_MODULES:
        assert build_memory_module(name, config, 16) is not None, name
