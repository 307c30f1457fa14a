"""Streams: examples, tasks and task streams, their loaders, task orders and bundled samples."""

from streams.core import Example, Task, TaskStream, batches
from streams.text_classification import (
    DATASETS,
    ORDERS,
    DataFormatError,
    text_classification_stream,
)

__all__ = [
    "DATASETS",
    "ORDERS",
    "DataFormatError",
    "Example",
    "Task",
    "TaskStream",
    "batches",
    "text_classification_stream",
]
