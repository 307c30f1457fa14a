"""Reading ``torch.save`` files as data only: no file `lifelong` reads can run code.

A pickle can name any importable function and call it while it is read (``os.system`` among
them), so torch's full unpickler runs whatever a planted ``checkpoint.pt`` asks. Every
``torch.save`` file `lifelong` reads goes through `load_data` instead, which accepts data and
nothing else:

* tensors, and what torch's weights-only unpickler allows by default (plain containers:
  dicts, lists, tuples, sets, strings, numbers, ``None``; ``OrderedDict``; torch dtypes);
* NumPy arrays and scalars (generator states are arrays), rebuilt by NumPy's own
  reconstructors from the bytes in the file;
* the two plain records a strategy's state holds: `lifelong.batch.Batch` (tensors; the
  pending batches of a meta-learner's episode) and `lifelong.memory.records.ExampleRecords`
  (int arrays), both frozen dataclasses restored field by field, without running code.

`data_globals` is that allow-list. Anything else is refused before it is unpickled, in one
line naming what the file asks for (`UnsafeFileError`).
"""

from __future__ import annotations

import io
import pickle
import pickletools
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch


class UnsafeFileError(ValueError):
    """A ``torch.save`` file holds more than data (a function or class to call when read)."""


class UnreadableFileError(ValueError):
    """A ``torch.save`` file is truncated, corrupt or not a ``torch.save`` file at all."""


def _numpy_globals() -> list[Any]:
    """NumPy's reconstructors, under the module names NumPy 1 and NumPy 2 pickle them by."""
    from numpy._core import multiarray

    # the dtypes of numbers, booleans and fixed-width strings (a pickled dtype is an instance
    # of its own class, e.g. numpy.dtypes.UInt32DType)
    kinds = [type(np.dtype(c)) for c in "?bBhHiIlLqQefdgFDG"] + [type(np.dtype(c)) for c in "SU"]
    out: list[Any] = [np.ndarray, np.dtype, *dict.fromkeys(kinds)]
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        out.append((multiarray._reconstruct, f"{module}._reconstruct"))
        out.append((multiarray.scalar, f"{module}.scalar"))
    return out


def _record_globals() -> list[Any]:
    from lifelong.batch import Batch
    from lifelong.memory.records import ExampleRecords

    # checkpoints written before `Batch` had its own module name it lifelong.model.Batch
    return [Batch, (Batch, "lifelong.model.Batch"), ExampleRecords]


def data_globals() -> list[Any]:
    """The allow-list beyond torch's defaults: NumPy arrays and scalars, `Batch`, records."""
    return [*_numpy_globals(), *_record_globals()]


def _global_names(entries: list[Any]) -> set[str]:
    names = set()
    for entry in entries:
        if isinstance(entry, tuple):
            names.add(entry[1])
        else:
            names.add(f"{entry.__module__}.{entry.__qualname__}")
    return names


_UNSUPPORTED = re.compile(
    r"(?:unsupported global:? GLOBAL |Trying to call reduce for |but got <class ')([\w.]+)",
    re.IGNORECASE,
)


def load_data(source: str | Path | bytes, *, what: str = "file", where: str | None = None) -> Any:
    """Read a ``torch.save`` file (a path, or its bytes) as data, every tensor on the CPU.

    Args:
        source: The file, or its content.
        what: What the file is, for messages (e.g. ``"checkpoint"``).
        where: How messages name it (default: the path; ``"<bytes>"`` for bytes).

    Returns:
        What was saved: tensors, NumPy arrays and plain containers (`data_globals`).

    Raises:
        UnsafeFileError: The file names a function or class outside the allow-list (named,
            with the refusal); nothing of it was run.
        UnreadableFileError: It is not a whole ``torch.save`` file (truncated, corrupt, empty).
        OSError: The path cannot be read.

    """
    if isinstance(source, bytes):
        data, name = source, where or "<bytes>"
    else:
        data, name = Path(source).read_bytes(), where or str(source)
    if not data:
        raise UnreadableFileError(f"{name}: the {what} is empty (0 bytes)")
    allowed = data_globals()
    with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on a pickle protocol it did not write
        unsafe = _static_globals(data)
        if unsafe:
            raise UnsafeFileError(_refusal(name, what, unsafe))
        try:
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            found = _UNSUPPORTED.findall(str(err))
            if found:
                raise UnsafeFileError(_refusal(name, what, found)) from None
            raise UnreadableFileError(
                f"{name}: cannot read the {what}: not a torch.save file of data ({_core(err)})"
            ) from None
        except Exception as err:  # noqa: BLE001 (a damaged file fails anywhere in torch's reader;
            # the weights-only unpickler runs no code, so any failure is the file's, said so)
            raise UnreadableFileError(
                f"{name}: cannot read the {what}: {type(err).__name__}: {_first(err)}"
            ) from None


def _static_globals(data: bytes) -> list[str]:
    """The globals a ``torch.save`` file (or a bare pickle) names outside the allow-list.

    The pickle is disassembled, not run: torch's `get_unsafe_globals_in_checkpoint` for its
    zip format, `pickletools` for anything else. Whatever this misses (a damaged file), the
    weights-only unpickler refuses when it meets it.
    """
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
            found = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
        else:
            found = _pickle_globals(data)
    except Exception:  # a damaged file: torch.load says what is wrong with it
        return []
    allowed = _global_names(data_globals())
    return sorted(name for name in found if name not in allowed)


def _pickle_globals(data: bytes) -> list[str]:
    """``module.name`` of every GLOBAL / STACK_GLOBAL in a bare pickle, without running it."""
    found, strings = [], []
    for opcode, arg, _ in pickletools.genops(data):
        if opcode.name == "GLOBAL":
            found.append(str(arg).replace(" ", "."))
        elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.append(f"{strings[-2]}.{strings[-1]}")
        elif isinstance(arg, str):
            strings.append(arg)
    return found


def _refusal(name: str, what: str, found: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(found))
    return (
        f"{name}: refused: the {what} asks to run {shown}, which is code, not data; lifelong "
        "reads only tensors, NumPy arrays and plain containers from it, so nothing was loaded"
    )


def _core(err: BaseException) -> str:
    """The line of torch's weights-only refusal that says what it met."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    marker = "WeightsUnpickler error:"
    for i, line in enumerate(lines):
        if line.endswith(marker) and i + 1 < len(lines):
            return lines[i + 1]
        if marker in line:
            return line.split(marker, 1)[1].strip()
    return lines[-1] if lines else type(err).__name__


def _first(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
