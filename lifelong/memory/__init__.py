"""Episodic memory: the key-value store, its write policies, and the frozen key network."""

from lifelong.memory.episodic import EpisodicMemory, MemoryFileError, MemoryItems
from lifelong.memory.keys import KeyEncoder
from lifelong.memory.policies import (
    DiversityWrite,
    RandomWrite,
    ReservoirWrite,
    WriteAll,
    WritePlan,
    WritePolicy,
    make_policy,
)

__all__ = [
    "DiversityWrite",
    "EpisodicMemory",
    "KeyEncoder",
    "MemoryFileError",
    "MemoryItems",
    "RandomWrite",
    "ReservoirWrite",
    "WriteAll",
    "WritePlan",
    "WritePolicy",
    "make_policy",
]
