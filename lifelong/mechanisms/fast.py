"""Local adaptation of many test inputs at once: the frozen bottom computed once per neighbour.

Computes what `lifelong.mechanisms.reference` computes (with ``adapt_scope: all`` exactly; tested),
faster: the stages below the scope's run once per retrieved memory example and are cached for
the evaluation phase (`lifelong.mechanisms.neighbours.NeighbourCache`); one-row examples are
adapted ``fast_chunk`` at a time under ``torch.func.vmap``, those of similar neighbour widths
together (`width_chunks`: a chunk pads to its widest row); at stage 0 only the embedding rows
the inputs use are adapted (`_compact_vocabulary`: exact, see there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.func import vmap

from lifelong.batch import Batch
from lifelong.encoders.base import attention_implementation
from lifelong.mechanisms.inner_loop import Params, local_adapt
from lifelong.mechanisms.neighbours import Adapting, in_batch_order, trimmed, width_chunks
from lifelong.mechanisms.scopes import Head
from lifelong.runtime import eager_call

WORD_EMBEDDINGS = "encoder.model.embeddings.word_embeddings.weight"


def _compact_vocabulary(
    params: Params, ids: Sequence[torch.Tensor], name: str
) -> tuple[Params, list[torch.Tensor]]:
    """Restrict the word-embedding matrix to the rows ``ids`` use, renumbering the ids.

    Rows of tokens that appear in no neighbour get no gradient from the loss, and the L2 pull
    keeps them at W, so adapting only the used rows is exact, and it spares L dense updates of
    a (vocab, d) matrix. Row 0 stays the padding id, so ``padding_idx`` keeps its meaning.
    """
    flat = [t.reshape(-1) for t in ids]
    like = {"dtype": ids[0].dtype, "device": ids[0].device}
    used = torch.unique(torch.cat([*flat, torch.zeros(1, **like)]))
    lookup = torch.zeros(int(used.max()) + 1, **like)
    lookup[used] = torch.arange(len(used), **like)  # used[0] == 0: padding stays 0
    compact = {**params, name: params[name][used]}  # (rows, d)
    return compact, [lookup[t] for t in ids]


def fast_logits(adapter: Adapting, batch: Batch, slots: np.ndarray) -> torch.Tensor:
    """Adapt many test examples, reusing cached prefixes (``vmap`` over one-row examples)."""
    stage = adapter.scope.stage
    with torch.no_grad():
        tests = adapter.cache.prefix(batch)  # (n, t, ...), (n, t)[, (n, t) token types at stage 0]
    adapter.cache.fill(slots)
    chunk = adapter.options.fast_chunk or (64 if isinstance(adapter.scope, Head) else 1)
    if batch.groups is not None:  # several rows per example: shapes differ, no vmap
        chunk = 1
    # one example at a time runs the layers on real tokens only; vmap cannot (data-dependent)
    stage_kwargs = {"start": stage, "packed": chunk == 1}
    params = adapter.scope.params(adapter.model)
    adapt_kwargs = adapter.adapt_kwargs()
    model = adapter.model

    def one(p: Params, nb: Batch, test: tuple[torch.Tensor, ...]) -> torch.Tensor:
        def loss(q: Params) -> torch.Tensor:
            logits = eager_call(model, q, nb.inputs(), stage_kwargs)
            return model.criterion(logits, nb)

        adapted = local_adapt(loss, p, **adapt_kwargs)
        with torch.no_grad():  # the prediction is not trained on (nor counted as trained)
            return eager_call(model, adapted, test, stage_kwargs)

    if chunk == 1:
        out = []
        for i in range(batch.num_examples):
            rows = torch.as_tensor(batch.example_rows(i), device=batch.input_ids.device)
            nb = adapter.cache.batch(slots[i])
            test, p = [t[rows] for t in tests], params  # its rows' inputs at the stage
            if stage == 0:  # adapt only the embedding rows these inputs use
                p, (nb.input_ids, test[0]) = _compact_vocabulary(
                    params, [nb.input_ids, test[0]], WORD_EMBEDDINGS
                )
            out.append(one(p, nb, tuple(test)))
        return torch.cat(out).detach()

    def vmapped(p: Params, nb: Any, ny: Any, test: Any) -> torch.Tensor:
        types = nb[2] if len(nb) > 2 else None  # (k, t') at stage 0, when rows have them
        neighbours = Batch(nb[0], nb[1], ny, token_type_ids=types)
        return one(p, neighbours, tuple(t[None] for t in test))[0]

    out = []
    chunks = width_chunks(adapter.cache.widths(slots), chunk)  # similar widths together
    for part in chunks:
        stacked, ny = adapter.cache.stacked(slots[part])  # (c, k, t', ...), (c, k)
        nb = list(stacked)
        picked = torch.as_tensor(part, device=tests[0].device)
        test = trimmed([t[picked] for t in tests], tests[1][picked])  # (c, t, ...), (c, t)
        p = params
        if stage == 0:
            p, (nb[0], test[0]) = _compact_vocabulary(params, [nb[0], test[0]], WORD_EMBEDDINGS)
        with attention_implementation(adapter.model.encoder, "eager"):
            vmapped_one = vmap(vmapped, in_dims=(None, 0, 0, 0))
            out.append(vmapped_one(p, tuple(nb), ny, tuple(test)))
    return in_batch_order(out, chunks).detach()  # (n, num_labels)
