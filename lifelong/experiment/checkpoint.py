"""Checkpoints of a run in progress, written atomically, and what a resumed run starts from.

A checkpoint is one file, ``checkpoint.pt`` in the run directory. It holds the strategy's
``state_dict()`` (weights, optimiser, episodic memory, counters, its own generators), the
position in the stream (the task being trained and how many of its mini-batches were observed,
the untrained accuracies and the accuracy rows finished so far) and the global random states
(Python, NumPy, torch). The stream's shuffles are a pure function of (seed, task), so a resumed
run skips the batches already observed and continues exactly where the checkpoint was taken:
its accuracy matrix equals that of an uninterrupted run with the same seed.

The file is written to a temporary file in the same directory, fsynced and renamed over the old
one, so a run killed at any moment leaves either the previous checkpoint or the new one, whole.

It also records what the run was trained as: its run-config keys (``trained_as``) and a digest
of its stream (``stream``), which a resume checks (`lifelong.experiment.trust`). It is read as
data only (`lifelong.serialization.load_data`): tensors, NumPy arrays and plain containers; a
file that asks to run anything else is refused, and nothing of it runs.
"""

from __future__ import annotations

import dataclasses
import io
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lifelong.files import atomic_write_bytes
from lifelong.learner import DivergenceError, StreamPosition
from lifelong.runtime import to_cpu
from lifelong.serialization import UnreadableFileError, UnsafeFileError, load_data
from lifelong.strategy import Strategy

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable or from an incompatible run."""


@dataclass
class Checkpoint:
    """What a checkpoint file holds."""

    position: StreamPosition
    strategy: dict[str, Any]
    rng: dict[str, Any]
    trained_as: dict[str, Any] | None = None  # the run-config keys it was trained under
    stream: dict[str, Any] | None = None  # the digest of its stream (`trust.stream_fingerprint`)
    # both None in a checkpoint written before they were recorded


def random_states() -> dict[str, Any]:
    """The global generators' states (Python, NumPy's legacy one, torch CPU and CUDA).

    torch's CUDA states (one per device) are kept where CUDA is initialised. torch's states are
    kept as NumPy byte arrays, not tensors: no device mapping of the file can move them off the
    host, where torch reads them.
    """
    states = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state().numpy(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["torch_cuda"] = [s.numpy() for s in torch.cuda.get_rng_state_all()]
    return states


def _byte_state(state: Any) -> torch.Tensor:
    """A generator state as the CPU ByteTensor torch takes (from an array, or a tensor)."""
    if isinstance(state, torch.Tensor):  # checkpoints written before states were arrays
        return state.cpu()
    return torch.from_numpy(np.asarray(state, dtype=np.uint8).copy())


def restore_random_states(states: dict[str, Any]) -> None:
    """Inverse of `random_states`.

    CUDA generator states are restored when this machine has as many CUDA devices as the one
    that saved them; a run checkpointed on a GPU and resumed on the CPU (or on another count
    of GPUs) continues with the CPU generators restored and fresh CUDA ones.
    """
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(_byte_state(states["torch"]))
    cuda = states.get("torch_cuda")
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all([_byte_state(s) for s in cuda])


def save_checkpoint(
    run_dir: str | Path,
    strategy: Strategy,
    position: StreamPosition,
    *,
    trained_as: Mapping[str, Any] | None = None,
    stream: Mapping[str, Any] | None = None,
) -> Path:
    """Write the strategy's state, the stream position and the random states atomically.

    Every tensor is saved on the CPU (`lifelong.runtime.to_cpu`), so the file loads on any
    device: a run checkpointed on CUDA resumes on the CPU and the other way round.

    Args:
        run_dir: The run directory; the file is ``run_dir / "checkpoint.pt"``.
        strategy: The strategy being trained (its ``state_dict()`` is saved).
        position: Where the run is in its stream.
        trained_as: The run-config keys that define the run (`trust.trained_as`).
        stream: The stream's digest (`trust.stream_fingerprint`).

    Returns:
        The checkpoint's path.

    """
    state = strategy.state_dict()
    if (where := non_finite_path(state)) is not None:
        raise DivergenceError(
            f"training diverged: {where} holds non-finite values (nan or inf) at task "
            f"{position.task + 1}, mini-batch {position.step}; not checkpointed, so the last "
            "checkpoint is the last good state"
        )
    payload = {
        "version": FORMAT_VERSION,
        "position": position.to_dict(),
        "strategy": to_cpu(state),
        "rng": random_states(),
        "trained_as": None if trained_as is None else dict(trained_as),
        "stream": None if stream is None else dict(stream),
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    path = Path(run_dir) / CHECKPOINT_NAME
    atomic_write_bytes(path, buffer.getvalue())
    return path


def non_finite_path(state: Any, path: str = "state") -> str | None:
    """The path of the first floating-point tensor in ``state`` holding nan or inf, else None.

    ``state`` is a strategy's ``state_dict()``: nested mappings, sequences and dataclasses of
    tensors and plain values. Each tensor is reduced on its own device (one sync each).
    """
    if isinstance(state, torch.Tensor):
        bad = state.is_floating_point() and not bool(torch.isfinite(state).all())
        return path if bad else None
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        items = ((f.name, getattr(state, f.name)) for f in dataclasses.fields(state))
    elif isinstance(state, Mapping):
        items = ((str(k), v) for k, v in state.items())
    elif isinstance(state, list | tuple):
        items = ((str(i), v) for i, v in enumerate(state))
    else:
        return None
    for key, value in items:
        if (found := non_finite_path(value, f"{path}.{key}")) is not None:
            return found
    return None


def load_checkpoint(run_dir: str | Path) -> Checkpoint:
    """Read ``run_dir / "checkpoint.pt"``, every tensor on the CPU.

    The strategy's ``load_state_dict`` puts each part where the run computes: the weights and
    the optimiser state follow the model's parameters (torch keeps Adam's step counts on the
    host), and the parts that hold tensors of their own move them to the run's device (EWC's
    Fisher and anchor, pending episode batches; a torch-searched memory rebuilds its index
    there).

    The file is read as data only (`lifelong.serialization.load_data`): tensors, NumPy
    arrays, plain containers and the strategy's plain records. A checkpoint written before
    this rule holds nothing else, and loads.

    Raises:
        CheckpointError: The file is missing, unreadable, of another format version, or asks
            to run code (refused before anything of it runs; the message says how to go on).

    """
    path = Path(run_dir) / CHECKPOINT_NAME
    if not path.is_file():
        raise CheckpointError(f"{path}: no checkpoint")
    restart = (
        f"if your own run wrote it, delete it and `lifelong run --resume {run_dir}` starts the "
        "run again from its first task"
    )
    try:
        payload = load_data(path, what="checkpoint")
    except UnsafeFileError as err:
        raise CheckpointError(f"{err}; {restart}") from None
    except (UnreadableFileError, OSError) as err:  # a truncated or foreign file: say which
        raise CheckpointError(f"{err}; {restart}") from None
    if not isinstance(payload, dict) or payload.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: expected a lifelong checkpoint of format version {FORMAT_VERSION}"
        )
    try:
        return Checkpoint(
            StreamPosition.from_dict(payload["position"]),
            payload["strategy"],
            payload["rng"],
            payload.get("trained_as"),
            payload.get("stream"),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(
            f"{path}: not a whole lifelong checkpoint ({err}); {restart}"
        ) from None


def remove_stale_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete temporary files a killed atomic write left in ``run_dir``; return them."""
    stale = sorted(Path(run_dir).glob(".*.tmp"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


class Checkpointer:
    """Decides when to checkpoint and writes the file.

    Args:
        run_dir: Where ``checkpoint.pt`` goes.
        every: Also checkpoint after every ``every`` training mini-batches (0 = only at task
            boundaries, after each task's evaluation, and once after the untrained evaluation).
        seconds_before: Seconds the run spent in earlier processes (a resumed checkpoint's
            ``position.seconds``); the clock of this one starts now.
        cpu_seconds_before: The same in CPU seconds (``position.cpu_seconds``; None:
            unknown, and so is the run's total).
        trained_as: What every checkpoint records the run was trained as (`save_checkpoint`).
        stream: The stream's digest every checkpoint records.

    """

    def __init__(
        self,
        run_dir: str | Path,
        every: int = 0,
        *,
        seconds_before: float = 0.0,
        cpu_seconds_before: float | None = 0.0,
        trained_as: Mapping[str, Any] | None = None,
        stream: Mapping[str, Any] | None = None,
    ) -> None:
        if every < 0:
            raise ValueError(f"checkpoint interval must be >= 0 mini-batches, got {every}")
        self.run_dir = Path(run_dir)
        self.every = every
        self.saved = 0
        self.seconds_before = seconds_before
        self.started = time.perf_counter()
        self.cpu_seconds_before = cpu_seconds_before
        self.cpu_started = time.process_time()
        self.trained_as = trained_as
        self.stream = stream

    def elapsed(self) -> float:
        """The run's seconds so far: earlier processes' (``seconds_before``) and this one's."""
        return self.seconds_before + time.perf_counter() - self.started

    def cpu_elapsed(self) -> float | None:
        """The run's CPU seconds so far (every thread of each process), or None if unknown.

        Unlike `elapsed`, this does not grow while the run waits for a shared core, so it
        compares runs that shared the machine with runs that had it alone.
        """
        if self.cpu_seconds_before is None:
            return None
        return self.cpu_seconds_before + time.process_time() - self.cpu_started

    def due(self, steps_done: int) -> bool:
        """Whether a mid-task checkpoint is due after ``steps_done`` mini-batches of a task."""
        return self.every > 0 and steps_done % self.every == 0

    def save(self, strategy: Strategy, position: StreamPosition) -> None:
        """Write the checkpoint now (stamped with the run's seconds so far)."""
        position.seconds = self.elapsed()
        position.cpu_seconds = self.cpu_elapsed()
        save_checkpoint(
            self.run_dir, strategy, position, trained_as=self.trained_as, stream=self.stream
        )
        self.saved += 1
