"""Training speed of `lifelong lm`'s families side by side: tokens/s against ``transformer``.

The LM table's ``train tok/s`` column comes from runs made at different times, some beside other
work, so it is no speed comparison. This bench trains each named family at the table's budget
(width 128, 4 layers, 4 heads, 4 × 32-character windows, 12 windows a step; the training loop
is `lifelong.lm.text.train_lm`, as `lifelong lm` runs it) in alternating rounds of ``--steps``
steps (transformer, pkm, pkm:dense, transformer, ...), each round from the same initial model,
then scores the first ``--eval-chars`` validation characters with the trained model (the
speed Lample et al. claim for PKM is at inference), and reports every family's total tokens/s
over its rounds, training and evaluation, and their ratios to ``transformer``'s: measured side
by side in one run, so a shared machine's load falls on all of them alike.

``pkm`` trains its value table as Lample et al. (2019, §4.2) do (sparse gradients, a separate
sparse Adam at lr 1e-3: `lifelong.lm.bench.SPARSE_VALUES`); ``pkm:dense`` is the same model
with a dense value table under the AdamW of the other weights, the recipe the table's PKM rows
had before 2026-12-02.

    python experiments/bench/lm_speed.py [--modules transformer,pkm,pkm:dense] [--steps 20]
        [--rounds 3] [--eval-chars 16384] [--device cpu]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses

import torch

from lifelong.lm.bench import SPARSE_VALUES, BenchSettings, build_lm
from lifelong.lm.flags import KNN_LM, SPALM, check_modules
from lifelong.lm.text import TrainSettings, evaluate_lm, load_corpus, train_lm
from lifelong.runtime import resolve_device

BASELINE = "transformer"
DENSE = ":dense"


def family(name: str) -> tuple[str, bool | None]:
    """(family, sparse_values) of a bench name: ``pkm:dense`` is PKM with dense values."""
    if name.endswith(DENSE):
        return name.removesuffix(DENSE), False
    return name, None


def check_names(names: list[str]) -> None:
    """Every name a `lifelong lm` family (``:dense`` only on a sparse one), the baseline first."""
    if not names or names[0] != BASELINE:
        raise SystemExit(f"--modules: start with {BASELINE!r} (the ratios' baseline)")
    try:
        check_modules([family(n)[0] for n in names])
    except ValueError as error:
        raise SystemExit(str(error)) from None
    needs_store = [n for n in names if n in (KNN_LM, SPALM)]
    if needs_store:
        raise SystemExit(f"--modules: {needs_store[0]!r} reads a datastore (lifelong lm times it)")
    dense = [n for n in names if n.endswith(DENSE) and family(n)[0] not in SPARSE_VALUES]
    if dense:
        raise SystemExit(f"--modules: {dense[0]!r}: ':dense' applies to {sorted(SPARSE_VALUES)}")


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modules", default="transformer,pkm,pkm:dense")
    parser.add_argument("--steps", type=int, default=20, help="steps per round and family")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--segment-length", type=int, default=32)
    parser.add_argument("--eval-chars", type=int, default=16_384, help="validation scored a round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.modules.split(",") if n.strip()]
    check_names(names)
    device = resolve_device(args.device)  # a bad or missing device fails before any work

    corpus = load_corpus()
    settings = BenchSettings(
        width=args.width,
        layers=args.layers,
        segments=args.segments,
        segment_length=args.segment_length,
        train=TrainSettings(steps=args.steps, warmup=1),
    )
    initial = {
        name: build_lm(
            family(name)[0],
            corpus.vocab.size,
            settings,
            args.seed,
            corpus.vocab.chars,
            sparse_values=family(name)[1],
        )  # fmt: skip
        for name in names
    }
    warm_up = dataclasses.replace(settings.train, steps=2)  # kernels, allocator: untimed
    for name in names:
        train_lm(copy.deepcopy(initial[name]), corpus.train, warm_up, seed=args.seed, device=device)
    scored = corpus.val[: args.eval_chars + 1]
    seconds = {name: [0.0, 0.0] for name in names}  # training, evaluation
    evaluated = 0
    for round_ in range(args.rounds):
        for name in names:  # the same windows for every family in a round
            model = copy.deepcopy(initial[name])
            trained = train_lm(model, corpus.train, settings.train, seed=args.seed + round_,
                               device=device)  # fmt: skip
            _, rate = evaluate_lm(model, scored, settings.window, device=device)
            tokens = (len(scored) - 1) // settings.window * settings.window
            seconds[name][0] += trained.seconds
            seconds[name][1] += tokens / rate
        evaluated += tokens
    trained_tokens = args.rounds * args.steps * settings.train.batch_size * settings.window
    rates = {name: (trained_tokens / t, evaluated / e) for name, (t, e) in seconds.items()}
    print(f"{args.rounds} alternating rounds of {args.steps} steps on {device}; "
          f"window {settings.segments} x {settings.segment_length}, batch "
          f"{settings.train.batch_size}, width {args.width}, {args.layers} layers; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")  # fmt: skip
    print(f"| module | train tokens/s | x {BASELINE} | eval tokens/s | x {BASELINE} |")
    print("|---|---:|---:|---:|---:|")
    base_train, base_eval = rates[BASELINE]
    for name, (train, score) in rates.items():
        print(f"| {name} | {train:,.0f} | {train / base_train:.2f} | {score:,.0f} | "
              f"{score / base_eval:.2f} |")  # fmt: skip
    return rates


if __name__ == "__main__":
    main()
