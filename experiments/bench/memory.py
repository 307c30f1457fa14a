"""Episodic-memory search on real keys: exact torch, exact FAISS, IVF and HNSW, and ``auto``.

Keys are what the key network gives for real text: `KeyEncoder` (a frozen MiniLM, the offline
default encoder) over each task kind's key rows (`TaskKind.key_rows`; [CLS] for classification
and relation sentences, the first question token for QA), for every sentence at hand: the real
FewRel 1.0 sentences of ``../shared/data/fewrel_cfrl/`` (``train_0.txt``, ``test_0.txt``) and the
bundled samples of the three streams (text classification, FewRel, QA), duplicates dropped; about
11,000 keys of width 384. The keys are cached under lifelong's cache directory
(``$LIFELONG_CACHE_DIR``, else ``~/.cache/lifelong``, ``/bench``), named by a hash of the
encoder and the texts, so that a second run skips the encoding (``--cache-dir off`` recomputes).

Sizes:

* ``real``: the real keys but 1,000 held out (a seeded choice) as the queries;
* ``100k``, ``1m`` (or any count): synthetic keys drawn from a Gaussian mixture fitted to the
  real keys (`fit_mixture`: 64 components with one shared full covariance, ``tied``; see there
  why), queries drawn from the same mixture. The mixture keeps the real keys' clusters (the
  domains and relations) and their correlated dimensions. After the real table the bench
  checks the stand-in: the same torch IVF over the real keys and over as many mixture keys.
  While this was written the mixture was somewhat easier for IVF than the real keys (0.91
  against 0.84 of the 32 nearest at a quarter of 128 lists), so the mixture rows may flatter
  IVF on real keys at scale; ``index: auto`` does not rely on them: it checks the recall on
  the memory's own keys (`lifelong.memory.search.tune_nprobe`). i.i.d. Gaussian keys (the
  earlier bench) have no structure at all and are the worst case for every approximate index.

For each size and index the bench reports the build time (adding the keys, and training where
the index needs it), the query time of 1,000 queries at k = 32 (best of ``--repeats``), the
speed-up over the exact torch search (`TorchFlatIndex`, one matmul and a top-k: the baseline),
recall@k against the exact neighbours (the fraction of the exact k nearest that the index
returns), and bytes per key (the serialised FAISS index, or the torch index's tensors, over
the number of keys). Indexes: torch exact; `TorchIVFIndex` (``IVF{nlist},Flat`` searched a
matmul per list) at nlist = `ivf_lists` (the power of two nearest √N) and nprobe from 1/32 to
1/4 of the lists; FAISS ``Flat``; FAISS ``IVF{nlist},Flat`` at that nlist and at 4x it; FAISS
``HNSW32`` at efSearch 64 to 512; and the row of ``EpisodicMemory``'s default,
``index: auto`` (`lifelong.memory.search.choose_index`), timed through `EpisodicMemory.nearest`
itself, whose build time is its first search's (choosing, training, laying out and checking
the index). The slow builds, HNSW32 and FAISS IVF at 4x the lists, are skipped above
``--hnsw-max`` keys (HNSW32 over a million mixture keys took 386 s to build here and found
0.906 of the 32 nearest at efSearch 1024, in 5.4 s per 1,000 queries), and the output says so.

The bench sets ``OMP_WAIT_POLICY=PASSIVE`` unless it is set (see below). Timings on shared
machines are noisy: compare rows of one run, not runs.

    python -m experiments.bench.memory [--sizes real,100k,1m] [--queries 1000] [--k 32]
        [--repeats 3] [--device cpu] [--hnsw-max 200000] [--quick]
    python experiments/bench/memory.py ...   (the same)
"""

from __future__ import annotations

import os

# Before torch and FAISS load their OpenMP runtimes: idle OpenMP threads sleep instead of
# spinning. Spinning threads on two cores shared with another process slowed FAISS's exact
# search 3x (2.0 s against 0.63 s for 1,000 queries over 100,000 keys) and the torch IVF
# search 1.7x (0.92 s against 0.55 s); the torch exact search hardly (1.41 s, 1.32 s).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lifelong.memory import EpisodicMemory, ExampleRecords, KeyEncoder  # noqa: E402
from lifelong.memory.search import (  # noqa: E402
    TRAIN_PER_LIST,
    TorchFlatIndex,
    TorchIVFIndex,
    faiss_installed,
    ivf_lists,
    torch_ivf_lists,
)

