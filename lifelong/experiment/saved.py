"""A model to keep: a run's trained strategy written to ``<run>/model/``, loaded back to predict.

``lifelong run --save-model`` (config key ``tracking.save_model``) writes, once the run has
finished:

============================ =====================================================================
``model/strategy.pt``         the strategy's state as a checkpoint holds it (weights, episodic
                              memory, optimiser; read back with `lifelong.serialization.load_data`)
``model/encoder/``            the encoder in Hugging Face format (``save_pretrained``, with its
                              tokenizer) where it is a Hugging Face model, for other tools
``model/head.safetensors``    the task head's weights
``model/config.yaml``         the run config the model was trained under
``model/lifelong.json``       the stream (kind, labels, tasks, order), the strategy, the metrics
``model/predictions.csv``     the final model's prediction on every test row (classification)
``model/README.md``           a model card: stream, order, strategy, seed, metrics, how to load
============================ =====================================================================

`load_model` rebuilds the strategy from the config and restores its state, so
`SavedModel.predict` answers with the strategy's own test-time behaviour: MbPA++'s local
adaptation on the stored memories, a meta-learner's meta-test. ``lifelong predict DIR --text``
is the same from the command line.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from lifelong.experiment.config import ConfigError, RunConfig, RunPlan, from_dict

if TYPE_CHECKING:
    from lifelong.experiment.build import BuiltRun
    from lifelong.learner import StreamResult
    from lifelong.strategy import Strategy
    from lifelong.tasks import TaskKind

MODEL_DIR = "model"
"""The folder of a run directory that holds its saved model."""

FORMAT = 1
"""The saved model's layout version (``lifelong.json``'s ``format``)."""

PREDICTS = ("classification",)
"""Task kinds `SavedModel.predict` answers for (one label per text)."""


def save_model(
    run_dir: Path, plan: RunPlan, built: BuiltRun, result: StreamResult, metrics: dict[str, Any]
) -> Path:
    """Write the trained strategy of a finished run to ``run_dir / "model"`` (atomically).

    Args:
        run_dir: The run directory.
        plan: The run's checked config.
        built: What the run trained (its stream, kind, strategy, model).
        result: The run's matrices.
        metrics: Its ``metrics.json``.

    Returns:
        The model folder.

    """
    import torch

    from lifelong.runtime import to_cpu

    final, temporary = run_dir / MODEL_DIR, run_dir / f".{MODEL_DIR}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()
    buffer = io.BytesIO()  # first: predicting below may move a strategy's evaluation state
    torch.save({"format": FORMAT, "strategy": to_cpu(built.strategy.state_dict())}, buffer)
    (temporary / "strategy.pt").write_bytes(buffer.getvalue())
    _save_hugging_face(temporary, built, plan.config)
    stream = built.stream
    info = {
        "format": FORMAT,
        "stream": plan.config.stream.name,
        "order": plan.label,
        "kind": stream.kind,
        "label_names": list(stream.label_names),
        "tasks": [{"name": t.name, "labels": list(t.labels)} for t in stream],
        "strategy": plan.config.strategy.name,
        "seed": plan.config.training.seed,
        "encoder": plan.config.encoder.name,
        "metrics": {k: metrics.get(k) for k in ("average_accuracy", "bwt", "fwt", "forgetting")},
        "final_row": dict(zip(result.task_names, map(float, result.accuracy[-1]), strict=True)),
    }
    (temporary / "lifelong.json").write_text(json.dumps(info, indent=2) + "\n")
    (temporary / "config.yaml").write_text(yaml.safe_dump(plan.sections, sort_keys=False))
    if stream.kind in PREDICTS:
        (temporary / "predictions.csv").write_text(_test_predictions(built))
    (temporary / "README.md").write_text(model_card(info, plan.options))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(temporary, final)
    return final


def _save_hugging_face(folder: Path, built: BuiltRun, config: RunConfig) -> None:
    """The encoder with its tokenizer via ``save_pretrained`` (a Hugging Face model), the head."""
    from safetensors.torch import save_file

    from lifelong.encoders import load_tokenizer, tokenizer_name

    if built.model is None:
        raise ValueError("save_model needs the model a run built (BuiltRun.model)")
    encoder = built.model.encoder
    hub_model = getattr(encoder, "model", None)
    if hasattr(hub_model, "save_pretrained"):
        hub_model.save_pretrained(folder / "encoder")
        load_tokenizer(tokenizer_name(config.encoder.name)).save_pretrained(folder / "encoder")
    head = {k: v.detach().cpu().contiguous() for k, v in built.model.head.state_dict().items()}
    save_file(head, str(folder / "head.safetensors"))


def _test_predictions(built: BuiltRun) -> str:
    """``task,uid,label,predicted`` for every test row, as the final model predicts it."""
    from lifelong.learner import predict_labels

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["task", "uid", "label", "predicted"])
    names = built.stream.label_names
    for task in built.stream:
        predicted = predict_labels(built.strategy, task.test, built.kind)
        for example, label in zip(task.test, predicted, strict=True):
            writer.writerow([task.name, example.uid, names[example.label], names[label]])
    return out.getvalue()


def model_card(info: dict[str, Any], options: Any) -> str:
    """The model card (``README.md``): what was trained on what, its scores, how to load it."""
    metrics = info["metrics"]
    scores = ", ".join(
        f"{name} {'n/a' if metrics[key] is None else f'{metrics[key]:.1f}'}"
        for key, name in (
            ("average_accuracy", "average accuracy"),
            ("bwt", "BWT"),
            ("fwt", "FWT"),
            ("forgetting", "forgetting"),
        )
    )
    final = " | ".join(f"{v:.1f}" for v in info["final_row"].values())
    return f"""---
