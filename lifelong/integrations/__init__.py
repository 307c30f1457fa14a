"""Bridges to other continual-learning libraries, each behind its own optional extra.

* `lifelong.integrations.avalanche` — any classification stream as an Avalanche benchmark, and
  Avalanche's strategies as ``lifelong run --strategy avalanche:NAME`` (extra ``avalanche``,
  its own environment: ``make setup-avalanche``).

Nothing here is imported by ``import lifelong``: the registry imports an integration only when
a strategy name asks for it.
"""
