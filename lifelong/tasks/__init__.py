"""Task kinds: one module per kind of task, behind the `TaskKind` protocol.

Kinds, by the ``kind`` a `TaskStream` declares, and the model rows of one example:

* ``classification`` (`classification`): one row, ``[CLS] text [SEP]``;
* ``relation`` (`relation`): one row per candidate, ``[CLS] sentence [SEP] relation [SEP]``;
* ``qa`` (`qa`): one row per context window, ``[CLS] question [SEP] window [SEP]``.

`build_task` makes the kind a stream needs; the model, the learner and the strategies only ever
talk to the `TaskKind` it returns.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lifelong.tasks.settings import TaskSettings

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from lifelong.tasks.base import TaskKind

KINDS: dict[str, str] = {
    "classification": "lifelong.tasks.classification:Classification",
    "relation": "lifelong.tasks.relation:Relation",
    "qa": "lifelong.tasks.extractive_qa:QA",
}
"""The task kinds, by the name a `TaskStream` gives in its ``kind``: where each is implemented."""


def task_class(kind: str) -> type:
    """The class implementing a task kind (imported on first use).

    Raises:
        ValueError: An unknown kind (lists the known ones).

    """
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {', '.join(KINDS)}")
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def build_task(
    kind: str,
    tokenizer: PreTrainedTokenizerBase,
    label_names: Sequence[str] = (),
    settings: TaskSettings | None = None,
) -> TaskKind:
    """The task kind ``kind`` over a tokenizer and a stream's label space.

    Args:
        kind: ``"classification"``, ``"relation"`` or ``"qa"`` (a stream's ``kind``).
        tokenizer: The encoder's tokenizer.
        label_names: The stream's label names (relation names for relation extraction).
        settings: Row settings (lengths, QA windows, FewRel's pair loss).

    """
    return task_class(kind)(tokenizer, label_names, settings or TaskSettings())


__all__ = ["KINDS", "TaskKind", "TaskSettings", "build_task", "task_class"]


def __getattr__(name: str) -> object:
    if name == "TaskKind":  # the protocol imports torch: load it on first use
        from lifelong.tasks.base import TaskKind

        return TaskKind
    raise AttributeError(f"module 'lifelong.tasks' has no attribute {name!r}")
