"""Language-modelling tasks for the memory-augmented modules (the sorting benchmark)."""

from lifelong.lm.sorting import (
    IGNORE,
    PAD,
    SEP,
    VOCAB_SIZE,
    SortingBatch,
    SortingGenerator,
    SortingLM,
    SortingOutput,
    evaluate_sorting,
    make_batch,
    sequence_length,
    sort_by_count,
    sorting_accuracy,
    sorting_loss,
    train_sorting,
)

__all__ = [
    "IGNORE",
    "PAD",
    "SEP",
    "VOCAB_SIZE",
    "SortingBatch",
    "SortingGenerator",
    "SortingLM",
    "SortingOutput",
    "evaluate_sorting",
    "make_batch",
    "sequence_length",
    "sort_by_count",
    "sorting_accuracy",
    "sorting_loss",
    "train_sorting",
]
