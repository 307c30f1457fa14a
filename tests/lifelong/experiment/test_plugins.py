"""The guide's "Write your own strategy" example, registered as an out-of-tree package."""

import re
import sys
from pathlib import Path

import pytest

from lifelong import registry
from lifelong.experiment.cli import main
from tests.conftest import install_plugin

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guide" / "write-your-own-strategy.md"


def readme_example() -> str:
    text = GUIDE.read_text()
    section = text.split("## Write your own strategy", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """The example installed as a package declaring its entry point."""
    points = "[lifelong.strategies]\nmixed-replay = my_strategies:MixedReplay\n"
    install_plugin(tmp_path, monkeypatch, "my_strategies", readme_example(), points)
    yield
    sys.modules.pop("my_strategies", None)


def test_readme_example_is_short():
    assert len(readme_example().strip().splitlines()) < 50


def test_out_of_tree_strategy_is_listed_and_runs_by_name(installed_plugin, tmp_path, capsys):
    assert "mixed-replay" in registry.names()
    assert main(["strategies"]) == 0
    assert "every batch plus a few reservoir-memory examples" in capsys.readouterr().out
    code = main(
        [
            "run",
            "--strategy",
            "mixed-replay",
            "--encoder",
            "tiny",
            "--tasks",
            "ag_news,yelp",
            "--train-size",
            "24",
            "--test-size",
            "8",
            "--no-progress",
            "-o",
            "mix=4",
            "--output-dir",
            str(tmp_path / "runs"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "Accuracy matrix" in out and "after yelp" in out


def test_unknown_plugin_option_is_an_error(installed_plugin, tmp_path, capsys):
    code = main(
        [
            "run",
            "--strategy",
            "mixed-replay",
            "--encoder",
            "tiny",
            "-o",
            "mixx=4",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert (
        "unknown option 'mixx' (did you mean 'mix'?); valid options: capacity, max_grad_norm" in err
    )


def test_in_process_registration(task):
    from lifelong.strategies.seq import Seq
    from lifelong.strategy import StrategyContext
    from tests.conftest import tiny_classifier

    registry.register("seq-alias", Seq)
    try:
        ctx = StrategyContext(tiny_classifier(), task)
        assert isinstance(registry.build("seq-alias", ctx), Seq)
    finally:
        registry._registered.pop("seq-alias")


def test_a_strategy_class_without_the_hooks_is_refused_before_anything_loads(tmp_path, capsys):
    class Bare:  # observe/predict/state only: the learner's hooks missing
        name = "bare"
        description = "no hooks"

    registry.register("bare", Bare)
    try:
        code = main(["run", "--strategy", "bare", "--encoder", "tiny", "--output-dir",
                     str(tmp_path)])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2
        assert "strategy 'bare'" in err and "lacks the learner's hooks on_stream_start" in err
        assert "inherit lifelong.StrategyHooks" in err
        assert not (tmp_path / "config.yaml").exists()
    finally:
        registry._registered.pop("bare")


def test_inherited_state_dict_saves_the_resumable_parts_and_names_what_is_missing(task):
    from lifelong import ResumableParts, StrategyHooks
    from lifelong.state import Counters

    class Counting(StrategyHooks):
        def __init__(self) -> None:
            self.counts = Counters(seen=3)
            self.resumable = ResumableParts(counts=self.counts)

    saved = Counting().state_dict()
    assert saved == {"counts": {"seen": 3}}
    restored = Counting()
    restored.counts.seen = 0
    restored.load_state_dict(saved)
    assert restored.counts.seen == 3

    class Partless(StrategyHooks):
        pass

    with pytest.raises(TypeError, match="Partless has no resumable parts: set self.resumable"):
        Partless().state_dict()
