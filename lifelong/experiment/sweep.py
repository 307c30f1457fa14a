"""Sweeps: grids of runs (strategies × orders × seeds) on a local process pool or on Ray.

A sweep skips finished runs and resumes interrupted ones.

A sweep file is YAML with these keys (an unknown key is an error naming it):

``name``
    The sweep's folder under the run config's ``output_dir``.
``run``
    A run config by section (`lifelong.experiment.config.RunConfig`) shared by every grid point.
``strategies`` / ``orders`` / ``seeds``
    The grid (command-line flags of ``lifelong sweep`` replace them, as ``--data-dir`` and
    ``--output-dir`` replace the run's keys). ``orders`` are the paper
    task orders (``i``..``iv``) on the text and QA streams, and cluster orders (``0``, ``1``,
    ...: the seeds of the shuffled cluster order, ``cluster_order``) on FewRel.
``per_strategy``
    Run-config changes for one strategy only, by section, e.g.
    ``{anml-er: {task: {max_length: 300}}}``.

Every grid point has a fixed run directory, ``<output_dir>/<name>/<strategy>_<order>_s<seed>``,
so running the same sweep again skips the points whose results are there, resumes the points
that left a checkpoint (with the sweep file's checkpoint interval and ``keep_checkpoint``,
which may have changed since: `lifelong.experiment.runs.RESUME_BOOKKEEPING`; every other key
comes from the point's stored ``config.yaml``), and starts the others. A point's directory
is held by the process running it (`lifelong.experiment.lock`): a second sweep started on the
same grid meanwhile reports that point ``busy`` and goes on with the others, so no point is run
twice at once.
All runs of a sweep share one run index, ``<output_dir>/<name>/index.sqlite`` unless
``run.tracking.run_index`` names another.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lifelong import registry
from lifelong.experiment.checkpoint import CHECKPOINT_NAME
from lifelong.experiment.config import (
    ConfigError,
    RunConfig,
    check_sources,
    from_dict,
    moved_keys_note,
    read_yaml,
    strategy_options,
)
from lifelong.experiment.index import RunIndex, default_index_path
from lifelong.experiment.lock import RunLockedError, hold
from lifelong.experiment.rundir import is_finished, path_part
from lifelong.experiment.trust import LOCATION_FLAGS

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

SWEEP_KEYS = ("name", "run", "strategies", "orders", "seeds", "per_strategy")
BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Sweep:
    """A grid of runs.

    Attributes:
        name: The sweep's folder under ``base.tracking.output_dir``.
        base: The run config every grid point starts from.
        strategies: Strategy names (registered).
        orders: Paper task orders.
        seeds: Seeds.
        per_strategy: Run-config changes for single strategies.

    """

    name: str
    base: RunConfig
    strategies: tuple[str, ...]
    orders: tuple[str, ...]
    seeds: tuple[int, ...]
    per_strategy: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        """Where the sweep's run directories go."""
        return Path(self.base.tracking.output_dir) / self.name

    def points(self) -> list[SweepPoint]:
        """Every grid point with its config and run directory, strategies outermost."""
        out = []
        for strategy in self.strategies:
            for order in self.orders:
                for seed in self.seeds:
                    changes = {"strategy": strategy, self.base.order_key: order, "seed": seed}
                    changes["log_group"] = (
                        self.base.tracking.log_group or self.name
                    )  # trackers group
                    config = self.base.replace(**changes)
                    config = config.merge(self.per_strategy.get(strategy, {}), "per_strategy")
                    run_dir = self.root / f"{path_part(strategy)}_{order}_s{seed}"
                    out.append(SweepPoint(config, run_dir))
        return out

    def point_config(
        self, strategy: str | None = None, order: str | None = None, seed: int | None = None
    ) -> RunConfig:
        """One grid point's run config, as `points` builds it (default: the first of each axis).

        ``lifelong run --config SWEEP.yaml`` runs this: the sweep's run block with the chosen
        strategy's ``per_strategy`` changes, so one cell of a published table is one command.
        Any strategy, order or seed may be chosen, on the grid or not.
        """
        strategy = strategy or self.strategies[0]
        order = self.orders[0] if order is None else order
        seed = self.seeds[0] if seed is None else seed
        changes = {"strategy": strategy, self.base.order_key: order, "seed": seed}
        config = self.base.replace(f"{self.name}: run", **changes)
        return config.merge(self.per_strategy.get(strategy, {}), "per_strategy")

    def with_grid(
        self,
        strategies: Sequence[str] | None = None,
        orders: Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
    ) -> Sweep:
        """A copy with the given grid axes replaced (command-line flags)."""
        return validate(
            Sweep(
                self.name,
                self.base,
                tuple(strategies) if strategies else self.strategies,
                tuple(orders) if orders else self.orders,
                tuple(seeds) if seeds is not None and len(seeds) else self.seeds,
                self.per_strategy,
            ),
            where="command line",
        )

    def with_run(self, **changes: Any) -> Sweep:
        """A copy whose shared run config has the given keys replaced (command-line flags).

        ``per_strategy`` changes still apply on top, so a strategy that sets its own key there
        keeps it.

        Raises:
            ConfigError: A change the run config refuses (naming the key); a ``data_dir``
                that is not a directory.

        """
        try:
            base = self.base.replace(**changes)
        except ConfigError as err:
            raise ConfigError(f"command line: {err}") from None
        if "data_dir" in changes:
            try:  # the directory and the hub, not the tracker
                check_sources(base.stream)
            except ConfigError as err:
                raise ConfigError(f"command line: {err}") from None
        return validate(dataclasses.replace(self, base=base), where="command line")


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: its config and its fixed run directory."""

    config: RunConfig
    run_dir: Path


@dataclass(frozen=True)
class PointResult:
    """What happened to one grid point: ``finished``, ``skipped``, ``busy`` or ``failed``."""

    run_dir: Path
    status: str
    metrics: dict[str, Any] | None = None
    error: str | None = None


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file (errors name the file and the key)."""
    return sweep_from_dict(read_yaml(path, "sweep") or {}, where=str(path))


