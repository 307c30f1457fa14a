"""Lazy package attributes (PEP 562): a name is imported from its module on first use.

The packages whose names pull in torch (`lifelong.encoders`, `lifelong.lm`) list each public
name with the module that defines it, so that importing the package stays light
(`tests/test_layers.py`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``table``'s names (name -> defining module).

    Raises (from the returned function):
        AttributeError: A name ``table`` does not list.

    """

    def attribute(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return attribute
