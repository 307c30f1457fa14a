"""Episodic memory: the store of whole examples, write policies, key network and writer."""

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
from lifelong.memory.writer import EpisodicWriter

__all__ = [
    "DiversityWrite",
    "EpisodicMemory",
    "EpisodicWriter",
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
