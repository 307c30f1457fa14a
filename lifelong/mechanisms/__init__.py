"""What strategies are built from, each a module a reader can check on its own.

* `replay`: episodic writes and sparse experience replay (de Masson d'Autume et al., 2019,
  §3.2 and §4.2): `SparseReplay`, `ReplaySchedule`, `episodic_writer`.
* `episodes`: the meta-learning episodes of OML-ER, ANML-ER and MAML-ER (Holla et al., 2020).
* `inner_loop`: `local_adapt`, the L gradient steps every adapting strategy takes.
* `scopes`: which weights an adaptation changes (``all``, ``top<N>``, ``head``, ``lora``).
* `adaptation`: MbPA++'s test-time local adaptation (`LocalAdapter`), along one of three paths:
  `reference` (the paper's procedure, one test input at a time), `fast` (many at once over
  cached prefixes, `neighbours`) and `lowrank` (a rank-r delta per test input).
"""
