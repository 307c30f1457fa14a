"""Linear probes (`lifelong.probing`): separable features score 100, collapsed ones chance."""

import numpy as np
import pytest
import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.heads import ClassificationHead
from lifelong.learner import run_stream
from lifelong.model import Classifier
from lifelong.probing import LinearProbe, probe_metrics
from lifelong.strategies.seq import Seq
from lifelong.strategy import StrategyContext
from tests.conftest import LABELS, toy_stream


class WordEncoder(nn.Module):
    """Pooled vector: a one-hot of the first word's token id (the toy's label word), or zeros."""

    def __init__(self, width: int = 64, collapsed: bool = False) -> None:
        super().__init__()
        self.hidden_size, self.collapsed = width, collapsed
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> EncoderOutput:
        pooled = nn.functional.one_hot(ids[:, 1] % self.hidden_size, self.hidden_size).float()
        pooled = pooled * self.scale * (0.0 if self.collapsed else 1.0)  # (n, d)
        return EncoderOutput(hidden=pooled[:, None, :], pooled=pooled)


def model(collapsed: bool = False) -> Classifier:
    encoder = WordEncoder(collapsed=collapsed)
    return Classifier(encoder, ClassificationHead(encoder.hidden_size, len(LABELS)))


def test_separable_features_probe_perfectly_and_collapsed_ones_at_chance(task):
    stream = toy_stream(n_train=16, n_test=8)
    assert LinearProbe(model(), task, stream).row(0).tolist() == [100.0, 100.0]
    # every feature the same: the probe can only guess one of the two balanced labels
    assert LinearProbe(model(collapsed=True), task, stream).row(0).tolist() == [50.0, 50.0]


def test_rows_after_training_probe_the_seen_tasks_only(task):
    stream = toy_stream()
    probe = LinearProbe(model(), task, stream)
    row = probe.row(1)
    assert row[0] == 100.0 and np.isnan(row[1])


def test_a_probing_run_keeps_the_matrix_and_its_split_of_forgetting(task):
    stream = toy_stream()
    learner = model()
    strategy = Seq(StrategyContext(learner, task, lr=1e-3, batch_size=4))
    probe = LinearProbe(learner, task, stream)
    result = run_stream(stream, strategy, task, batch_size=4, progress=False, probe=probe.row)
    assert result.probing.shape == (3, 2)
    assert result.probing[0].tolist() == [100.0, 100.0]  # the encoder's words stay separable
    assert np.isnan(result.probing[1, 1]) and result.probing[2].tolist() == [100.0, 100.0]
    assert result.cost["evaluate"]["forward_rows"] == 3 * 16  # the probe's passes are not counted


def test_probe_metrics_split_the_model_forgetting():
    probing = np.array([[60.0, 55.0], [90.0, np.nan], [70.0, 80.0]])
    out = probe_metrics(probing, forgot=50.0)
    assert out == {
        "probe_before": 57.5,
        "probe_average_accuracy": 75.0,
        "probe_forgetting": 20.0,  # task 0: 90 after it, 70 at the end
        "head_forgetting": 30.0,  # the rest of the model's 50 points
    }
    assert probe_metrics(probing, forgot=None)["head_forgetting"] is None


def test_probing_is_refused_on_other_kinds(tokenizer):
    from lifelong.tasks import TaskSettings, build_task

    relation = build_task("relation", tokenizer, LABELS, TaskSettings(max_length=32))
    with pytest.raises(ValueError, match="not on a relation stream"):
        LinearProbe(model(), relation, toy_stream())


def test_the_report_splits_the_forgetting_of_probing_runs(tmp_path):
    import lifelong
    from lifelong.experiment.reports import write_report
    from tests.conftest import tiny_demo

    for seed in (0, 1):
        config = tiny_demo(tmp_path / "runs", strategy="seq", probe=True, seed=seed)
        lifelong.run(config.replace(train_size=16, test_size=8))
    text = write_report(tmp_path / "runs", tmp_path / "report")["report.md"].read_text()
    assert "## Where the forgetting is (linear probes)" in text
    assert "2 runs with --probe" in text and "representation forgetting (probe)" in text
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.name.endswith("s0")]
    assert (run_dir / "probing.csv").read_text().startswith("row,ag_news,yelp\nbefore,")


def test_the_representation_share_is_the_probe_forgetting_over_the_model_forgetting(tmp_path):
    """Derived by the report from metrics.json (runs written before it was named have it too)."""
    from lifelong.experiment.reports.tables import _metric
    from lifelong.experiment.rundir import RunRecord

    def record(**metrics):
        return RunRecord(tmp_path, "text", "i", 0, "seq", metrics, accuracy=None)

    assert _metric(record(probe_forgetting=2.0, forgetting=50.0), "probe_share") == 4.0
    assert _metric(record(probe_forgetting=-1.0, forgetting=20.0), "probe_share") == -5.0
    assert _metric(record(probe_forgetting=1.0, forgetting=0.0), "probe_share") is None
    assert _metric(record(forgetting=10.0), "probe_share") is None  # not a probing run
