"""seqattn: fast CPU attention (dense flash-style, sliding window, linear, Linformer, hierarchical).

Every function takes numpy arrays or torch tensors (float32, float16; bfloat16 tensors) with
any strides, reads them in place, and returns the kind it was given. The GIL is released while
the kernels run. Errors are seqattn.Error subclasses that keep the kind, the argument, what was
expected and what was given, and derive from ValueError / TypeError (NotImplementedError for an
unbuilt feature, OSError for a file) as before (see _errors.py).
"""

from . import _seqattn
from ._errors import (ArgumentTypeError, Error, FileError, InvalidArgumentError,
                      NotImplementedFeatureError, UnsupportedError)
from ._arrays import as_4d, check_kind, check_no_grad, empty, from_rank4, integer, scores_4d
from ._mha import MultiHeadAttention
from ._options import make_options, parameters_doc, variant_parameters
from ._plan import KvCache, PagedKvCache, Plan, plan
from ._sdpa import scaled_dot_product_attention

__version__ = _seqattn.__version__  # CMake's project version, as the installed metadata's
__all__ = ["attention", "scaled_dot_product_attention", "MultiHeadAttention", "plan", "Plan",
           "KvCache", "PagedKvCache", "select", "simd_target", "bf16_compute_path", "RunRecord", "variant_parameters",
           "lsh_random_rotations", "Error",
           "InvalidArgumentError", "ArgumentTypeError", "UnsupportedError",
           "NotImplementedFeatureError", "FileError", "__version__"]

RunRecord = _seqattn.RunRecord


def simd_target():
    """The SIMD target the kernels dispatch to on this CPU, e.g. 'highway:AVX3'."""
    return _seqattn.simd_target()


def bf16_compute_path():
    """(path, reason): the compute path bfloat16 operands take on this CPU ('amx-bf16',
    'avx512-bf16', or 'fp32' when they are widened exactly to float32) and why. The
    SEQATTN_COMPUTE_PATH environment variable (auto, fp32, amx-bf16, avx512-bf16) forces one."""
    return _seqattn.bf16_compute_path()


def lsh_random_rotations(hashes, dim, buckets, seed=0):
    """LSH attention's rotations R drawn from `seed`, float32 [hashes, dim, buckets // 2]: what
    variant="lsh" uses when no `rotations=` is given (the C++ lsh_random_rotations)."""
    return _seqattn.lsh_random_rotations(
        integer("hashes", hashes, 1, 2**63 - 1), integer("dim", dim, 1, 2**63 - 1),
        integer("buckets", buckets, -2**63, 2**63 - 1), integer("seed", seed, 0, 2**64 - 1))


def select(seq, profile=None):
    """The policy's choice for a key sequence of length `seq`: (variant, reason).

    Without `profile` the reference document's thresholds apply (dense up to 512 tokens,
    sliding window up to 2048, linear beyond); `profile` is a JSON file written by
    `seqattn calibrate`.
    """
    return _seqattn.select(integer("seq", seq, 1, 2**63 - 1), profile)


