"""The strategy table's orderings on a reduced bundled sample with the real MiniLM (slow).

The guide's table runs the full sample (300 train / 100 test per dataset); these checks use 100 /
40 per dataset in the same order and with the same demo options, to keep CI fast.
"""

import pytest

from lifelong.experiment.config import DEMO_CONFIG, load_yaml
from lifelong.experiment.runs import run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def averages(tmp_path_factory):
    base = load_yaml(DEMO_CONFIG).replace(
        output_dir=str(tmp_path_factory.mktemp("runs")),
        progress=False,
        train_size=100,
        test_size=40,
    )
    return {
        name: run(base.replace(strategy=name)).metrics["average_accuracy"]
        for name in ("seq", "mbpa++", "mtl")
    }


def test_mbpa_plus_plus_beats_seq(averages):
    assert averages["mbpa++"] > averages["seq"] + 10


def test_mtl_beats_seq(averages):
    assert averages["mtl"] > averages["seq"] + 10
