"""One way to build any stream: a `StreamSpec` and the stream's name.

    stream = build_stream("fewrel", StreamSpec(seed=0, cluster_order=2, embed=embedder))

``text`` (the five text-classification datasets), ``qa`` (SQuAD, TriviaQA Web/Wikipedia,
QuAC) and ``fewrel`` (lifelong FewRel) each turn the same spec into a `TaskStream`; `check_stream`
checks names and orders without reading any file, so a run can reject them before anything
loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from lifelong.streams import fewrel, qa, text_classification
from lifelong.streams.core import TaskStream, UnknownNameError

Embedder = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class StreamSpec:
    """What a stream is built from; each stream reads the fields it needs.

    Attributes:
        order: Paper task order ``"i"``..``"iv"`` (text classification, QA).
        tasks: Dataset names in training order, overriding ``order`` (text classification, QA).
        data_dir: Directory of the real files; ``None``: the bundled sample (``data_source``
            ``hf``: the Hugging Face hub).
        data_source: ``"files"`` (each stream's file layout) or ``"hf"`` (Hugging Face
            ``datasets``: the hub, ``save_to_disk`` directories or parquet; `streams.hf`).
        train_size: Training examples per task (text: per dataset, paper 115,000 with real
            data; QA: questions per dataset; FewRel: sentences per relation); ``None``: the
            paper's size for real text data, else every example.
        test_size: Test examples per task, likewise (text: paper 7,600 with real data).
        seed: The run's seed: QA's and FewRel's sampling seed (FewRel clusters with K-means seed 0).
            Text classification ignores it: its sample is fixed (seed 42, Holla et al., 2020).
        preprocess: Text classification: ``"none"`` joins the text columns with spaces;
            ``"holla"`` lower-cases, cleans and joins them as Holla et al. (2020) do.
        fewrel_tasks: FewRel: relation clusters, i.e. tasks (papers: 10).
        cluster_order: FewRel: seed of the shuffled cluster order.
        glove: FewRel: GloVe file whose mean word vectors embed the relation names.
        embed: FewRel: embeds relation names when ``glove`` is not given (called only then).

    """

    order: str | None = "i"
    tasks: tuple[str, ...] | None = None
    data_dir: str | None = None
    data_source: text_classification.DataSource = "files"
    train_size: int | None = None
    test_size: int | None = None
    seed: int = 0
    preprocess: text_classification.Preprocessing = "none"
    fewrel_tasks: int = fewrel.PAPER_N_TASKS
    cluster_order: int = 0
    glove: str | None = None
    embed: Embedder | None = None


STREAMS: dict[str, Callable[[StreamSpec], TaskStream]] = {
    "text": text_classification.from_spec,
    "qa": qa.from_spec,
    "fewrel": fewrel.from_spec,
}
"""Stream name -> builder."""

DATASET_NAMES: dict[str, tuple[str, ...]] = {
    "text": tuple(text_classification.DATASETS),
    "qa": tuple(qa.QA_DATASETS),
    "fewrel": (),
}
"""The datasets each stream can order (FewRel's tasks are clusters, not datasets)."""


def build_stream(name: str, spec: StreamSpec) -> TaskStream:
    """Build the stream ``name`` (``text``, ``qa`` or ``fewrel``) from ``spec``.

    Raises:
        UnknownNameError: An unknown stream, dataset or order.
        DataFormatError: A file is missing or malformed (named, with the line or question).
        ValueError: A size larger than what a file holds (named).

    """
    if name not in STREAMS:
        raise UnknownNameError(f"unknown stream {name!r}; expected one of {', '.join(STREAMS)}")
    return STREAMS[name](spec)


def check_stream(name: str, order: str | None, tasks: Sequence[str] | None) -> None:
    """Check a stream name, its order and its task names without reading any file.

    Raises:
        UnknownNameError: An unknown stream, order or dataset (listing the valid ones).
        ValueError: Tasks given for FewRel, or a dataset listed twice.

    """
    if name == "text":
        text_classification.resolve_tasks(order, tasks)
    elif name == "qa":
        qa.resolve_qa_tasks(order, tasks)
    elif name == "fewrel":
        if tasks:
            raise ValueError(
                "FewRel's tasks are K-means clusters of the relations, not named datasets: "
                "set fewrel_tasks and cluster_order instead of tasks"
            )
    else:
        raise UnknownNameError(f"unknown stream {name!r}; expected one of {', '.join(STREAMS)}")
