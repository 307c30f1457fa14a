"""The demo's claims on the bundled sample with the real MiniLM encoder (slow: ~3 minutes)."""

import pytest

from lifelong.experiment.config import DEMO_CONFIG, load_yaml
from lifelong.experiment.runs import run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    base = load_yaml(DEMO_CONFIG).replace(
        output_dir=str(tmp_path_factory.mktemp("runs")), progress=False
    )
    return {name: run(base.replace(strategy=name)) for name in ("seq", "replay")}


def test_seq_forgets_clearly(outcomes):
    seq = outcomes["seq"].metrics
    assert seq["bwt"] < -10
    assert seq["forgetting"] > 10


def test_replay_beats_seq_on_final_average_accuracy(outcomes):
    assert (
        outcomes["replay"].metrics["average_accuracy"] > outcomes["seq"].metrics["average_accuracy"]
    )


def test_each_task_is_learnt_when_trained(outcomes):
    accuracy = outcomes["seq"].result.accuracy
    # the diagonal: every dataset of the sample is learnable in one pass (33-way, no task id)
    assert accuracy.diagonal().min() > 30
    assert accuracy.diagonal().mean() > 70