FEWREL_CFRL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "fewrel_cfrl"
"""The real FewRel sentences (see that directory's README)."""

Source = tuple[str, str, list]  # (name, task kind, examples)


# ---------------------------------------------------------------------------------------------
# Real keys
# ---------------------------------------------------------------------------------------------


def cfrl_examples(root: Path) -> list:
    """The real FewRel sentences of ``train_0.txt`` and ``test_0.txt`` as relation examples."""
    from lifelong.streams.core import Example

    examples = []
    for name in ("train_0.txt", "test_0.txt"):
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (the real FewRel sentences)")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            fields = line.split("\t")
            if len(fields) < 3:
                raise ValueError(f"{path}:{number}: expected gold<TAB>candidates<TAB>sentence")
            gold = int(fields[0]) - 1
            examples.append(Example(fields[2], gold, uid=f"{name}:{number}", candidates=(gold,)))
    return examples


def sample_sources() -> list[Source]:
    """The bundled samples: text classification, FewRel and QA examples (every split)."""
    from lifelong.streams import qa_stream, text_classification_stream
    from lifelong.streams.core import Example
    from lifelong.streams.fewrel import SAMPLE_DIR, TEST_FILE, TRAIN_FILE, read_relation_file
    from lifelong.streams.fewrel import relation_names as fewrel_names

    def every(stream) -> list:
        return [e for t in stream.tasks for s in (t.train, t.test, t.validation or ()) for e in s]

    n = len(fewrel_names())
    lines = [
        line for f in (TRAIN_FILE, TEST_FILE) for line in read_relation_file(SAMPLE_DIR / f, n)
    ]
    fewrel = [Example(x.sentence, x.gold, uid=x.uid, candidates=(x.gold,)) for x in lines]
    return [
        ("text sample", "classification", every(text_classification_stream("i"))),
        ("fewrel sample", "relation", fewrel),
        ("qa sample", "qa", every(qa_stream("i"))),
    ]


def unique(examples: list) -> list:
    """``examples`` without repeated inputs (the first of each kept)."""
    seen: dict = {}
    for e in examples:
        seen.setdefault((e.text, e.text_pair), e)
    return list(seen.values())


def encode_keys(kind_name: str, examples: list, encoder, tokenizer, device: str) -> np.ndarray:
    """Keys of ``examples`` from the key network, shape (n, d), in their order.

    Rows are encoded in length-sorted chunks, so that padding stays short.
    """
    from lifelong.tasks import task_class

    names = [f"relation {i}" for i in range(100)]  # relation kinds tokenise names; keys skip them
    kind = task_class(kind_name)(tokenizer, names, None)
    keys = KeyEncoder(encoder, batch_size=128, position=kind.key_position)
    records = kind.encode(examples)
    length = [len(r) for r in records[records.names[0]]]
    order = np.argsort(length, kind="stable")
    out = np.zeros((len(examples), keys.dim), np.float32)
    for s in range(0, len(order), 512):
        chunk = order[s : s + 512]
        out[chunk] = keys(kind.key_rows(records.select(chunk)).to(device))  # (c, d)
    return out


def real_keys(
    fewrel_dir: Path | None,
    cache_dir: Path | None,
    device: str,
    *,
    per_source: int | None = None,
    log: Callable[[str], None] = print,
) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """The key network's keys of every real sentence at hand, and (source, count) per source.

    Args:
        fewrel_dir: Directory of the real FewRel sentences (``None`` or missing: the samples
            only, said so).
        cache_dir: Where the keys are cached (``None``: recompute).
        device: Where the key network runs.
        per_source: Keep only this many examples of each source (``--quick``).
        log: Where progress lines go.

    Returns:
        Keys (n, 384) float32, and the sources in order with their counts.

    """
    from lifelong.encoders import MINILM, load_encoder, load_tokenizer

    sources = sample_sources()
    if fewrel_dir is not None and fewrel_dir.is_dir():
        sources.insert(0, ("fewrel real (CFRL)", "relation", cfrl_examples(fewrel_dir)))
    else:
        where = f" at {fewrel_dir}" if fewrel_dir else ""
        log(f"(no real FewRel sentences{where}: the bundled samples only)")
    sources = [(name, kind, unique(examples)[:per_source]) for name, kind, examples in sources]
    counts = [(name, len(examples)) for name, _, examples in sources]
    digest = hashlib.sha256(MINILM.encode())
    for name, kind, examples in sources:
        digest.update(repr((name, kind, [(e.text, e.text_pair) for e in examples])).encode())
    path = cache_dir / f"memory-keys-{digest.hexdigest()[:16]}.npy" if cache_dir else None
    if path is not None and path.is_file():
        log(f"real keys: cached in {path}")
        return np.load(path), counts
    start = time.perf_counter()
    encoder, tokenizer = load_encoder(MINILM).to(device), load_tokenizer(MINILM)
    parts = [encode_keys(k, ex, encoder, tokenizer, device) for _, k, ex in sources]
    keys = np.concatenate(parts)
    log(f"real keys: {len(keys):,} encoded in {time.perf_counter() - start:.0f} s on {device}")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, keys)
    return keys, counts