def sweep_from_dict(values: Mapping[str, Any], *, where: str = "sweep") -> Sweep:
    """Build and validate a `Sweep` from a mapping (see the module docstring for the keys)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(SWEEP_KEYS)}")
    unknown = sorted(set(values) - set(SWEEP_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(SWEEP_KEYS)}"
        )
    missing = [k for k in ("name", "strategies") if not values.get(k)]
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")
    per = values.get("per_strategy") or {}
    parts = [("run", values.get("run")), *(per.items() if isinstance(per, Mapping) else ())]
    for part, given in parts:  # the old flat dialect still loads, said once per mapping
        note = moved_keys_note(
            given, f"{where}: {part if part == 'run' else 'per_strategy: ' + str(part)}"
        )
        if note:
            log.warning(note)
    base = from_dict(values.get("run") or {}, where=f"{where}: run")
    per_strategy = values.get("per_strategy") or {}
    if not isinstance(per_strategy, Mapping) or not all(
        isinstance(v, Mapping) for v in per_strategy.values()
    ):
        raise ConfigError(f"{where}: per_strategy must map strategy names to run-config changes")
    sweep = Sweep(
        name=str(values["name"]),
        base=base,
        strategies=_names(values["strategies"], "strategies", where),
        orders=tuple(
            str(o)
            for o in _names(
                values.get("orders") or [getattr(base.stream, base.order_key)], "orders", where
            )
        ),
        seeds=tuple(
            _seed(s, f"{where}: seeds")
            for s in _names(values.get("seeds") or [base.training.seed], "seeds", where)
        ),
        per_strategy={str(k): dict(v) for k, v in per_strategy.items()},
    )
    return validate(sweep, where=where)


def validate(sweep: Sweep, *, where: str = "sweep") -> Sweep:
    """Check names, orders, seeds, per-strategy changes and every point's strategy options.

    Raises:
        ConfigError: Naming the key and the value; a grid value listed twice (it would be
            one run directory, counted twice).

    """
    if not sweep.name or "/" in sweep.name or sweep.name.startswith("."):
        raise ConfigError(f"{where}: name must be a plain folder name, got {sweep.name!r}")
    for key, values in (
        ("strategies", sweep.strategies),
        ("orders", sweep.orders),
        ("seeds", sweep.seeds),
    ):
        twice = sorted({str(v) for v in values if list(values).count(v) > 1})
        if twice:
            raise ConfigError(
                f"{where}: {key}: {twice[0]} is listed twice; each grid point is one run"
            )
    for seed in sweep.seeds:
        try:
            sweep.base.replace(seed=seed)
        except ConfigError as err:
            raise ConfigError(f"{where}: seeds: {err}") from None
    for strategy in sweep.strategies:
        try:
            registry.get(strategy)
        except registry.UnknownStrategyError as err:
            raise ConfigError(f"{where}: strategies: {err}") from None
    stray = sorted(set(sweep.per_strategy) - set(registry.names()))
    if stray:
        raise ConfigError(f"{where}: per_strategy: {stray[0]!r} is not a registered strategy")
    tasks = getattr(sweep.base.stream, "tasks", None)
    if tasks and len(sweep.orders) > 1:
        raise ConfigError(
            f"{where}: orders {', '.join(sweep.orders)}: a task list is set "
            f"({', '.join(tasks)}), which every order would run alike; drop tasks or give one order"
        )
    for order in sweep.orders:
        try:
            sweep.base.replace(**{sweep.base.order_key: order})
        except ConfigError as err:
            raise ConfigError(f"{where}: orders: {err}") from None
    for strategy, changes in sweep.per_strategy.items():
        try:
            sweep.base.merge(changes)
        except ConfigError as err:
            raise ConfigError(f"{where}: per_strategy {strategy!r}: {err}") from None
    for strategy in sweep.strategies:
        strategy_options(sweep.base.replace(strategy=strategy).strategy)
    return sweep


def grid(
    config: RunConfig,
    *,
    strategies: Sequence[str],
    orders: Sequence[str | int] | None = None,
    seeds: Sequence[int] = (0,),
    name: str = "grid",
    jobs: int = 1,
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Run strategies × orders × seeds from Python and return the report's table.

    The notebook form of ``lifelong sweep`` then ``lifelong report``: every point is a run
    under ``<output_dir>/<name>/`` (a finished point is not run again), and the table is
    `lifelong.experiment.reports.report_table` over them::

        import lifelong
        table = lifelong.grid(lifelong.RunConfig.demo(encoder="tiny", train_size=32),
                              strategies=["seq", "replay"], orders=["i", "ii"], seeds=[0, 1])

    Args:
        config: The run config every point starts from (`RunConfig.demo` for the demo's).
        strategies: Registered strategy names.
        orders: The stream's orders (FewRel: cluster orders); default: the config's.
        seeds: Seeds.
        name: The sweep's folder under ``config.tracking.output_dir``.
        jobs: Runs in parallel (local processes).
        metrics: The table's rows (default: the report's: average accuracy, BWT, FWT,
            forgetting; FewRel's pooled accuracy first).

    Returns:
        Index (stream, strategy, metric); columns (order, stat) with stat mean, std, n.

    Raises:
        ConfigError: A strategy, order or option is not allowed (before anything runs).
        RuntimeError: A point failed (its run directory's ``log.txt`` says why).

    """
    from lifelong.experiment.reports.tables import DEFAULT_METRICS, report_table

    own = orders if orders is not None else [getattr(config.stream, config.order_key)]
    sweep = validate(
        Sweep(name, config, tuple(strategies), tuple(str(o) for o in own), tuple(seeds)),
        where="grid",
    )
    results = run_sweep(sweep, jobs=jobs)
    failed = [r for r in results if r.error]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(results)} runs failed: {failed[0].error}")
    return report_table(sweep.root, metrics=tuple(metrics or DEFAULT_METRICS))