library_name: lifelong
tags: [continual-learning, lifelong-learning, episodic-memory]
---

# {info["strategy"]} on {info["stream"]} (order {info["order"]}, seed {info["seed"]})

Trained with `lifelong` by one pass over the stream
{" -> ".join(t["name"] for t in info["tasks"])}, encoder `{info["encoder"]}`.

- strategy: `{info["strategy"]}` with {options}
- metrics (points): {scores}
- accuracy on each task after the last one (%):

| {" | ".join(info["final_row"])} |
|{"---|" * len(info["final_row"])}
| {final} |

## Use

```python
import lifelong

model = lifelong.load_model("{MODEL_DIR}")  # this folder, or the run directory above it
model.predict(["a text to classify"])
```

or `lifelong predict DIR --text "a text to classify"`. `strategy.pt` holds the strategy's
state (weights and episodic memory), which `load_model` restores so that predictions use the
strategy's test-time behaviour; `encoder/` (where present) is the encoder alone in Hugging Face
format and `head.safetensors` the head, for other tools; `predictions.csv` the final model's
prediction on every test row.
"""


class SavedModel:
    """A saved run's strategy, rebuilt to predict (`load_model`).

    Attributes:
        path: The model folder.
        info: Its ``lifelong.json`` (stream, labels, strategy, metrics).
        strategy: The rebuilt strategy, in its trained state.
        kind: The task kind its texts are read by.

    """

    def __init__(self, path: Path, info: dict[str, Any], strategy: Strategy, kind: TaskKind):
        self.path, self.info, self.strategy, self.kind = path, info, strategy, kind

    @property
    def label_names(self) -> tuple[str, ...]:
        """The stream's label names (index = label id)."""
        return tuple(self.info["label_names"])

    def predict(self, texts: Sequence[str], *, batch_size: int = 64) -> list[str]:
        """The label each text gets, with the strategy's test-time behaviour.

        Raises:
            ConfigError: The model is not a text classifier (QA and FewRel need more than a
                text: a context, candidate relations).

        """
        ids = self.predict_ids(texts, batch_size=batch_size)
        return [self.label_names[i] for i in ids]

    def predict_ids(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """The label ids (`predict` without the names)."""
        from lifelong.learner import predict_labels
        from lifelong.streams.core import Example

        if self.info["kind"] not in PREDICTS:
            raise ConfigError(
                f"{self.path}: a {self.info['kind']} model ({self.info['stream']} stream); "
                "predict answers text classifiers only"
            )
        if isinstance(texts, str):
            texts = [texts]
        examples = [Example(str(t), 0, uid=f"predict:{i}") for i, t in enumerate(texts)]
        return predict_labels(self.strategy, examples, self.kind, batch_size=batch_size)

    def __repr__(self) -> str:
        """One line: what was trained on what, and where it lies."""
        i = self.info
        return (
            f"SavedModel({i['strategy']} on {i['stream']} {i['order']}, seed {i['seed']}, "
            f"{len(i['label_names'])} labels; {self.path})"
        )


def load_model(path: str | Path, *, device: str = "cpu") -> SavedModel:
    """Load a model `save_model` wrote: the run directory or its ``model/`` folder.

    Args:
        path: The folder.
        device: Where to predict (``cpu``, ``cuda``, ``auto``).

    Raises:
        ConfigError: No saved model there (``--save-model`` was not given), or a layout this
            version does not read.

    """
    from lifelong import registry
    from lifelong.encoders.names import ENCODERS
    from lifelong.experiment.build import model_and_kind
    from lifelong.experiment.config import runtime_of
    from lifelong.serialization import load_data
    from lifelong.strategy import StrategyContext
    from lifelong.tasks.prepared import on_device

    folder = Path(path)
    if (folder / MODEL_DIR / "lifelong.json").is_file():
        folder = folder / MODEL_DIR
    if not (folder / "lifelong.json").is_file():
        raise ConfigError(
            f"{path}: no saved model (lifelong.json); a run keeps one with --save-model"
        )
    info = json.loads((folder / "lifelong.json").read_text())
    if info.get("format") != FORMAT:
        raise ConfigError(f"{folder}: saved-model format {info.get('format')!r}; expected {FORMAT}")
    values = yaml.safe_load((folder / "config.yaml").read_text())
    config = from_dict(values, where=str(folder / "config.yaml"))
    saved_encoder = folder / "encoder"
    if config.encoder.name not in ENCODERS and (saved_encoder / "config.json").is_file():
        # a hub model: read its saved copy, not the hub (a built-in name is built as trained)
        config = config.replace("saved model", encoder=str(saved_encoder))
    config = config.replace("load_model", device=device)
    runtime = runtime_of(config.training)
    model, kind, _ = model_and_kind(
        config.encoder, config.task, info["kind"], info["label_names"], seed=config.training.seed
    )
    model.to(runtime.device)
    kind = on_device(kind, runtime.device)
    context = StrategyContext(
        model,
        kind,
        lr=config.training.lr,
        batch_size=config.training.batch_size,
        seed=config.training.seed,
        runtime=runtime,
        memory_index=config.training.memory_index,
    )
    strategy = registry.build(config.strategy.name, context, config.strategy.parse())
    state = load_data(folder / "strategy.pt", what="saved model")
    strategy.load_state_dict(state["strategy"])
    return SavedModel(folder, info, strategy, kind)