# ---------------------------------------------------------------------------------------------
# Synthetic keys: a Gaussian mixture fitted to the real ones
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mixture:
    """A Gaussian mixture with one covariance shared by its components (``tied``).

    Attributes:
        weights: Component weights, (c,).
        means: Component means, (c, d).
        chol: Cholesky factor of the shared covariance, (d, d).

    """

    weights: np.ndarray
    means: np.ndarray
    chol: np.ndarray

    def sample(self, n: int, seed: int, chunk: int = 100_000) -> np.ndarray:
        """``n`` keys drawn from the mixture, (n, d) float32."""
        rng = np.random.default_rng(seed)
        component = rng.choice(len(self.weights), size=n, p=self.weights)
        out = np.empty((n, self.means.shape[1]), np.float32)
        for s in range(0, n, chunk):
            z = rng.standard_normal((min(chunk, n - s), self.means.shape[1]))  # (c, d)
            out[s : s + len(z)] = z @ self.chol.T + self.means[component[s : s + len(z)]]
        return out


def fit_mixture(keys: np.ndarray, components: int, seed: int = 0) -> Mixture:
    """A ``tied`` Gaussian mixture of ``components`` fitted to ``keys`` by EM (scikit-learn).

    Why tied: the keys' dimensions are strongly correlated (95% of their variance lies in 207 of
    384 principal directions), which a diagonal covariance loses, while ~11,000 keys cannot
    estimate one full 384 x 384 covariance per component (74,000 numbers each). One shared
    full covariance plus a mean per component fits best: on 2,000 held-out keys its
    log-likelihood per key is 190-211 (16-128 components) against 29-45 for diagonal
    mixtures (48-1,024 components) and 79 or less for full ones (16, 48).
    """
    from sklearn.mixture import GaussianMixture

    gmm = GaussianMixture(
        components, covariance_type="tied", reg_covar=1e-4, max_iter=100, random_state=seed
    ).fit(keys.astype(np.float64))
    return Mixture(gmm.weights_, gmm.means_, np.linalg.cholesky(gmm.covariances_))


def cached_mixture(
    keys: np.ndarray, components: int, cache_dir: Path | None, log: Callable[[str], None] = print
) -> Mixture:
    """`fit_mixture` of ``keys``, read from ``cache_dir`` when fitted before."""
    digest = hashlib.sha256(keys.tobytes() + str(components).encode()).hexdigest()[:16]
    path = cache_dir / f"memory-mixture-{digest}.npz" if cache_dir else None
    if path is not None and path.is_file():
        with np.load(path) as saved:
            return Mixture(saved["weights"], saved["means"], saved["chol"])
    start = time.perf_counter()
    mixture = fit_mixture(keys, components)
    log(f"mixture: {components} components fitted in {time.perf_counter() - start:.0f} s")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, weights=mixture.weights, means=mixture.means, chol=mixture.chol)
    return mixture


# ---------------------------------------------------------------------------------------------
# Timing the indexes
# ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One index at one size."""

    index: str
    build_s: float
    query_s: float
    recall: float
    bytes_per_key: float
    speedup: float = 1.0


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """The fastest of ``repeats`` calls of ``fn`` in seconds, and what the last call returned."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def recall_at(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean over queries of the fraction of the exact neighbours found, (q, k) each."""
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)]))


def bytes_per_key(index: object, n: int) -> float:
    """Memory an index holds per key: FAISS's serialised size, or the torch index's tensors."""
    if isinstance(index, TorchFlatIndex | TorchIVFIndex):
        return index.nbytes / n
    import faiss

    return faiss.serialize_index(index).nbytes / n


