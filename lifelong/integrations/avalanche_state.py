"""An Avalanche template's training state as data: what a checkpoint of ``avalanche:*`` holds.

Avalanche keeps what its strategies learn in plugin objects (replay buffers, EWC's importances,
LwF's teacher, GEM's and A-GEM's memories, the clock). Pickling them would let a checkpoint
name any class or function to call when read, so they are written as data instead
(`encode`): tensors, numbers, strings and tagged plain containers (``{"~": "dict", ...}``),
which `lifelong.serialization.load_data` reads without running anything. `restore` puts the
state back into the run's own, freshly built template:

* a plugin or buffer the template already has is restored in place, attribute by attribute,
  when the checkpoint names the same class (`IN_PLACE`);
* the few objects a state creates anew (a class's reservoir buffer, EWC's parameter records)
  are made without running their constructors, from a closed list (`CREATED`);
* datasets are rebuilt from their items' tensors by Avalanche's own tensor-dataset factory;
* a copied model (LwF's teacher) is a copy of the run's live model of its class, with the
  checkpoint's weights;
* the only functions a state may name are in `FUNCTIONS` (EWC's ``torch.zeros``).

Anything else in a checkpoint is refused (`AvalancheStateError`), naming it.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

TAG = "~"
"""The key marking an encoded non-tensor value; every dict of the encoding carries it."""

SKIPPED = frozenset({"buffer_dataloader", "buffer_dliter", "replay_loader"})
"""Loader attributes rebuilt after a restore (`rebuild_loaders`), never written."""

FACTORIES: dict[str, Callable[[], Any]] = {"set": set, "list": list, "dict": dict, "int": int}
"""``defaultdict`` default factories a state may hold."""

FUNCTIONS: dict[str, Callable[..., Any]] = {"torch.zeros": torch.zeros}
"""Functions a state may name (Avalanche's ``ParamData.init_function``)."""


class AvalancheStateError(ValueError):
    """An Avalanche state holds something that is not data, or does not fit this template."""


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _classes(names: tuple[str, ...]) -> dict[str, type]:
    """Avalanche's classes by qualified name (imported here: Avalanche is optional)."""
    import importlib

    out = {}
    for name in names:
        module, _, attr = name.rpartition(".")
        out[name] = getattr(importlib.import_module(module), attr)
    return out


CREATED_NAMES = (
    "avalanche.training.storage_policy.ReservoirSamplingBuffer",
    "avalanche.training.utils.ParamData",
)
"""Classes a state may create anew (without their constructors): buffers, parameter records."""

IN_PLACE_NAMES = (
    "avalanche.training.plugins.clock.Clock",
    "avalanche.training.templates.base_sgd.PeriodicEval",
    "avalanche.training.plugins.replay.ReplayPlugin",
    "avalanche.training.plugins.agem.AGEMPlugin",
    "avalanche.training.plugins.gem.GEMPlugin",
    "avalanche.training.plugins.ewc.EWCPlugin",
    "avalanche.training.plugins.lwf.LwFPlugin",
    "avalanche.training.regularization.LearningWithoutForgetting",
    "avalanche.training.storage_policy.ExperienceBalancedBuffer",
    "avalanche.training.supervised.der.ClassBalancedBufferWithLogits",
    "lifelong.integrations.avalanche.LossLog",
    "lifelong.integrations.avalanche.GradientClip",
    *CREATED_NAMES,
)
"""Classes whose objects the run's template already has: restored attribute by attribute."""


def encode(value: Any, live: Mapping[int, str]) -> Any:
    """``value`` as data: tensors, numbers, strings and tagged containers.

    Args:
        value: A template's attribute value.
        live: ``id`` -> name of the run's own objects (model, optimiser, evaluator): written
            as references, never copied.

    Raises:
        AvalancheStateError: A value of a type no checkpoint may hold (named).

    """
    from avalanche.benchmarks.utils.data import AvalancheDataset

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if id(value) in live:
        return {TAG: "live", "name": live[id(value)]}
    if isinstance(value, torch.Size):
        return {TAG: "size", "items": list(value)}
    if isinstance(value, torch.device):
        return {TAG: "device", "name": str(value)}
    if isinstance(value, defaultdict):
        factory = getattr(value.default_factory, "__name__", None)
        if factory not in FACTORIES:
            raise AvalancheStateError(f"a defaultdict of {factory!r} cannot be checkpointed")
        return {TAG: "defaultdict", "factory": factory, "items": _pairs(value, live)}
    if isinstance(value, dict):
        return {TAG: "dict", "items": _pairs(value, live)}
    if isinstance(value, list | tuple | set | frozenset):
        kind = "set" if isinstance(value, set | frozenset) else type(value).__name__
        items = sorted(value, key=repr) if kind == "set" else value
        return {TAG: kind, "items": [encode(v, live) for v in items]}
    if isinstance(value, AvalancheDataset):
        return {TAG: "dataset", **_dataset_items(value)}
    if isinstance(value, nn.Module):
        state = {k: v.detach().cpu().clone() for k, v in value.state_dict().items()}
        return {TAG: "module", "type": _qualname(type(value)), "state": state}
    for name, function in FUNCTIONS.items():
        if value is function:
            return {TAG: "function", "name": name}
    name = _qualname(type(value))
    if name in IN_PLACE_NAMES:
        attributes = {k: encode(v, live) for k, v in vars(value).items() if k not in SKIPPED}
        return {TAG: "object", "type": name, "state": attributes}
    raise AvalancheStateError(f"cannot checkpoint an object of {name}: not data")


def _pairs(mapping: Mapping[Any, Any], live: Mapping[int, str]) -> list[list[Any]]:
    return [[encode(k, live), encode(v, live)] for k, v in mapping.items()]


def _dataset_items(dataset: Any) -> dict[str, Any]:
    """A dataset's items as stacked tensors: patterns, targets, task labels, the extras."""
    items = [dataset[i] for i in range(len(dataset))]
    extras = [
        name
        for name, attribute in dataset._data_attributes.items()
        if attribute.use_in_getitem and name not in ("targets", "targets_task_labels")
    ]
    if not items:
        return {"size": 0, "extras": extras}
    columns = list(zip(*items, strict=True))
    out: dict[str, Any] = {
        "size": len(items),
        "x": torch.stack([torch.as_tensor(x) for x in columns[0]]),
        "y": torch.tensor([int(y) for y in columns[1]]),
        "t": torch.tensor([int(t) for t in columns[2]]),
        "extras": extras,
    }
    for i, name in enumerate(extras):
        out[f"extra.{name}"] = torch.stack([torch.as_tensor(v) for v in columns[3 + i]])
    return out


def decode(data: Any, live: Mapping[str, Any]) -> Any:
    """Inverse of `encode`: plain values as they are, tagged ones rebuilt as the module says.

    Raises:
        AvalancheStateError: A tag, class, function or reference outside the closed lists.

    """
    if isinstance(data, torch.Tensor) or data is None or isinstance(data, bool | int | float):
        return data
    if isinstance(data, str):
        return data
    if not isinstance(data, dict) or TAG not in data:
        raise AvalancheStateError(f"not an encoded Avalanche state value: {type(data).__name__}")
    tag = data[TAG]
    if tag == "live":
        if data.get("name") not in live:
            raise AvalancheStateError(f"a reference to an unknown live object {data.get('name')!r}")
        return live[data["name"]]
    if tag == "size":
        return torch.Size([int(v) for v in data["items"]])
    if tag == "device":
        return torch.device(str(data["name"]))
    if tag in ("dict", "defaultdict"):
        if tag == "defaultdict" and data.get("factory") not in FACTORIES:
            raise AvalancheStateError(f"a defaultdict of {data.get('factory')!r} is not allowed")
        out = defaultdict(FACTORIES[data["factory"]]) if tag == "defaultdict" else {}
        for key, value in data["items"]:
            out[decode(key, live)] = decode(value, live)
        return out
    if tag in ("list", "tuple", "set"):
        items = [decode(v, live) for v in data["items"]]
        return {"list": list, "tuple": tuple, "set": set}[tag](items)
    if tag == "dataset":
        return _dataset(data)
    if tag == "module":
        return _module_copy(data, live)
    if tag == "function":
        if data.get("name") not in FUNCTIONS:
            raise AvalancheStateError(f"the function {data.get('name')!r} is not allowed")
        return FUNCTIONS[data["name"]]
    if tag == "object":
        return _created(data, live)
    raise AvalancheStateError(f"unknown tag {tag!r} in an Avalanche state")


def _created(data: Mapping[str, Any], live: Mapping[str, Any]) -> Any:
    """A new object of a class in `CREATED_NAMES`, its attributes set, no constructor run."""
    name = data.get("type")
    if name not in CREATED_NAMES:
        raise AvalancheStateError(f"the checkpoint asks to create {name!r}, which is not allowed")
    cls = _classes(CREATED_NAMES)[name]
    obj = cls.__new__(cls)
    for key, value in _attributes(data).items():
        setattr(obj, key, decode(value, live))
    return obj


def _attributes(data: Mapping[str, Any]) -> dict[str, Any]:
    state = data.get("state")
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise AvalancheStateError(f"malformed state of {data.get('type')!r}")
    return {k: v for k, v in state.items() if k not in SKIPPED and not k.startswith("__")}


def _module_copy(data: Mapping[str, Any], live: Mapping[str, Any]) -> nn.Module:
    """A copy of the run's live module of the named class, holding the checkpoint's weights."""
    same = [
        m for m in live.values() if isinstance(m, nn.Module) and _qualname(type(m)) == data["type"]
    ]
    if not same:
        raise AvalancheStateError(f"no live model of class {data.get('type')!r} to copy")
    module = copy.deepcopy(same[0])
    module.load_state_dict(data["state"])
    return module


def _dataset(data: Mapping[str, Any]) -> Any:
    """An Avalanche tensor classification dataset of the encoded items (and extra attributes)."""
    from avalanche.benchmarks.utils import (
        _make_taskaware_tensor_classification_dataset,
        make_avalanche_dataset,
    )
    from avalanche.benchmarks.utils.data_attribute import TensorDataAttribute
    from avalanche.benchmarks.utils.flat_data import FlatData
    from avalanche.benchmarks.utils.utils import concat_datasets

    if int(data.get("size", 0)) == 0:
        return concat_datasets([])
    x, y, t = data["x"], data["y"], data["t"]
    if not all(isinstance(v, torch.Tensor) for v in (x, y, t)) or not len(x) == len(y) == len(t):
        raise AvalancheStateError("a dataset's items are not tensors of one length")
    labels = t.tolist()  # one task label for all: a constant, as `experience_dataset` makes
    task_labels = labels[0] if len(set(labels)) == 1 else labels
    dataset = _make_taskaware_tensor_classification_dataset(
        x, y, task_labels=task_labels, targets=y.tolist()
    )
    for name in data.get("extras", []):
        values = data[f"extra.{name}"]
        if not isinstance(values, torch.Tensor) or len(values) != len(x):
            raise AvalancheStateError(f"a dataset's {name!r} are not one tensor per item")
        attribute = TensorDataAttribute(
            FlatData([list(values)], discard_elements_not_in_indices=True),
            name=str(name),
            use_in_getitem=True,
        )
        dataset = make_avalanche_dataset(dataset, data_attributes=[attribute])
    return dataset


def restore(target: Any, data: Any, live: Mapping[str, Any], where: str) -> None:
    """Put an encoded object's attributes back into ``target``, the run's own object.

    Nested objects the target already has (a plugin's storage policy) are restored in place
    when the checkpoint names their class; other values are decoded and set.

    Raises:
        AvalancheStateError: The checkpoint's object is of another class than ``target``.

    """
    if not isinstance(data, dict) or data.get(TAG) != "object":
        raise AvalancheStateError(f"{where}: expected an encoded object")
    if data.get("type") != _qualname(type(target)):
        raise AvalancheStateError(
            f"{where}: the checkpoint holds a {data.get('type')}, this run a "
            f"{_qualname(type(target))}"
        )
    for key, value in _attributes(data).items():
        current = getattr(target, key, None)
        nested = isinstance(value, dict) and value.get(TAG) == "object"
        if nested and current is not None and value.get("type") == _qualname(type(current)):
            restore(current, value, live, f"{where}.{key}")
        else:
            setattr(target, key, decode(value, live))


def rebuild_loaders(plugin: Any) -> None:
    """A-GEM's memory loader and its iterator, rebuilt from its restored buffers.

    As A-GEM builds them (``AGEMPlugin.update_memory``): a resumed run starts a fresh pass over
    the same memory.
    """
    buffers = getattr(plugin, "buffers", None)
    if not buffers or not hasattr(plugin, "sample_size"):
        return
    from avalanche.benchmarks.utils.data_loader import GroupBalancedInfiniteDataLoader

    plugin.buffer_dataloader = GroupBalancedInfiniteDataLoader(
        buffers,
        batch_size=plugin.sample_size // len(buffers),
        num_workers=0,
        pin_memory=False,
        persistent_workers=False,
    )
    plugin.buffer_dliter = iter(plugin.buffer_dataloader)
