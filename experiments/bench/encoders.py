"""Time and memory of the memory modules against sequence length, next to full attention.

Every module reads a causal sequence of ``L`` tokens in segments of ``--segment`` tokens, carrying
its memory; ``full-attention`` is the memory-less Transformer given the whole sequence as one
segment. For each module and length, side by side in one run (timings on shared machines are
noisy, so the *ratios* to the shortest length are the result):

* ``fwd ms``: the forward pass over the whole sequence (no graph), best of ``--repeats``;
  ``x fwd``: its ratio to the shortest length. Segment recurrence is linear in ``L`` (the ratio
  follows ``L / L0``); full attention tends to quadratic (``(L / L0)^2``) once the ``L^2``
  attention dominates.
* ``ms/seg``, ``x seg``: the same time per ``--segment`` tokens (``fwd ms / (L / segment)``) and
  its ratio: flat for segment recurrence, growing with ``L`` for full attention.
* ``train ms``: forward + backward of the *last* segment with a graph, after the earlier ones
  ran without one (the sorting setup; for full attention: the whole sequence).
* ``saved MiB``: peak bytes of the tensors autograd saved for that backward pass (activations;
  parameters excluded), via `lifelong.encoders.profiling.SavedTensorMeter` when present, else an
  equivalent ``saved_tensors_hooks`` counter in this file. On CPU the allocator is invisible to
  ``tracemalloc``, so this is the measurable part of training memory.
* ``state KiB``: bytes of the memory carried after the last segment (tensors found in it).

    python experiments/bench/encoders.py [--lengths 256 512 1024 2048] [--segment 128]
        [--modules transformer-xl memformer ...] [--repeats 3] [--batch-size 2] [--d-model 64]
        [--device cpu]

On CUDA every timing waits for the device (``torch.cuda.synchronize``) before its clock stops,
and ``saved MiB`` counts the same autograd-saved tensors, now in GPU memory.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import MEMORY_MODULES, build_memory_module
from lifelong.encoders.segments import SegmentEncoder, Transformer
from lifelong.runtime import resolve_device

FULL_ATTENTION = "full-attention"
KNOWN = [FULL_ATTENTION, *MEMORY_MODULES]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modules", nargs="+", default=KNOWN, choices=KNOWN)
    parser.add_argument("--lengths", nargs="+", type=int, default=[256, 512, 1024, 2048])
    parser.add_argument("--segment", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-train", action="store_true", help="skip forward + backward")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: leave as is)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = parser.parse_args(argv)
    args.device = resolve_device(args.device)  # a bad or missing device fails before any work
    if any(n < 1 for n in args.lengths) or args.segment < 1 or args.repeats < 1:
        parser.error("--lengths, --segment and --repeats must be positive")
    args.lengths = sorted(args.lengths)
    return args


def saved_bytes_meter(exclude: Iterable[torch.Tensor]) -> Any:
    """The project's saved-tensor meter when it exists, else the fallback below."""
    try:
        from lifelong.encoders.profiling import SavedTensorMeter
    except ImportError:
        return _SavedBytes(exclude)
    return SavedTensorMeter(exclude=exclude)


