"""Make CPU autocast follow CUDA autocast's cast rules (for tests).

CUDA and CPU autocast keep *different* per-op tables.  The most visible
difference: CUDA autocast runs ``exp``, ``log``, ``softmax``, ``layer_norm``,
``sum``, ``pow``, ... in float32 (their outputs are float32 even for bf16/fp16
inputs), while CPU autocast leaves those ops alone (bf16 in -> bf16 out).
Code that mixes such an output with a low-precision tensor, e.g.::

    with torch.autocast("cuda", dtype=torch.bfloat16):
        acc.index_add_(0, idx, torch.exp(y))      # acc is bf16
    # CUDA: RuntimeError: index_add_(): self (BFloat16) and source (Float) ...
    # CPU : works

only fails on a GPU.  :func:`cuda_autocast_rules` temporarily installs Python
kernels for the ``AutocastCPU`` dispatch key that apply CUDA's policy to
exactly the operator overloads CUDA autocast registers, so such bugs
reproduce inside ``torch.autocast("cpu", dtype=torch.bfloat16 | torch.float16)``.

Mechanism
---------
``torch.library.Library("aten", "IMPL")`` + ``lib.impl(op, kernel,
"AutocastCPU")``.  Each kernel mirrors ``at::autocast::WrapFunction_``: it
excludes the ``AutocastCPU`` key for the rest of the call (so ops run *inside*
the kernel, e.g. the decomposition of ``layer_norm``, are not autocast again),
casts the eligible inputs (floating point, CPU, not float64) and calls the op.
The dispatcher keeps every registration for a (op, key) pair in a list, so
overriding one of CPU autocast's own C++ kernels (e.g. ``nll_loss``) is
allowed; ``Library._destroy()`` removes our kernels and the previous ones
become active again.  The one-time C++ "Overriding a previously registered
kernel" warning is filtered while registering.

Op tables: ``torch/include/ATen/autocast_mode.h`` (macros
``AT_FORALL_LOWER_PRECISION_FP``, ``AT_FORALL_FP32``,
``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``,
``AT_FORALL_PROMOTE``) and ``aten/src/ATen/autocast_mode.cpp``
(``TORCH_LIBRARY_IMPL(aten, Autocast, m)`` = the CUDA table) of torch 2.13.
:func:`check_tables_against_installed_torch` verifies the op names against the
kernels actually registered for ``AutocastCUDA`` in the running torch (the
registrations exist in CPU-only wheels too), so a torch upgrade that changes
the list is detected by a test.

Caveats
-------
* Registrations are process-global (all threads) while the block is active;
  they only matter where CPU autocast is enabled.
* Python kernels cost some microseconds per covered op call.
* Like CUDA autocast, only the registered overloads are affected: in-place
  and ``out=`` variants (``exp_``, ``exp.out``, ``index_put_``) are untouched.
* Weight-cast caching (``cache_enabled``) is not emulated for the extra
  lower-precision ops of ``full_table=True``.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = [
    "CUDA_LOWER_PRECISION_FP",
    "CUDA_FP32",
    "CUDA_FP32_SET_OPT_DTYPE",
    "CUDA_FP32_APPEND_DTYPE",
    "CUDA_PROMOTE",
    "CUDA_BANNED",
    "cuda_autocast_rules",
    "check_tables_against_installed_torch",
]
# Written for this project's tests (reproducing GPU-only autocast failures on the CPU), after
# torch 2.13's ATen/autocast_mode.h and autocast_mode.cpp; the tables are checked against the
# AutocastCUDA kernels of the installed torch by test_autocast_rules.py.

# --------------------------------------------------------------------------
# CUDA autocast table of torch 2.13 (ATen/autocast_mode.h + autocast_mode.cpp)
# Entries are "op" or "op.overload" (aten namespace).
# --------------------------------------------------------------------------

#: cast floating inputs to the autocast dtype (AT_FORALL_LOWER_PRECISION_FP
#: + cudnn_convolution{,_transpose}, which do not exist on CPU).
CUDA_LOWER_PRECISION_FP: tuple[str, ...] = (
    "_convolution.deprecated",
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d.input",
    "conv_transpose3d.input",
    "convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linalg_vecdot",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "lstm_cell",
    "gru_cell",
    "rnn_tanh_cell",
    "rnn_relu_cell",
    "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention",
)
_CUDA_ONLY_OPS = ("cudnn_convolution", "cudnn_convolution_transpose")

#: cast floating inputs to float32 (AT_FORALL_FP32).
CUDA_FP32: tuple[str, ...] = (
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "log1p",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "pow.Tensor_Scalar",
    "pow.Tensor_Tensor",
    "pow.Scalar",
    "softplus",
    "layer_norm",
    "native_layer_norm",
    "rms_norm",
    "group_norm",
    "frobenius_norm.dim",
    "nuclear_norm",
    "nuclear_norm.dim",
    "cosine_similarity",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "nll_loss2d",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "mse_loss",
    "margin_ranking_loss",
    "multilabel_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "binary_cross_entropy_with_logits",
    "dist",
    "pdist",
    "cdist",
    "renorm",
    "logsumexp",
    "upsample_nearest1d",
    "_upsample_nearest_exact1d",
    "upsample_nearest2d",
    "_upsample_nearest_exact2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "_upsample_bilinear2d_aa",
    "upsample_trilinear3d",
    "upsample_bicubic2d",
    "_upsample_bicubic2d_aa",
)

#: if the first argument is eligible and ``dtype`` was not given, call with
#: ``dtype=torch.float32`` (inputs are not cast) (AT_FORALL_FP32_SET_OPT_DTYPE).
CUDA_FP32_SET_OPT_DTYPE: tuple[str, ...] = (
    "prod",
    "prod.dim_int",
    "softmax.int",
    "log_softmax.int",
    "cumprod",
    "cumsum",
    "linalg_vector_norm",
    "linalg_matrix_norm",
    "linalg_matrix_norm.str_ord",
    "sum",
    "sum.dim_IntList",
)

#: redispatch to the overload taking ``dtype`` with float32 (or the input's
#: own dtype when it is not eligible) (AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE).
CUDA_FP32_APPEND_DTYPE: dict[str, str] = {
    "norm.Scalar": "norm.ScalarOpt_dtype",
    "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
}

#: run in the widest floating dtype among the arguments (AT_FORALL_PROMOTE).
CUDA_PROMOTE: tuple[str, ...] = (
    "addcdiv",
    "addcmul",
    "atan2",
    "bilinear",
    "cross",
    "dot",
    "vdot",
    "grid_sampler",
    "index_put",
    "tensordot",
    "scatter_add",
)

#: raise under CUDA autocast (``binary_cross_entropy_banned``).
CUDA_BANNED: tuple[str, ...] = ("binary_cross_entropy",)

_BCE_BANNED_MSG = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using "
    "torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast."
)

_KEY = "AutocastCPU"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_F32 = torch.float32


# --------------------------------------------------------------------------
# helpers mirroring at::autocast (is_eligible / cached_cast / prioritize)
# --------------------------------------------------------------------------


def _overload(name: str) -> torch._ops.OpOverload:
    op, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, op), ov or "default")


def _eligible(t: Any) -> bool:
    """at::autocast::is_eligible for device CPU: a defined floating CPU (or
    mkldnn) tensor that is not float64."""
    return (
        isinstance(t, torch.Tensor)
        and t.is_floating_point()
        and (t.device.type == "cpu" or t.is_mkldnn)
        and t.dtype is not torch.float64
    )


def _cast(x: Any, dtype: torch.dtype) -> Any:
    """at::autocast::cached_cast (without the weight cache); recurses one
    level into lists/tuples (TensorList, Tensor?[])."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if _eligible(x) and x.dtype is not dtype else x
    if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
        return type(x)(_cast(e, dtype) for e in x)
    return x


