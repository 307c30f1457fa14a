"""The exact savings of an MbPA++ evaluation on the CPU, each against its anchor in one run.

An MbPA++ evaluation (head scope, the budget's) keys every test input with the frozen key
network, retrieves its K nearest memories and carries the test input and the neighbours to the
head. Three pieces of that work were computed in full where less gives the same numbers
(issue 67):

* **keys**: the key network's padded forward pass (every position, every layer) against
  `KeyEncoder`'s packed pass with the last layer computed at [CLS] alone;
* **head prefix**: the frozen stages below the head (`frozen_prefix`) with the full last layer
  against the last layer at [CLS] alone (``pooled_only``);
* **query keys over the evaluations**: keying the test inputs at each of the stream's
  evaluations (five on a five-task stream) against keying each batch once (`QueryKeys`).

Each pair is timed side by side in one process, alternating, on MiniLM over the same rows (the
real test rows of ``--data-dir``, else the bundled sample; ``--max-length`` 64 and batches of
64, the budget's), and printed as a ratio (anchor time / ours: above 1 is faster), with the
largest difference of the values and whether the head's predictions agree.

    python experiments/bench/evaluation.py [--data-dir ../shared/data/text_real] [--rows 640]
        [--rounds 5] [--evaluations 5] [--max-length 64] [--batch-size 64] [--encoder minilm]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.experiment.config import from_dict
from lifelong.experiment.runs import build_model
from lifelong.mechanisms.neighbours import frozen_prefix
from lifelong.memory.keys import KeyEncoder, QueryKeys
from lifelong.streams import text_classification_stream


def rows(data_dir: Path | None, count: int, max_length: int, batch_size: int, encoder: str):
    """A classifier and ``count`` test rows of the five datasets, in model batches."""
    stream = text_classification_stream("i", data_dir=data_dir, test_size=count // 5 + 1)
    config = from_dict(dict(encoder=encoder, max_length=max_length, seed=0))
    model, kind = build_model(config.encoder, config.task_settings(), stream, seed=0)
    examples = [e for task in stream for e in task.test][:count]
    batches = [kind(examples[s : s + batch_size]) for s in range(0, len(examples), batch_size)]
    return model.eval(), batches


def timed(functions: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds of each function over ``rounds``, the functions alternating each round."""
    seconds: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in seconds.items()}


def padded_keys(encoder: torch.nn.Module, batches: Sequence[Batch]) -> np.ndarray:
    """The key network as it ran before: the padded forward pass, [CLS]'s final state."""
    with torch.no_grad():
        out = [encoder(b.input_ids, b.attention_mask).hidden[:, 0] for b in batches]
    return torch.cat(out).numpy()


def full_prefix(model, stage: int, batch: Batch) -> torch.Tensor:
    """The head-stage prefix with the whole last layer (before ``pooled_only``)."""
    with torch.no_grad():
        x = model.encoder.run_stages(batch.input_ids, batch.attention_mask, 0, stage, packed=True)
    return x[:, :1]


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--rows", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--evaluations", type=int, default=5)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--encoder", default="minilm", help="minilm (the bench), tiny (tests)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    model, batches = rows(args.data_dir, args.rows, args.max_length, args.batch_size, args.encoder)
    keys = KeyEncoder(model.encoder, batch_size=args.batch_size)
    stage = model.encoder.num_layers + 1
    lines = [
        f"{sum(len(b) for b in batches)} test rows of {args.data_dir or 'the bundled sample'}, "
        f"max_length {args.max_length}, batches of {args.batch_size}, {torch.get_num_threads()} "
        f"thread(s), median of {args.rounds} alternating rounds",
        "",
        "| saving | anchor s | ours s | anchor / ours | max abs difference | predictions |",
        "|---|---:|---:|---:|---:|---|",
    ]

    def row(name: str, anchor: float, ours: float, difference: float, same: str) -> None:
        lines.append(
            f"| {name} | {anchor:.3f} | {ours:.3f} | {anchor / ours:.3f}x | {difference:.1e} "
            f"| {same} |"
        )
        print(lines[-1], flush=True)

    # keys: the padded forward pass against the packed, [CLS]-only one
    t = timed(
        {
            "padded": lambda: padded_keys(keys.encoder, batches),
            "packed": lambda: [keys(b) for b in batches],
        },
        args.rounds,
    )
    packed = np.concatenate([keys(b) for b in batches])
    difference = float(np.abs(packed - padded_keys(keys.encoder, batches)).max())
    row("keys: packed, last layer at [CLS]", t["padded"], t["packed"], difference, "–")

    # the head-stage prefix: the whole last layer against [CLS] alone
    t = timed(
        {
            "full": lambda: [full_prefix(model, stage, b) for b in batches],
            "pooled": lambda: [frozen_prefix(model, stage, *b.inputs()) for b in batches],
        },
        args.rounds,
    )
    with torch.no_grad():
        full = [full_prefix(model, stage, b) for b in batches]
        pooled = [frozen_prefix(model, stage, *b.inputs())[0] for b in batches]
        mask = [b.attention_mask[:, :1] for b in batches]
        before = torch.cat([model(x, m, start=stage) for x, m in zip(full, mask)])
        after = torch.cat([model(x, m, start=stage) for x, m in zip(pooled, mask)])
    difference = max(float((a - b).abs().max()) for a, b in zip(full, pooled))
    same = "identical" if bool((before.argmax(-1) == after.argmax(-1)).all()) else "DIFFER"
    row("head prefix: last layer at [CLS]", t["full"], t["pooled"], difference, same)

    # the test inputs' keys over the evaluations: every time against each batch once
    def every_time() -> None:
        for _ in range(args.evaluations):
            for b in batches:
                keys(b)

    def once() -> None:
        cache = QueryKeys(keys)
        for _ in range(args.evaluations):
            for b in batches:
                cache(b)

    t = timed({"every": every_time, "once": once}, args.rounds)
    row(f"query keys over {args.evaluations} evaluations", t["every"], t["once"], 0.0, "–")
    print("\n" + "\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