class _SavedBytes:
    """Fallback: live and peak bytes of distinct storages saved by autograd (not parameters)."""

    def __init__(self, exclude: Iterable[torch.Tensor]) -> None:
        self.excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self.live: dict[int, list[int]] = {}  # storage -> [bytes, references]
        self.current = self.peak = 0

    def __enter__(self) -> _SavedBytes:
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hooks.__exit__(*exc)

    def pack(self, tensor: torch.Tensor) -> Any:
        key = tensor.untyped_storage().data_ptr()
        if key in self.excluded:
            return tensor
        entry = self.live.setdefault(key, [tensor.untyped_storage().nbytes(), 0])
        if entry[1] == 0:
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        return _Handle(tensor.detach(), lambda: self.release(key))

    @staticmethod
    def unpack(handle: Any) -> torch.Tensor:
        return handle.tensor if isinstance(handle, _Handle) else handle

    def release(self, key: int) -> None:
        entry = self.live[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= self.live.pop(key)[0]


class _Handle:
    def __init__(self, tensor: torch.Tensor, on_free: Callable[[], None]) -> None:
        self.tensor, self.on_free = tensor, on_free

    def __del__(self) -> None:
        self.on_free()


def build(name: str, args: argparse.Namespace) -> tuple[SegmentEncoder, int]:
    """The module and the segment length it reads (the whole sequence for full attention)."""
    full = name == FULL_ATTENTION
    segment = max(args.lengths) if full else args.segment
    config = ModuleConfig(
        vocab_size=args.vocab,
        d_model=args.d_model,
        heads=args.heads,
        layers=args.layers,
        ffn=2 * args.d_model,
        max_positions=segment,
        causal=True,
    )
    torch.manual_seed(args.seed)
    module = Transformer(config) if full else build_memory_module(name, config, args.segment)
    return module.to(args.device).eval(), segment


def run_segments(module: SegmentEncoder, ids: torch.Tensor, segment: int, grad_last: bool) -> Any:
    """Read ``ids`` (b, L) segment by segment; the last one with a graph if ``grad_last``."""
    mask = torch.ones_like(ids)
    starts = list(range(0, ids.shape[1], segment))
    memory, out = None, None
    for i, start in enumerate(starts):
        with torch.set_grad_enabled(grad_last and i == len(starts) - 1):
            chunk = slice(start, start + segment)
            out = module(ids[:, chunk], mask[:, chunk], memory=memory)
            memory = out.memory
        module.auxiliary_loss()  # reset any accumulated regulariser
    return out


def best_time(fn: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """The shortest of ``repeats`` calls of ``fn``, each timed until ``device`` has finished."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def tensor_bytes(value: Any) -> int:
    """Bytes of every tensor found in a (nest of) lists, tuples, dicts or objects' attributes."""
    seen: set[int] = set()

    def visit(v: Any, depth: int) -> int:
        if depth > 6 or id(v) in seen:
            return 0
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            return v.numel() * v.element_size()
        if isinstance(v, dict):
            return sum(visit(x, depth + 1) for x in v.values())
        if isinstance(v, (list, tuple)):
            return sum(visit(x, depth + 1) for x in v)
        if hasattr(v, "__dict__") and not isinstance(v, type):
            return sum(visit(x, depth + 1) for x in vars(v).values())
        return 0

    return visit(value, 0)


def measure(name: str, args: argparse.Namespace) -> list[dict[str, float]]:
    module, segment = build(name, args)
    rows = []
    for length in args.lengths:
        ids = torch.randint(0, args.vocab, (args.batch_size, length), device=args.device)
        step = length if name == FULL_ATTENTION else segment
        rows.append(measure_length(module, ids, step, args))
    return rows


def measure_length(
    module: SegmentEncoder, ids: torch.Tensor, step: int, args: argparse.Namespace
) -> dict[str, float]:
    """Timings and memory of one module on one batch of ids (b, L) read ``step`` at a time."""
    length = ids.shape[1]
    with torch.no_grad():
        run_segments(module, ids, step, grad_last=False)  # warm-up
        fwd = best_time(lambda: run_segments(module, ids, step, False), args.repeats, args.device)
        state = tensor_bytes(run_segments(module, ids, step, False).memory)
    row = {"length": length, "fwd": fwd, "seg": fwd / (length / args.segment), "state": state}
    if not args.no_train:

        def train() -> None:
            out = run_segments(module, ids, step, grad_last=True)
            out.hidden.square().mean().backward()

        row["train"] = best_time(train, args.repeats, args.device)
        with saved_bytes_meter(module.parameters()) as meter:
            train()
        row["saved"] = meter.peak
    return row


def report(name: str, rows: list[dict[str, float]], args: argparse.Namespace) -> str:
    base = rows[0]
    lines = [
        f"\n{name}",
        "| L | fwd ms | x fwd | L/L0 | (L/L0)^2 | ms/seg | x seg | train ms | x train "
        "| saved MiB | state KiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        scale = row["length"] / base["length"]
        train = (
            f"{1e3 * row['train']:.1f} | {row['train'] / base['train']:.2f}"
            if "train" in row
            else "- | -"
        )
        saved = f"{row['saved'] / 2**20:.2f}" if "saved" in row else "-"
        lines.append(
            f"| {row['length']} | {1e3 * row['fwd']:.1f} | {row['fwd'] / base['fwd']:.2f} "
            f"| {scale:.0f} | {scale**2:.0f} | {1e3 * row['seg']:.2f} "
            f"| {row['seg'] / base['seg']:.2f} | {train} | {saved} | {row['state'] / 2**10:.1f} |"
        )
    return "\n".join(lines)


def summary(results: dict[str, list[dict[str, float]]], key: str, title: str) -> str:
    """One ratio (``fwd``, ``seg``, ``saved``) of every module side by side, rows = lengths."""
    names = list(results)
    lines = [
        f"\n{title}",
        "| L | L/L0 | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    lengths = [row["length"] for row in next(iter(results.values()))]
    for i, length in enumerate(lengths):
        ratios = [results[n][i][key] / results[n][0][key] for n in names]
        cells = " | ".join(f"{r:.2f}" for r in ratios)
        lines.append(f"| {length} | {length / lengths[0]:.0f} | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, list[dict[str, float]]]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"segment {args.segment}, batch {args.batch_size}, d {args.d_model}, {args.layers} layers, "
        f"best of {args.repeats}, {torch.get_num_threads()} thread(s), on {args.device}; "
        f"ratios are to L0 = {args.lengths[0]}"
    )
    results = {}
    for name in args.modules:
        try:
            rows = measure(name, args)
        except ImportError as error:
            print(f"\n{name}: skipped ({error})")
            continue
        results[name] = rows
        print(report(name, rows, args), flush=True)
    if results:
        print(summary(results, "fwd", "Forward time over the whole sequence / at L0"))
        print(summary(results, "seg", f"Forward time per {args.segment} tokens / at L0"))
        if not args.no_train:
            print(summary(results, "saved", "Peak saved-tensor bytes of the backward / at L0"))
    return results


if __name__ == "__main__":
    main()