def _iter_tensors(args: tuple, kwargs: dict) -> Iterator[torch.Tensor]:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for e in a:
                if isinstance(e, torch.Tensor):
                    yield e


def _promote_type(args: tuple, kwargs: dict) -> torch.dtype:
    """at::autocast::promote_type/prioritize (CUDA semantics)."""
    lp = torch.get_autocast_dtype("cpu")
    current = lp
    for t in _iter_tensors(args, kwargs):
        if not _eligible(t):  # also skips float64
            continue
        if current is _F32 or t.dtype is _F32:
            current = _F32
        elif current is lp and t.dtype is lp:
            current = lp
        else:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


# --------------------------------------------------------------------------
# kernel factories (one per CastPolicy)
# --------------------------------------------------------------------------


def _k_cast_to(op, dtype_fn: Callable[[], torch.dtype]) -> Callable:
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            dt = dtype_fn()
            args = tuple(_cast(a, dt) for a in args)
            kwargs = {k: _cast(v, dt) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    return kernel


def _k_fp32(op) -> Callable:
    return _k_cast_to(op, lambda: _F32)


def _k_lower_precision(op) -> Callable:
    return _k_cast_to(op, lambda: torch.get_autocast_dtype("cpu"))


def _k_promote(op) -> Callable:
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            dt = _promote_type(args, kwargs)
            args = tuple(_cast(a, dt) for a in args)
            kwargs = {k: _cast(v, dt) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    return kernel


def _k_fp32_set_opt_dtype(op) -> Callable:
    schema_args = op._schema.arguments
    idx = next(i for i, a in enumerate(schema_args) if a.name == "dtype")
    kwarg_only = schema_args[idx].kwarg_only

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            if args and _eligible(args[0]):
                if not kwarg_only and len(args) > idx:
                    if args[idx] is None:
                        args = args[:idx] + (_F32,) + args[idx + 1 :]
                elif kwargs.get("dtype") is None:
                    kwargs = {**kwargs, "dtype": _F32}
            return op(*args, **kwargs)

    return kernel


def _k_fp32_append_dtype(op, target) -> Callable:
    # Trailing defaulted args are omitted by the dispatcher when it calls a
    # Python kernel; fill them in because the target overload has no defaults.
    defaults = [a.default_value for a in op._schema.arguments]

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            full = list(args) + defaults[len(args) :]
            self = full[0]
            out_type = _F32 if _eligible(self) else self.dtype
            return target(*full, dtype=out_type)

    return kernel


def _k_banned(op) -> Callable:
    def kernel(*args, **kwargs):
        raise RuntimeError(_BCE_BANNED_MSG)

    return kernel


def _build_table(full_table: bool, ban_bce: bool) -> list[tuple[str, Callable]]:
    table: list[tuple[str, Callable]] = []
    for n in CUDA_FP32:
        table.append((n, _k_fp32(_overload(n))))
    for n in CUDA_FP32_SET_OPT_DTYPE:
        table.append((n, _k_fp32_set_opt_dtype(_overload(n))))
    for n, target in CUDA_FP32_APPEND_DTYPE.items():
        table.append((n, _k_fp32_append_dtype(_overload(n), _overload(target))))
    for n in CUDA_PROMOTE:
        table.append((n, _k_promote(_overload(n))))
    if ban_bce:
        for n in CUDA_BANNED:
            table.append((n, _k_banned(_overload(n))))
    if full_table:
        covered = {n for n, _ in table} | set(CUDA_BANNED)
        for n in CUDA_LOWER_PRECISION_FP:
            table.append((n, _k_lower_precision(_overload(n))))
            covered.add(n)
        # CPU-only autocast rules -> fallthrough (CUDA autocast ignores these ops)
        for qual in _cpu_autocast_ops():
            if qual not in covered:
                table.append((qual, torch.library.fallthrough_kernel))
    return table


def _registered_ops(key: str) -> list[str]:
    out = []
    for q in torch._C._dispatch_get_all_op_names():
        if q.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(q, key):
            out.append(q[len("aten::") :])
    return sorted(out)


def _cpu_autocast_ops() -> list[str]:
    """Ops with a kernel for ``AutocastCPU`` right now (call outside the block)."""
    return _registered_ops(_KEY)


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------

_lock = threading.Lock()


@contextlib.contextmanager
def cuda_autocast_rules(
    *, ban_binary_cross_entropy: bool = True, full_table: bool = True
) -> Iterator[None]:
    """Within the block, CPU autocast applies CUDA autocast's float32 rules.

    Use together with ``torch.autocast("cpu", dtype=torch.bfloat16)`` (or
    ``torch.float16``); outside a CPU autocast region nothing changes.

    For the duration of the ``with`` block these ``aten`` overloads get a
    Python ``AutocastCPU`` kernel with CUDA's policy:

    * :data:`CUDA_FP32` - floating inputs cast to float32, output float32
      (exp, log, pow, layer_norm, group_norm, rms_norm, losses, ...);
    * :data:`CUDA_FP32_SET_OPT_DTYPE` - ``dtype=float32`` unless given
      (softmax.int, log_softmax.int, sum, sum.dim_IntList, cumsum, prod, ...);
    * :data:`CUDA_FP32_APPEND_DTYPE` - ``norm.Scalar``/``norm.ScalarOpt_dim``;
    * :data:`CUDA_PROMOTE` - widest floating input dtype (index_put,
      scatter_add, addcmul, ...);
    * :data:`CUDA_BANNED` - ``binary_cross_entropy`` raises, as on CUDA
      (disable with ``ban_binary_cross_entropy=False``).

    With ``full_table=True`` (the default) it also applies CUDA's
    lower-precision list (adds e.g. ``mv``, ``addmv``, ``einsum``, RNN cells)
    and turns every CPU-only autocast rule (fft/linalg fp32 casts, cat/stack/
    index_copy promotion, ...) into a fallthrough, so the ``AutocastCPU`` table
    equals CUDA's table. ``full_table=False`` keeps CPU autocast's own rules
    beside CUDA's fp32 ones; it hid the ∞-former's fp32 ``index_copy`` of a
    bf16 fit, which failed on an H100 (2026-11-26).

    Kernels are removed on exit (also on exceptions) and the previously
    registered kernels become active again.  Blocks may be nested: per op
    the innermost registration wins, and an op the inner block does not
    register (e.g. ``binary_cross_entropy`` with ``ban_binary_cross_entropy=
    False``) keeps the outer block's kernel.  Registration is process-global.
    """
    table = _build_table(full_table, ban_binary_cross_entropy)
    lib = torch.library.Library("aten", "IMPL")
    try:
        with _lock, warnings.catch_warnings():
            # one-time C++ warning when replacing CPU autocast's own kernels
            warnings.filterwarnings(
                "ignore", message="Warning only once for all operators", category=UserWarning
            )
            for name, kernel in table:
                lib.impl(name, kernel, _KEY)
        yield
    finally:
        with _lock:
            lib._destroy()


def check_tables_against_installed_torch() -> dict[str, list[str]]:
    """Compare the hard-coded CUDA table with the ``AutocastCUDA`` kernels of
    the running torch (registered even in CPU-only builds).  Returns
    ``{"missing": [...], "extra": [...]}``; both empty means the table matches.
    Must be called outside :func:`cuda_autocast_rules`."""
    ours = set(CUDA_LOWER_PRECISION_FP) | set(_CUDA_ONLY_OPS) | set(CUDA_FP32)
    ours |= set(CUDA_FP32_SET_OPT_DTYPE) | set(CUDA_FP32_APPEND_DTYPE)
    ours |= set(CUDA_PROMOTE) | set(CUDA_BANNED)
    ours = {n[: -len(".default")] if n.endswith(".default") else n for n in ours}
    theirs = set(_registered_ops("AutocastCUDA"))
    return {"missing": sorted(theirs - ours), "extra": sorted(ours - theirs)}
