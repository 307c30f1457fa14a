"""The stream families by name: each owns its spec (keys, checks, builder) in its module.

    spec = stream_spec("fewrel", cluster_order=2)
    stream = build_stream(spec, seed=0, embed=embedder)

``text`` (`text_classification.TextSpec`: the five text-classification datasets), ``qa``
(`qa.QASpec`: SQuAD, TriviaQA Web/Wikipedia, QuAC) and ``fewrel`` (`fewrel.FewRelSpec`: lifelong
FewRel). This module only maps names to specs; the families never import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from lifelong.streams.core import Embedder, StreamSpec, TaskStream, UnknownNameError
from lifelong.streams.fewrel import FewRelSpec
from lifelong.streams.qa import QASpec
from lifelong.streams.text_classification import TextSpec

STREAMS: dict[str, type[StreamSpec]] = {spec.name: spec for spec in (TextSpec, QASpec, FewRelSpec)}
"""Stream name -> its spec class."""


def spec_class(name: str) -> type[StreamSpec]:
    """The spec class of the stream ``name``.

    Raises:
        UnknownNameError: An unknown stream (listing the known ones).

    """
    if name not in STREAMS:
        raise UnknownNameError(f"unknown stream {name!r}; expected one of {', '.join(STREAMS)}")
    return STREAMS[name]


def spec_keys(name: str) -> tuple[str, ...]:
    """The config keys the stream ``name`` reads (its spec's fields)."""
    return tuple(f.name for f in dataclasses.fields(spec_class(name)))  # type: ignore[arg-type]


def stream_keys() -> dict[str, tuple[str, ...]]:
    """Every key some stream reads -> the streams that read it."""
    keys: dict[str, tuple[str, ...]] = {}
    for name in STREAMS:
        for key in spec_keys(name):
            keys[key] = (*keys.get(key, ()), name)
    return keys


def stream_spec(name: str, **values: Any) -> StreamSpec:
    """The stream ``name``'s spec from its keys (``values``: only keys it reads).

    Raises:
        UnknownNameError: An unknown stream.
        TypeError: A key the stream does not read.

    """
    return spec_class(name)(**values)


def build_stream(spec: StreamSpec, *, seed: int = 0, embed: Embedder | None = None) -> TaskStream:
    """Check ``spec`` and build its stream.

    Args:
        spec: A family's spec (`stream_spec`).
        seed: The run's seed (QA's and FewRel's sampling).
        embed: FewRel: embeds relation names when ``glove`` is not given.

    Raises:
        UnknownNameError: An unknown dataset or order.
        DataFormatError: A file is missing or malformed (named, with the line or question).
        ValueError: A size larger than what a file holds (named).

    """
    spec.check()
    return spec.build(seed, embed)


def spec_from_mapping(values: Mapping[str, Any]) -> StreamSpec:
    """The spec a saved config mapping describes (its ``stream`` and that stream's keys).

    Keys of other streams are ignored (a run directory's config holds every key).
    """
    name = str(values.get("stream", "text"))
    own = set(spec_keys(name))
    return stream_spec(name, **{k: v for k, v in values.items() if k in own})