def attention(q, k, v, *, variant="dense", causal=False, key_lengths=None, mask=None, bias=None,
              scale=None, return_lse=False, return_weights=False, threads=0, layout="bhsd",
              out=None, return_record=False, profile=None, max_error=None, rope=None, alibi=None,
              fp32_precision="ieee", **params):
    """out = softmax(q kᵀ·scale + mask) v over the chosen variant.

    q [B, H_q, S_q, D], k [B, H_kv, S_k, D], v [B, H_kv, S_k, D_v] with layout="bhsd"
    (PyTorch's), or [B, S, H, D] with layout="bshd"; [B, S, D] and [S, D] mean one head (one
    sequence). H_q must be a multiple of H_kv (grouped-query attention).

    variant: a name from the library's variant table (listed with its parameters below) or
    "auto" (the policy, or `profile`, which then chooses the parameters too). **params: the chosen variant's parameters, e.g.
    window=256, proj_len=128, block=64 (None = the variant's default); one the variant does not
    take is a ValueError naming it. causal: key j visible to query i iff j <= i + S_k - S_q (aligned at the end).
    key_lengths: per-batch number of valid keys. mask: boolean, True = visible, broadcastable
    to the scores [B, H_q, S_q, S_k]; bias: float32 added to the scaled scores (dense).
    scale: default 1/sqrt(D) (linear elu1/relu: none, see the C++ LinearSpec). max_error:
    with variant="auto" and a calibrated profile, the fastest variant within this error.
    rope: rotary embeddings applied inside the kernel (dense, sliding-window): a theta, or a
    dict(theta=10000, dims=0 (all D), layout="halves" | "interleaved", offset=0,
    linear_scaling=1, q_positions=None, k_positions=None). alibi: True (the published slopes),
    a sequence of per-head slopes, or dict(slopes=None, form="causal" | "symmetric").
    rotations (variant="lsh"): its R as a float32 array [hashes, D, buckets // 2] or
    [hashes * D, buckets // 2] (default: lsh_random_rotations(hashes, D, buckets, seed)).
    fp32_precision: "ieee" (exact fp32, the default) or "bf16" (float32 q, k, v are rounded
    to bfloat16 first and take the bf16 compute path; record.compute_path says which ran).

    Returns out (shaped like q with D_v), followed by lse [B, H_q, S_q] (float32) if
    return_lse, the weights [B, H_q, S_q, S_k] (float32) if return_weights, and the
    RunRecord (variant, reason, flops, bytes, seconds, threads, simd_target, compute_path;
    decode_prefetch, None here, says what a cache run prefetched) if return_record. out= writes into
    a given array (same shape as the result, any strides, not overlapping an input).
    """
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_kind(name, a)
    check_no_grad(q=q, k=k, v=v, out=out)
    if layout not in ("bhsd", "bshd"):
        raise InvalidArgumentError("layout", "'bhsd' or 'bshd'", repr(layout))
    rank = q.ndim
    q4, k4, v4 = as_4d("q", q, layout), as_4d("k", k, layout), as_4d("v", v, layout)
    for name, a in (("k", k), ("v", v)):
        if a.ndim != rank:
            raise InvalidArgumentError(name, f"{rank} axes like q", f"shape {tuple(a.shape)}")
    b, s_q = q4.shape[0], q4.shape[2 if layout == "bhsd" else 1]
    h_q = q4.shape[1 if layout == "bhsd" else 2]
    s_k = k4.shape[2 if layout == "bhsd" else 1]
    d_v = v4.shape[3]
    shape = (b, h_q, s_q, d_v) if layout == "bhsd" else (b, s_q, h_q, d_v)
    result = empty(q, shape) if out is None else out
    if out is not None:
        check_kind("out", out)
        if out.ndim != rank:
            raise InvalidArgumentError("out", f"{rank} axes like q", f"shape {tuple(out.shape)}")
    lse = empty(q, (b, h_q, s_q), float32=True) if return_lse else None
    weights = empty(q, (b, h_q, s_q, s_k), float32=True) if return_weights else None
    opts = make_options(variant, causal, key_lengths, scale, threads, profile, max_error, rope,
                        alibi, fp32_precision=fp32_precision, **params)
    record = _seqattn.attend(
        q4, k4, v4, result if out is None else as_4d("out", out, layout), opts,
        mask=None if mask is None else scores_4d("mask", mask, rank),
        bias=None if bias is None else scores_4d("bias", bias, rank),
        lse=lse, weights=weights, layout=layout)
    extra = []
    if return_lse:
        extra.append(lse if rank == 4 else (lse[:, 0] if rank == 3 else lse[0, 0]))
    if return_weights:
        extra.append(weights if rank == 4 else (weights[:, 0] if rank == 3 else weights[0, 0]))
    if return_record:
        extra.append(record)
    if out is None:
        result = from_rank4(result, rank, layout)
    return tuple([result] + extra) if extra else result


attention.__doc__ += "\n    " + parameters_doc().replace("\n", "\n    ") + "\n"