def index_rows(name, index, keys, queries, k, repeats, exact, settings) -> list[Row]:
    """Build ``index`` over ``keys`` (trained on a sample first if it needs training), then one
    row per search setting: ``settings`` maps a label to a function setting the index up."""
    start = time.perf_counter()
    if not index.is_trained:
        lists = index.nlist
        sample = np.random.default_rng(0).permutation(len(keys))[: TRAIN_PER_LIST * lists]
        index.train(keys[np.sort(sample)])
    index.add(keys)
    build = time.perf_counter() - start
    size = bytes_per_key(index, len(keys))
    rows = []
    for label, setup in settings.items():
        setup(index)
        query, (_, found) = timed(lambda: index.search(queries, k), repeats)
        recall = 1.0 if exact is None else recall_at(found, exact)  # None: this is exact
        rows.append(Row(f"{name} {label}".strip(), build, query, recall, size))
    return rows


def filled_memory(keys: np.ndarray, device: str) -> EpisodicMemory:
    """An `EpisodicMemory` (``index: auto``) holding ``keys`` (n, d), written 100,000 at a time."""
    memory = EpisodicMemory(keys.shape[1], device=device)
    label = np.zeros((1,), np.int32)
    for s in range(0, len(keys), 100_000):
        part = keys[s : s + 100_000]
        memory.write(ExampleRecords.build(label=[label] * len(part)), part)
    return memory


def auto_row(keys, queries, k, repeats, exact, device) -> Row:
    """``EpisodicMemory``'s default search (``index: auto``), through `EpisodicMemory.nearest`.

    The build time is the first search's: choosing, training, laying out and checking.
    """
    memory = filled_memory(keys, device)
    build, _ = timed(lambda: memory.nearest(queries[:1], k), 1)
    query, (_, found) = timed(lambda: memory.nearest(queries, k), repeats)
    choice = memory.index_choice
    dim, n = keys.shape[1], len(keys)
    lists = torch_ivf_lists(choice.spec)  # ids and list numbers, and the centroids
    size = 4.0 * (dim + 1) + (16 + 4 * dim * lists / n if lists else 0)
    return Row(f"auto -> {choice.describe()}", build, query, recall_at(found, exact), size)


def size_rows(keys, queries, k, repeats, device, slow: bool) -> list[Row]:
    """Every index over ``keys`` searched with ``queries``; speed-ups against torch exact.

    ``slow``: also the indexes slow to build, HNSW32 and FAISS IVF at 4x the lists.
    """
    d, lists = keys.shape[1], ivf_lists(len(keys))
    exact_index = TorchFlatIndex(d, device)
    rows = index_rows("torch exact", exact_index, keys, queries, k, repeats, None, {"": _none})
    exact = exact_index.search(queries, k)[1]
    del exact_index
    probes = {f"nprobe {p}": _nprobe(p) for p in _probes(lists)}
    ivf = TorchIVFIndex(d, lists, device)
    rows += index_rows(f"torch IVF{lists},Flat", ivf, keys, queries, k, repeats, exact, probes)
    del ivf
    if faiss_installed():
        import faiss

        def make(spec: str):
            return faiss.index_factory(d, spec, faiss.METRIC_L2)

        rows += index_rows(
            "FAISS Flat", make("Flat"), keys, queries, k, repeats, exact, {"": _none}
        )
        for n in (lists, 4 * lists) if slow else (lists,):
            probes = {f"nprobe {p}": _nprobe(p) for p in _probes(n)}
            name = f"FAISS IVF{n},Flat"
            rows += index_rows(name, make(f"IVF{n},Flat"), keys, queries, k, repeats, exact, probes)
        if slow:
            efs = {f"efSearch {ef}": _ef(ef) for ef in (64, 128, 256, 512)}
            rows += index_rows(
                "FAISS HNSW32", make("HNSW32"), keys, queries, k, repeats, exact, efs
            )
    rows.append(auto_row(keys, queries, k, repeats, exact, device))
    for row in rows:
        row.speedup = rows[0].query_s / row.query_s
    return rows


def mixture_check(keys, queries, mixture: Mixture, k: int, device: str) -> str:
    """Recall of one torch IVF over the real keys and over as many mixture keys, side by side."""
    fake, fake_queries = mixture.sample(len(keys), seed=3), mixture.sample(len(queries), seed=4)
    lists, found = ivf_lists(len(keys)), []
    probes = {f"nprobe {p}": _nprobe(p) for p in _probes(lists)}
    for x, q in ((keys, queries), (fake, fake_queries)):
        exact = TorchFlatIndex(x.shape[1], device)
        exact.add(x)
        truth = exact.search(q, k)[1]
        ivf = TorchIVFIndex(x.shape[1], lists, device)
        found.append([r.recall for r in index_rows("", ivf, x, q, k, 1, truth, probes)])
    return (
        f"  mixture check, torch IVF{lists},Flat recall@{k} at nprobe "
        + "/".join(map(str, _probes(lists)))
        + ": real keys "
        + "/".join(f"{r:.2f}" for r in found[0])
        + f", {len(keys):,} mixture keys "
        + "/".join(f"{r:.2f}" for r in found[1])
    )


