"""Load an experiment script (not a package module) as a module for its tests."""

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from lifelong.experiment.sweep import Sweep, load_sweep

EXPERIMENTS = Path(__file__).parents[2] / "experiments"


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


@pytest.fixture
def budget(load_script) -> Sweep:
    """The text budget protocol's sweep (``text_classification/real_budget.yaml``), unrun."""
    return load_sweep(load_script("text_classification/real_budget.py").BUDGET)
