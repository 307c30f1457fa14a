"""Shared fixtures: a tiny random BERT, its collator, and a tiny stream."""

from __future__ import annotations

import pytest
import torch

from lifelong.encoders import load_encoder, load_tokenizer
from lifelong.heads import ClassificationHead
from lifelong.model import Classifier, Collator
from lifelong.strategy import StrategyContext
from streams import Example, Task, TaskStream

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def tokenizer():
    return load_tokenizer("tiny")


@pytest.fixture
def collator(tokenizer):
    return Collator(tokenizer, max_length=32)


def tiny_classifier(num_labels: int = 4, seed: int = 0) -> Classifier:
    encoder = load_encoder("tiny", seed=seed)
    torch.manual_seed(seed)
    return Classifier(encoder, ClassificationHead(encoder.hidden_size, num_labels))


@pytest.fixture
def context(collator):
    return StrategyContext(tiny_classifier(), collator, num_labels=4, lr=1e-3, batch_size=4)


def toy_stream(n_train: int = 16, n_test: int = 8) -> TaskStream:
    """Two tasks, two labels each, with a word per label that gives the label away."""
    words = ["apple", "river", "guitar", "planet"]

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
    return TaskStream(tuple(tasks), ("apple", "river", "guitar", "planet"))


@pytest.fixture
def stream() -> TaskStream:
    return toy_stream()
