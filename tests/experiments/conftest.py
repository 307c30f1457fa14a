"""The experiment scripts' shared fixture (`load_script` itself is in ``tests/conftest.py``)."""

import pytest

from lifelong.experiment.sweep import Sweep, load_sweep


@pytest.fixture
def budget(load_script) -> Sweep:
    """The text budget protocol's sweep (``text_classification/real_budget.yaml``), unrun."""
    return load_sweep(load_script("text_classification/real_budget.py").BUDGET)
