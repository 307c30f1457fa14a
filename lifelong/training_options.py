"""The ``training:`` section of a run config: optimisation, seed, device, checkpoints.

A light module (standard library and `lifelong.options` only), so a config is checked before
torch loads; `lifelong.training` builds the trainer from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lifelong.options import NonNegativeInt, PositiveFloat, PositiveInt, Seed


@dataclass(frozen=True)
class TrainingOptions:
    """A run's ``training:`` section: optimisation, seed, where it computes, checkpoints.

    Defaults are de Masson d'Autume et al.'s (2019, §4: batch 32, Adam at 3e-5).

    Attributes:
        lr: Learning rate of the main optimiser.
        batch_size: Training mini-batch size in examples.
        eval_batch_size: Evaluation batch size in examples; ``"auto"``: 64 on the CPU, 512 on a
            GPU (batches are length-sorted, and prediction keeps no graph).
        seed: Seeds shuffles, initialisation, memory, QA/FewRel sampling (the
            text-classification sample is fixed: seed 42, Holla et al., 2020).
        device: ``"auto"`` (CUDA device 0 when one is visible, else the CPU), ``"cpu"``,
            ``"cuda"`` or ``"cuda:N"`` (`lifelong.runtime`); a checkpoint resumes on any device.
        precision: ``"auto"``: bf16 autocast on a bf16-capable CUDA device, else fp32;
            ``"fp16"``: autocast with loss scaling, for GPUs without bf16.
        compile: Wrap the encoder in ``torch.compile`` (weights and checkpoints unchanged).
        memory_index: Episodic memory's nearest-neighbour search (`lifelong.memory.search`).
        token_cache: Where token ids are cached across runs (`lifelong.tasks.cache`).
        checkpoint_every: Also checkpoint every N mini-batches (0: at task ends only).
        keep_checkpoint: Keep ``checkpoint.pt`` once the run has finished.
        progress: Show tqdm progress bars.
        probe: After each task (and before the first), fit a linear probe on the encoder's
            features of every seen task and score it (`lifelong.probing`, Tao et al., ICLR
            2023): ``probing.csv`` beside ``accuracy.csv``, and representation forgetting in
            ``metrics.json``. Classification streams only; not counted in the run's cost.

    """

    lr: PositiveFloat = 3e-5
    batch_size: PositiveInt = 32
    eval_batch_size: PositiveInt | Literal["auto"] = "auto"
    seed: Seed = 0
    device: str = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    compile: bool = False
    memory_index: str = "auto"
    token_cache: str = "auto"
    checkpoint_every: NonNegativeInt = 0
    keep_checkpoint: bool = False
    progress: bool = True
    probe: bool = False

    def check(self) -> None:
        """The device name and the memory's index spec, without touching either.

        Raises:
            ValueError: Naming the key and what it allows.

        """
        from lifelong.memory.search import check_index
        from lifelong.runtime import DeviceError, check_device_name

        try:
            check_device_name(self.device)
        except DeviceError as err:
            raise ValueError(f"key 'device': {err}") from None
        try:
            check_index(self.memory_index)
        except ValueError as err:
            raise ValueError(f"key 'memory_index': {err}") from None
