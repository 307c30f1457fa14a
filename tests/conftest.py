"""Shared fixtures: a tiny random BERT, the classification task kind over it, a tiny stream;
an experiment script (not a package module) loaded as a module for its tests."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from lifelong.encoders import load_encoder, load_tokenizer
from lifelong.memory import ExampleRecords
from lifelong.model import Classifier
from lifelong.strategy import StrategyContext
from lifelong.streams import Example, Task, TaskStream
from lifelong.tasks import TaskSettings, build_task

torch.set_num_threads(2)


@pytest.fixture(autouse=True, scope="session")
def _token_cache_in_a_temporary_directory(tmp_path_factory):
    """Runs' token caches (`lifelong.tasks.cache`) go to a session directory, not ~/.cache."""
    import os

    previous = os.environ.get("LIFELONG_CACHE_DIR")
    os.environ["LIFELONG_CACHE_DIR"] = str(tmp_path_factory.mktemp("lifelong-cache"))
    yield
    if previous is None:
        os.environ.pop("LIFELONG_CACHE_DIR", None)
    else:
        os.environ["LIFELONG_CACHE_DIR"] = previous


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` skip cleanly where no CUDA device is visible (CPU CI)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none visible)")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


LABELS = ("apple", "river", "guitar", "planet")


@pytest.fixture(scope="session")
def tokenizer():
    return load_tokenizer("tiny")


def classification(tokenizer, labels=LABELS, max_length: int = 32):
    """The classification task kind over ``labels`` (rows of at most ``max_length`` tokens)."""
    return build_task("classification", tokenizer, labels, TaskSettings(max_length=max_length))


@pytest.fixture
def task(tokenizer):
    return classification(tokenizer)


def tiny_classifier(num_labels: int = 4, seed: int = 0, kind=None) -> Classifier:
    """The tiny random BERT with a fresh head (the task kind's, when given)."""
    encoder = load_encoder("tiny", seed=seed)
    torch.manual_seed(seed)
    if kind is not None:
        return Classifier(encoder, kind.head(encoder.hidden_size), kind=kind)
    from lifelong.heads import ClassificationHead

    return Classifier(encoder, ClassificationHead(encoder.hidden_size, num_labels))


@pytest.fixture
def context(task):
    return StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)


def toy_stream(n_train: int = 16, n_test: int = 8) -> TaskStream:
    """Two tasks, two labels each, with a word per label that gives the label away."""
    words = list(LABELS)

    def examples(label: int, n: int, split: str) -> tuple[Example, ...]:
        return tuple(
            Example(f"{words[label]} example number {i}", label, uid=f"{split}:{label}:{i}")
            for i in range(n)
        )

    tasks = []
    for t, labels in enumerate(((0, 1), (2, 3))):
        train = sum((examples(y, n_train // 2, "train") for y in labels), ())
        test = sum((examples(y, n_test // 2, "test") for y in labels), ())
        tasks.append(Task(f"task{t}", labels, train, test))
    return TaskStream(tuple(tasks), LABELS)


@pytest.fixture
def stream() -> TaskStream:
    return toy_stream()


def records(tokens, labels):
    """Classification-style memory records: token ids and one label per example."""
    return ExampleRecords.build(tokens=tokens, label=[[int(y)] for y in np.asarray(labels)])


def write(memory, tokens, labels, keys):
    """Write classification-style examples to an episodic memory."""
    return memory.write(records(tokens, labels), keys)


EXPERIMENTS = Path(__file__).parents[1] / "experiments"


@pytest.fixture
def load_script(monkeypatch) -> Iterator[Callable[[str], ModuleType]]:
    """``load_script("lm/lm_table.py")``: the script run as a module named after its file.

    As when the script is run, its folder comes first on ``sys.path``, so that it imports its
    siblings (e.g. ``text_classification/real_budget.py``). The module is registered in
    ``sys.modules`` while the test runs (a dataclass in it resolves its annotations through
    it); it and the siblings it imported are removed afterwards, so every test loads afresh.
    """
    before = set(sys.modules)

    def load(relative: str) -> ModuleType:
        path = EXPERIMENTS / relative
        monkeypatch.syspath_prepend(str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module

    yield load
    for name in set(sys.modules) - before:
        if EXPERIMENTS in Path(getattr(sys.modules[name], "__file__", None) or "/").parents:
            del sys.modules[name]


def install_plugin(
    folder: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str, entry_points: str
) -> None:
    """Install ``source`` as module ``module`` the way pip would: the module beside a
    dist-info holding ``entry_points`` (an ``entry_points.txt`` body), first on ``sys.path``."""
    (folder / f"{module}.py").write_text(source)
    dist = folder / f"{module}-0.1.dist-info"
    dist.mkdir()
    name = module.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points)
    monkeypatch.syspath_prepend(str(folder))


def tiny_demo(output_dir, **changes):
    """The demo config (`RunConfig.demo`) on the tiny encoder, AG News then Yelp, batches of 8,
    no progress bars, writing under ``output_dir``; flat-key ``changes`` on top."""
    from lifelong.experiment.config import RunConfig

    values = dict(encoder="tiny", tasks=["ag_news", "yelp"], batch_size=8, progress=False)
    return RunConfig.demo(**{**values, "output_dir": str(output_dir), **changes})


def headline_figure_folders() -> list[Path]:
    """The run folders the README's headline figure is drawn from, read off its redraw command
    (``lifelong report results/real_budget/<folder> ... --out``), so the tests check what the
    README says it draws."""
    import re

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text(encoding="utf-8")
    command = re.search(r"`lifelong report ((?:results/real_budget/\S+ )+)--out \S+ && cp", text)
    assert command, "the README gives the command that redraws its headline figure"
    return [root / folder for folder in command.group(1).split()]
