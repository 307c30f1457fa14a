"""The task kind is ``kind`` everywhere; ``task``, its old name, still works and says so."""

import pytest

from lifelong.experiment.runs import BuiltRun
from lifelong.mechanisms.replay import episodic_writer
from lifelong.model import Classifier
from lifelong.strategy import StrategyContext
from tests.conftest import tiny_classifier


def test_the_old_name_of_the_task_kind_warns_and_gives_the_kind(task):
    model = tiny_classifier(kind=task)
    context = StrategyContext(model, task)
    with pytest.deprecated_call(
        match=r"StrategyContext.task is deprecated; use StrategyContext.kind"
    ):
        assert context.task is task is context.kind
    with pytest.deprecated_call(match=r"Classifier.task is deprecated"):
        assert model.task is task is model.kind
    with pytest.deprecated_call(match=r"Classifier\(task=...\) is deprecated"):
        assert Classifier(model.encoder, model.head, task=task).kind is task
    writer = episodic_writer(context)
    with pytest.deprecated_call(match=r"EpisodicWriter.task is deprecated"):
        assert writer.task is task is writer.kind
    built = BuiltRun(None, task, None, None)
    with pytest.deprecated_call(match=r"BuiltRun.task is deprecated"):
        assert built.task is task is built.kind


def test_the_code_uses_the_new_name_only():
    """pyproject's filterwarnings makes our deprecation warnings errors in every test."""
    import warnings

    from lifelong._deprecated import deprecated_alias

    with warnings.catch_warnings():
        warnings.filterwarnings("error", r"lifelong. .* is deprecated", DeprecationWarning)
        with pytest.raises(DeprecationWarning):
            deprecated_alias("a", "b")
