"""Load an experiment script (not a package module) as a module for its tests."""

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

EXPERIMENTS = Path(__file__).parents[2] / "experiments"


@pytest.fixture
def load_script() -> Iterator[Callable[[str], ModuleType]]:
    """``load_script("lm/lm_table.py")``: the script run as a module named after its file.

    The module is registered in ``sys.modules`` while the test runs (a dataclass in it resolves
    its annotations through it) and removed afterwards.
    """
    loaded: list[str] = []

    def load(relative: str) -> ModuleType:
        path = EXPERIMENTS / relative
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        loaded.append(path.stem)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in loaded:
        sys.modules.pop(name, None)
