"""lifelong: continual (lifelong) learning for NLP built around episodic memory replay.

The public API, loaded lazily: ``import lifelong`` imports no torch, transformers, faiss or
pandas; each name below loads its module on first use (``lifelong.run``,
``lifelong.EpisodicMemory``, ...). The layers:

* the continual-learning core, in this package's top-level modules: the model and its batches
  (`lifelong.model`, `lifelong.batch`), heads, the `Strategy` protocol and registry, strategy
  options, the learner loop, training helpers, replay, local adaptation, episodes and the
  metrics;
* `lifelong.tasks`: one module per task kind (classification, relation extraction, QA);
* `lifelong.memory`: the episodic key-value memory, write policies and the key network;
* `lifelong.encoders`: Hugging Face encoders and the memory-augmented families;
* `lifelong.experiment`: run configs, runs, checkpoints, the run index, sweeps, reports, CLI.
"""

import importlib as _importlib

__version__ = "0.1.0"

_API: dict[str, str] = {
    # core
    "Batch": "lifelong.batch",
    "Classifier": "lifelong.model",
    "ClassificationHead": "lifelong.heads",
    "SpanHead": "lifelong.heads",
    "Strategy": "lifelong.strategy",
    "StrategyContext": "lifelong.strategy",
    "StrategyHooks": "lifelong.strategy",
    "ResumableParts": "lifelong.state",
    "StreamResult": "lifelong.learner",
    "DivergenceError": "lifelong.learner",
    "evaluate": "lifelong.learner",
    "run_stream": "lifelong.learner",
    "AdaptationOptions": "lifelong.mechanisms.adaptation",
    "LocalAdapter": "lifelong.mechanisms.adaptation",
    "local_adapt": "lifelong.mechanisms.inner_loop",
    "EpisodicWriter": "lifelong.memory",
    "episodic_writer": "lifelong.mechanisms.replay",
    "ReplayOptions": "lifelong.mechanisms.replay",
    "ReplaySchedule": "lifelong.mechanisms.replay",
    "SparseReplay": "lifelong.mechanisms.replay",
    "average_accuracy": "lifelong.metrics",
    "backward_transfer": "lifelong.metrics",
    "forgetting": "lifelong.metrics",
    "forward_transfer": "lifelong.metrics",
    "summary": "lifelong.metrics",
    "OptionsError": "lifelong.options",
    "parse_options": "lifelong.options",
    # task kinds
    "TaskKind": "lifelong.tasks",
    "build_task": "lifelong.tasks",
    # memory
    "EpisodicMemory": "lifelong.memory",
    "ExampleRecords": "lifelong.memory",
    "KeyEncoder": "lifelong.memory",
    "make_policy": "lifelong.memory",
    # encoders
    "EncoderOutput": "lifelong.encoders",
    "HFEncoder": "lifelong.encoders",
    "load_encoder": "lifelong.encoders",
    "load_tokenizer": "lifelong.encoders",
    # experiments
    "RunConfig": "lifelong.experiment.config",
    "load_yaml": "lifelong.experiment.config",
    "run": "lifelong.experiment.runs",
    "build_run": "lifelong.experiment.runs",
    "resume": "lifelong.experiment.runs",
    "load_checkpoint": "lifelong.experiment.checkpoint",
    "save_checkpoint": "lifelong.experiment.checkpoint",
    "RunIndex": "lifelong.experiment.index",
    "RunRecord": "lifelong.experiment.rundir",
    "RunOutcome": "lifelong.experiment.runs",
    "find_runs": "lifelong.experiment.rundir",
    "load_run": "lifelong.experiment.rundir",
    "load_model": "lifelong.experiment.saved",
    "SavedModel": "lifelong.experiment.saved",
    "grid": "lifelong.experiment.sweep",
    "report_table": "lifelong.experiment.reports",
    "write_report": "lifelong.experiment.reports",
    # streams (data)
    "Example": "lifelong.streams",
    "Task": "lifelong.streams",
    "TaskStream": "lifelong.streams",
    "text_classification_stream": "lifelong.streams",
    "qa_stream": "lifelong.streams",
    "fewrel_stream": "lifelong.streams",
}

__all__ = sorted([*_API, "registry"])


def __getattr__(name: str) -> object:
    if name == "registry":
        return _importlib.import_module("lifelong.registry")
    if name in _API:
        value = getattr(_importlib.import_module(_API[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'lifelong' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API only (`__all__` and the version), as a notebook's completion shows it."""
    return sorted([*__all__, "__version__"])
