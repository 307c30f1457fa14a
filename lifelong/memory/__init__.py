"""Episodic memory: the key-value store of whole examples, write policies, the key network."""

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
from lifelong.memory.records import ExampleRecords

__all__ = [
    "DiversityWrite",
    "EpisodicMemory",
    "ExampleRecords",
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
