"""Meta-MbPA's training step per ``meta_scope``, side by side with SEQ's, at the budget settings.

    python experiments/bench/meta_step.py [--data-dir ../shared/data/text_real]
        [--scopes all,head,head-loop] [--steps 2] [--device cpu] [--encoder minilm]

Why the text budget protocol (`experiments/text_classification/real_budget.yaml`) gives
Meta-MbPA's meta step the head: the paper's step (Wang et al., 2020, meta-task loss) adapts
every weight on each training example's K = 32 nearest memories and back-propagates through that
step, so one example is a forward and a double backward over 33 sequences. This times
``observe`` on the budget's settings (MiniLM, 64 tokens, batch 16, lr 3e-5, the five datasets'
training rows of order i, shuffled), with the episodic memory filled beforehand with 64 examples
(`scale.prefill`: every timed example meets its K neighbours, as it does in a run after its
first few hundred examples), and with replay off (a run adds 10% replayed examples at the same
cost each). SEQ's step is timed in the same process, just before, as the yardstick.
``head`` here batches its examples' head steps on any device, ``head-loop`` takes them one at a
time, as before they were batched (`MetaMbPA.batches_head_steps`, whose default batches on CUDA
only): the anchor of the batching.
"""

from __future__ import annotations

import argparse
import time

import torch
from scale import NEIGHBOURS, prefill

from lifelong import registry
from lifelong.batch import Batch
from lifelong.encoders import load_encoder, load_tokenizer
from lifelong.model import Classifier
from lifelong.runtime import Runtime
from lifelong.strategy import StrategyContext
from lifelong.streams import batches, text_classification_stream
from lifelong.tasks import TaskSettings, build_task
from lifelong.tasks.base import TaskKind
from lifelong.tasks.prepared import on_device

BATCH = 16  # the budget's batch (real_budget.yaml)
MAX_LENGTH = 64  # the budget's tokens
LR = 3e-5  # the papers' learning rate (de Masson d'Autume et al., 2019, §4.2)
HEAD_LOOP = "head-loop"  # --scopes name: meta_scope head, its examples' steps in a Python loop


def observe_seconds(strategy: object, data: list[Batch], runtime: Runtime) -> float:
    """Seconds per example of ``observe`` over ``data[1:]``, after ``data[0]`` as warm-up."""
    strategy.observe(data[0])
    runtime.synchronize()
    start = time.perf_counter()
    for batch in data[1:]:
        strategy.observe(batch)
    runtime.synchronize()
    return (time.perf_counter() - start) / sum(b.num_examples for b in data[1:])


def budget_batches(
    data_dir: str | None, steps: int, device: torch.device
) -> tuple[TaskKind, list[Batch], list[Batch]]:
    """The task kind, ``steps + 1`` batches to time (the first a warm-up) and the memory's fill.

    Shuffled training rows of order i, tokenised as the budget does. The kind is prepared for
    ``device``, as the learner prepares it: its batches, and the rows the memory's key network
    reads, land there.
    """
    stream = text_classification_stream(
        "i", data_dir=data_dir, train_size=200 if data_dir else None, test_size=10
    )
    kind = build_task(
        "classification",
        load_tokenizer("minilm"),
        stream.label_names,
        TaskSettings(max_length=MAX_LENGTH),
    )
    task = on_device(kind, device)
    pool = [e for t in stream for e in t.train]
    shuffled = [task(c) for c in batches(pool, BATCH, shuffle=True, seed=0)]
    fill_batches = -(-2 * NEIGHBOURS // BATCH)  # 64 examples
    return task, shuffled[: steps + 1], shuffled[steps + 1 :][:fill_batches]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None, help="real CSVs (default: bundled sample)")
    parser.add_argument("--scopes", default="all,head", help="Meta-MbPA meta_scope values")
    parser.add_argument("--steps", type=int, default=2, help="timed batches per row")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--encoder", default="minilm", help="minilm, or tiny for a smoke test")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    runtime = Runtime.resolve(args.device, "fp32")
    kind, data, fill = budget_batches(args.data_dir, args.steps, runtime.device)
    if sum(b.num_examples for b in fill) <= NEIGHBOURS:
        parser.error(f"--steps {args.steps} leaves too few examples to fill the memory")

    def context() -> StrategyContext:
        torch.manual_seed(0)
        encoder = load_encoder(args.encoder)
        model = Classifier(encoder, kind.head(encoder.hidden_size), kind=kind)
        return StrategyContext(
            model.to(runtime.device), kind, lr=LR, batch_size=BATCH, seed=0, runtime=runtime
        )

    print(
        f"{args.encoder}, {MAX_LENGTH} tokens, batch {BATCH}, {args.steps} timed batches, "
        f"memory of {sum(b.num_examples for b in fill)} examples, K = {NEIGHBOURS}, "
        f"{runtime.describe()}, {torch.get_num_threads()} threads",
        flush=True,
    )
    seq = observe_seconds(registry.build("seq", context()), data, runtime)
    print(f"seq                       {seq:8.3f} s/example", flush=True)
    for scope in args.scopes.split(","):
        loop = scope == HEAD_LOOP  # the head's per-example steps one at a time (the oracle)
        meta_scope = "head" if loop else scope
        options = {"meta_scope": meta_scope, "replay_every": 10**9, "write_rate": 0.1}
        strategy = registry.build("meta-mbpa", context(), options)
        strategy.batches_head_steps = not loop  # head: batched on any device
        prefill(strategy, fill)
        cost = observe_seconds(strategy, data, runtime)
        row = f"meta-mbpa {scope}"
        print(f"{row:<26}{cost:8.3f} s/example  {cost / seq:6.1f}x seq", flush=True)


if __name__ == "__main__":
    main()
