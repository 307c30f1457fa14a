"""Language modelling with the memory modules: the sorting task and real text.

`lifelong.lm.sorting` is the ∞-former / Memoria sorting benchmark; `lifelong.lm.text` trains
character LMs on a real corpus (nanoGPT's recipe), `lifelong.lm.knn_lm` adds a kNN-LM datastore
over the episodic memory, and `lifelong.lm.bench` is ``lifelong lm``. Names load lazily
(`lifelong.lm.flags`, the command's flags, imports no torch).
"""

from __future__ import annotations

from lifelong._lazy import lazy_attributes

_SORTING = (
    "IGNORE", "PAD", "SEP", "VOCAB_SIZE", "SortingBatch", "SortingGenerator", "SortingLM",
    "SortingOutput", "evaluate_sorting", "make_batch", "sequence_length", "sort_by_count",
    "sorting_accuracy", "sorting_loss", "train_sorting",
)  # fmt: skip
_TEXT = (
    "DEFAULT_CORPUS", "CausalLM", "CharVocabulary", "Corpus", "TrainSettings", "evaluate_lm",
    "load_corpus", "train_lm",
)  # fmt: skip
_API = {
    **{name: "lifelong.lm.sorting" for name in _SORTING},
    **{name: "lifelong.lm.text" for name in _TEXT},
    "KNNLM": "lifelong.lm.knn_lm",
    "build_datastore": "lifelong.lm.knn_lm",
    "run_bench": "lifelong.lm.bench",
}

__all__ = sorted(_API)


__getattr__ = lazy_attributes(__name__, _API)