def run_sweep(
    sweep: Sweep,
    *,
    backend: str = "local",
    jobs: int = 1,
    address: str | None = None,
    on_result: Callable[[PointResult], None] | None = None,
    gpus_per_run: float | None = None,
) -> list[PointResult]:
    """Run every grid point that has not finished yet.

    Args:
        sweep: The grid.
        backend: ``local`` (a process pool of ``jobs`` workers; 1 = in this process) or
            ``ray`` (one Ray task per point; a local Ray instance is started unless
            ``address`` names a running cluster).
        jobs: Concurrent runs for the local backend.
        address: Ray cluster address (``ray`` backend only).
        on_result: Called with each point's result as it completes.
        gpus_per_run: GPUs each point runs on (fractions let several small runs share one
            GPU). Ray: what each task requests (Ray then sets the task's visible devices);
            ``None``: 1 when the runs may use CUDA (``device`` is not ``cpu``) and the cluster
            has GPUs, else 0. Local pool: what each worker is given (`worker_devices`; each
            worker sees only its own GPUs, so the runs' ``auto``/``cuda`` is that GPU).

    Returns:
        One result per grid point, in grid order.

    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    if address is not None and backend != "ray":
        raise ConfigError(f"--address is for --backend ray (this sweep's backend: {backend})")
    if backend == "ray":
        check_ray_address(address)  # before any point runs: in seconds, not Ray's minutes
    if gpus_per_run is not None and not 0 <= gpus_per_run < math.inf:
        raise ConfigError(f"--gpus-per-run must be a finite number >= 0, got {gpus_per_run}")
    points = _with_shared_index(sweep)
    todo = [p for p in points if not _finished(p.run_dir)]
    if todo:  # create the shared index (and switch it to WAL) once, before any worker opens it
        RunIndex(todo[0].config.tracking.run_index)
    results = {p.run_dir: PointResult(p.run_dir, "skipped") for p in points if p not in todo}
    for result in results.values():
        _notify(on_result, result)
    log.info("sweep %s: %d runs, %d to do", sweep.name, len(points), len(todo))
    threads = 1 if backend == "ray" else _threads(jobs)  # a Ray task holds one CPU
    # the config keeps its device (auto, cuda): each worker's visible GPUs make it concrete,
    # and a resumed point resolves it afresh wherever it runs
    payloads = [(p.config.to_dict(), str(p.run_dir), threads) for p in todo]
    if backend == "ray":
        done = _run_on_ray(payloads, address, on_result, gpus_per_run, sweep.base.training.device)
    elif jobs == 1:
        done = [_notify(on_result, run_point(*payload)) for payload in payloads]
    else:
        uses_gpus = sweep.base.training.device != "cpu"
        devices = worker_devices(jobs, _visible_gpus() if uses_gpus else 0, gpus_per_run)
        done = _run_on_pool(payloads, jobs, on_result, devices)
    results.update({r.run_dir: r for r in done})
    return [results[p.run_dir] for p in points]


def run_point(config: Mapping[str, Any], run_dir: str, threads: int = 0) -> PointResult:
    """Run, resume or skip one grid point (the unit of work a worker executes).

    Args:
        config: The point's run config as a plain dict (picklable for worker processes).
        run_dir: Its fixed run directory.
        threads: torch threads for this worker (0 = leave torch's default).

    Returns:
        ``finished`` with the metrics, ``skipped`` if the results were already there,
        ``busy`` if another live process holds the point's directory (another sweep running
        the same grid: each point is run by one of them), or ``failed`` with the error (a
        failing point never stops the sweep).

    """
    import torch

    from lifelong.experiment.runs import RESUME_BOOKKEEPING, resume, run

    if threads:
        torch.set_num_threads(threads)
    path = Path(run_dir)
    if _finished(path):
        return PointResult(path, "skipped")
    try:
        with hold(path):  # another sweep (or run) on this point: busy, not run twice
            if _finished(path):  # it finished while we waited to look
                return PointResult(path, "skipped")
            if (path / "config.yaml").is_file() and (path / CHECKPOINT_NAME).is_file():
                # the sweep file's bookkeeping (a checkpoint interval set since) reaches it
                # too, and its places (index, outputs, token cache, MLflow), not the point's
                # config.yaml, say where the resumed run writes (`lifelong.experiment.trust`)
                given = (*RESUME_BOOKKEEPING, *LOCATION_FLAGS)
                outcome = resume(path, **{k: config[k] for k in given if config.get(k) is not None})
            else:
                outcome = run(from_dict(config, where=str(path)), run_dir=path)
    except RunLockedError as err:
        log.warning("sweep point %s is busy: %s", path, err)
        return PointResult(path, "busy", error=f"in use by process {err.holder}")
    except Exception as err:  # recorded in the index and reported; the sweep goes on
        log.error("sweep run %s failed: %s", path, err)
        return PointResult(path, "failed", error=f"{type(err).__name__}: {err}")
    return PointResult(path, "finished", metrics=dict(outcome.metrics))


def worker_devices(jobs: int, gpus: int, gpus_per_run: float | None = None) -> list[str | None]:
    """Each local worker's visible GPUs (``CUDA_VISIBLE_DEVICES``), one entry per worker.

    A worker runs one point at a time on the GPUs it was given, so concurrent runs never pile
    onto one GPU by accident. ``gpus_per_run`` G: G >= 1 gives each worker G GPUs of its own
    (``jobs * G`` must not exceed ``gpus``); 0 < G < 1 lets ``1 / G`` workers share a GPU
    (``jobs * G`` GPUs needed); 0 hides every GPU; ``None`` gives worker w GPU ``w mod gpus``
    (GPUs shared only when there are more workers than GPUs). With no GPU, every entry is
    ``None``: the environment is left as it is.

    Raises:
        ConfigError: More GPUs asked for than the host has, or a share that is not 1/n.

    """
    if gpus < 1 and not gpus_per_run:
        return [None] * jobs
    if gpus_per_run == 0:
        return [""] * jobs  # no GPU visible: the runs' auto device is the CPU
    if gpus_per_run is None:
        return [str(w % gpus) for w in range(jobs)]
    need = jobs * gpus_per_run
    if need > gpus + 1e-9:
        raise ConfigError(
            f"--jobs {jobs} x --gpus-per-run {gpus_per_run:g} needs {math.ceil(need)} GPU(s); "
            f"this host has {gpus}"
        )
    if gpus_per_run >= 1:
        per = int(gpus_per_run)
        if per != gpus_per_run:
            raise ConfigError(f"--gpus-per-run {gpus_per_run:g}: a whole number of GPUs, or 1/n")
        return [",".join(str(w * per + g) for g in range(per)) for w in range(jobs)]
    share = round(1 / gpus_per_run)
    if abs(share * gpus_per_run - 1) > 1e-6:
        raise ConfigError(f"--gpus-per-run {gpus_per_run:g}: a GPU splits into 1/n shares")
    return [str(w // share) for w in range(jobs)]


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _with_shared_index(sweep: Sweep) -> list[SweepPoint]:
    index = Path(sweep.base.tracking.run_index or default_index_path(sweep.root)).resolve()
    out = []
    for point in sweep.points():
        config = point.config.replace(run_index=str(index), progress=False)
        out.append(SweepPoint(config, point.run_dir.resolve()))
    return out


def _run_on_pool(
    payloads: list[tuple[dict[str, Any], str, int]],
    jobs: int,
    on_result: Callable[[PointResult], None] | None,
    devices: Sequence[str | None] = (),
    work: Callable[..., PointResult] = run_point,
) -> list[PointResult]:
    # never more workers than points: a worker with nothing to do only holds memory, and a
    # slot no worker takes would keep this process from exiting (the queue's feeder thread)
    workers = min(jobs, len(payloads))
    if workers == 0:
        return []
    # spawn, not fork: torch and FAISS hold threads and locks a forked child must not inherit
    context = multiprocessing.get_context("spawn")
    slots = context.Queue()
    for device in list(devices or [None] * jobs)[:workers]:  # one set of GPUs per worker
        slots.put(device)
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_start_worker,
        initargs=(slots, os.getpid()),
    ) as pool:
        futures = [pool.submit(work, *payload) for payload in payloads]
        return [_notify(on_result, f.result()) for f in futures]


def _start_worker(slots: Any, parent: int) -> None:
    """Worker initializer: its GPUs (before CUDA starts), and death with the sweep's process."""
    device = slots.get()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends (``kill -9`` included).

    A sweep's workers are spawned processes: without this, killing the sweep leaves each one
    running (holding its model's memory) until its run ends. Linux ends the worker with
    SIGTERM at once (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread notices the
    parent gone within a second. The run it was training keeps its last checkpoint.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            if libc.prctl(1, signal.SIGTERM, 0, 0, 0) == 0:  # 1: PR_SET_PDEATHSIG
                if os.getppid() != parent:  # it died before the request took hold
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _run_on_ray(
    payloads: list[tuple[dict[str, Any], str, int]],
    address: str | None,
    on_result: Callable[[PointResult], None] | None,
    gpus_per_run: float | None = None,
    device: str = "auto",
) -> list[PointResult]:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray backend needs Ray: pip install 'lifelong[ray]' (or use --backend local)"
        ) from None
    started = not ray.is_initialized()
    if started:
        check_ray_address(address)
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        if gpus_per_run is None:  # a task without GPUs sees none (Ray hides them)
            has_gpus = ray.cluster_resources().get("GPU", 0) > 0
            gpus_per_run = 1.0 if device != "cpu" and has_gpus else 0.0
        log.info("ray: %g GPU(s) per run", gpus_per_run)
        remote = ray.remote(num_cpus=1, num_gpus=gpus_per_run)(run_point)
        pending = {remote.remote(*payload): payload[1] for payload in payloads}
        done = []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            pending.pop(ready[0])
            done.append(_notify(on_result, ray.get(ready[0])))
        return done
    finally:
        if started:
            ray.shutdown()


RAY_CONNECT_TIMEOUT = 5.0
"""Seconds a Ray cluster's address has to answer before the sweep is refused."""


def check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Refuse a Ray cluster address that does not answer, in seconds, not Ray's minutes.

    ``None``, ``auto`` and ``local`` are left to Ray (a local instance or the one it finds);
    ``host:port`` and ``ray://host:port`` must accept a TCP connection within ``timeout``.

    Raises:
        ConfigError: Naming the address and why it did not answer.

    """
    if address is None or address in ("auto", "local"):
        return
    where = address.removeprefix("ray://")
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"--address {address!r}: expected host:port or ray://host:port")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise ConfigError(
            f"--address {address}: no Ray cluster answers there ({err.strerror or err}); "
            "start one (ray start --head) or leave --address out for a local Ray"
        ) from None


def _finished(run_dir: Path) -> bool:
    return is_finished(run_dir) and not (run_dir / CHECKPOINT_NAME).exists()


def _notify(callback: Callable[[PointResult], None] | None, result: PointResult) -> PointResult:
    if callback is not None:
        callback(result)
    return result


def _threads(jobs: int) -> int:
    return max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else 0


def _names(value: Any, key: str, where: str) -> tuple[Any, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        raise ConfigError(f"{where}: {key} must be a non-empty list, got {value!r}")
    return tuple(value)


def _seed(value: Any, where: str) -> int:
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ConfigError(f"{where}: expected integer seeds, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: expected integer seeds, got {value!r}") from None


def parse_seeds(value: str, where: str = "--seeds") -> list[int]:
    """Comma-separated seeds (a command-line flag), each an integer.

    Raises:
        ConfigError: Naming ``where`` and the value that is not an integer.

    """
    return [_seed(s.strip(), where) for s in value.split(",") if s.strip()]