def _probes(lists: int) -> list[int]:
    return sorted({max(1, round(lists * f)) for f in (1 / 32, 1 / 16, 1 / 8, 3 / 16, 1 / 4)})


def _none(index: object) -> None:
    """No setting to make."""


def _nprobe(p: int) -> Callable[[object], None]:
    def setup(index) -> None:
        index.nprobe = p

    return setup


def _ef(ef: int) -> Callable[[object], None]:
    def setup(index) -> None:
        index.hnsw.efSearch = ef

    return setup


def format_rows(rows: Sequence[Row], k: int) -> str:
    """The table of one size."""
    recall = f"recall@{k}"
    lines = [
        f"  {'index':<64} {'build s':>8} {'query ms':>9} {'vs torch':>9} {recall:>10} {'B/key':>6}"
    ]
    for r in rows:
        lines.append(
            f"  {r.index:<64} {r.build_s:8.2f} {r.query_s * 1e3:9.1f} {r.speedup:8.2f}x "
            f"{r.recall:10.3f} {r.bytes_per_key:6.0f}"
        )
    return "\n".join(lines)


def parse_size(text: str) -> int | str:
    """``real``, or a count such as ``100k``, ``1m`` or ``250000``."""
    text = text.strip().lower()
    if text == "real":
        return text
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    try:
        return int(float(text.rstrip("km")) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size {text!r}: expected real or a count (100k, 1m)"
        ) from None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="real,100k,1m", help="real and/or key counts")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="query timings: best of")
    parser.add_argument("--device", default="cpu", help="where the torch searches run")
    parser.add_argument("--components", type=int, default=64, help="mixture components")
    parser.add_argument(
        "--hnsw-max",
        type=int,
        default=200_000,
        help="skip HNSW32 and FAISS IVF at 4x the lists above this many keys (slow builds)",
    )
    parser.add_argument("--fewrel-dir", type=Path, default=FEWREL_CFRL)
    parser.add_argument(
        "--cache-dir", default="auto", help="where keys and mixture are cached; off: recompute"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: a few sample keys, tiny sizes"
    )
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    if args.quick:
        args.queries, args.repeats, args.components = min(args.queries, 50), 1, 4
        sizes = list(dict.fromkeys(s if s == "real" else min(s, 2_000) for s in sizes))
    from lifelong.tasks.cache import default_cache_dir

    cache = {"off": None, "auto": default_cache_dir() / "bench"}.get(
        args.cache_dir, Path(args.cache_dir)
    )
    print(
        f"episodic-memory search: k={args.k}, {args.queries:,} queries, query times best of "
        f"{args.repeats}; {torch.get_num_threads()} CPU threads, torch indexes on "
        f"{args.device}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}"
    )
    fewrel = None if args.quick else args.fewrel_dir
    keys, counts = real_keys(fewrel, cache, args.device, per_source=300 if args.quick else None)
    print("real keys: " + ", ".join(f"{name} {n:,}" for name, n in counts) + f" = {len(keys):,}")
    order = np.random.default_rng(0).permutation(len(keys))
    held, stored = keys[order[: args.queries]], keys[order[args.queries :]]
    mixture = cached_mixture(keys, args.components, None if args.quick else cache)
    for size in sizes:
        if size == "real":
            base, queries, what = stored, held, "real keys, held-out real queries"
        else:
            base, queries = mixture.sample(size, seed=1), mixture.sample(args.queries, seed=2)
            what = f"mixture keys ({args.components} components, tied), mixture queries"
        slow = len(base) <= args.hnsw_max
        skipped = f"; HNSW32 and FAISS IVF{4 * ivf_lists(len(base))} skipped (> --hnsw-max)"
        print(f"\n== {len(base):,} {what}{'' if slow else skipped}", flush=True)
        rows = size_rows(base, queries, args.k, args.repeats, args.device, slow)
        print(format_rows(rows, args.k), flush=True)
        if size == "real":
            print(mixture_check(stored, held, mixture, args.k, args.device), flush=True)


if __name__ == "__main__":
    main()
