"""Griffe extension: the repository's ``strategies/`` and ``streams/`` as ``lifelong.*``.

They install as ``lifelong.strategies`` and ``lifelong.streams`` (``pyproject.toml``'s
``package-dir``), a mapping griffe's static finder does not follow; this extension loads each
folder when ``lifelong`` is loaded and hangs it under ``lifelong`` by its installed name, so
that the API reference documents (and cross-references) the names users import. Only the docs
build uses this (``mkdocs.yml``).
"""

from __future__ import annotations

from typing import Any

import griffe

MAPPED = {"strategies": "strategies", "streams": "streams"}
"""Installed name under ``lifelong`` -> the repository folder (``pyproject.toml``)."""


class MappedPackages(griffe.Extension):
    """Attach each mapped folder's package to ``lifelong`` under its installed name."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Hang the mapped folders under ``lifelong`` once it is loaded."""
        if pkg.name != "lifelong":
            return
        for name, folder in MAPPED.items():
            module = loader.load(folder)
            module.name = name
            pkg.set_member(name, module)
