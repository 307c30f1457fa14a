"""Streams: data only. Examples, tasks and task streams, their loaders, orders and samples.

Nothing here tokenises or scores: how an example becomes model input is a task kind's business
(`lifelong.tasks`). `build_stream` builds any of the three streams from its family's spec
(`StreamSpec`).
"""

from lifelong.streams.core import (
    DataFormatError,
    Example,
    StreamSpec,
    Task,
    TaskStream,
    UnknownNameError,
    batches,
    sample_examples,
)
from lifelong.streams.fewrel import (
    FewRelSpec,
    cluster_relations,
    fewrel_stream,
    hashed_bag_of_words,
    relation_names,
)
from lifelong.streams.qa import QA_DATASETS, QA_ORDERS, QASpec, qa_stream
from lifelong.streams.registry import STREAMS, build_stream, spec_class, stream_spec
from lifelong.streams.text_classification import (
    DATASETS,
    ORDERS,
    TextSpec,
    text_classification_stream,
)

__all__ = [
    "DATASETS",
    "ORDERS",
    "QA_DATASETS",
    "QA_ORDERS",
    "STREAMS",
    "DataFormatError",
    "Example",
    "FewRelSpec",
    "QASpec",
    "StreamSpec",
    "Task",
    "TaskStream",
    "TextSpec",
    "UnknownNameError",
    "batches",
    "build_stream",
    "cluster_relations",
    "fewrel_stream",
    "hashed_bag_of_words",
    "qa_stream",
    "relation_names",
    "sample_examples",
    "spec_class",
    "stream_spec",
    "text_classification_stream",
]
