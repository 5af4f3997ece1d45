"""scaled_dot_product_attention with the semantics of PyTorch 2.x's
torch.nn.functional.scaled_dot_product_attention, on seqattn's dense kernel.

Where it differs from PyTorch, on purpose and documented:
- a row whose keys are all masked out is 0 (seqattn's convention; PyTorch's math reference
  returns NaN there before version 2.5, and 0 from 2.5 on);
- dropout_p != 0 raises NotImplementedError (seqattn has no training path), as do more than
  four axes;
- nothing is differentiable: tensors that autograd tracks are refused (use torch.no_grad()).
"""

import math

import numpy as np

from . import _seqattn
from ._arrays import check_kind, check_no_grad, empty, is_bool, is_torch, zeros
from ._errors import ArgumentTypeError, InvalidArgumentError, NotImplementedFeatureError
from ._options import make_options


def _expand(a, shape):
    """A stride-0 broadcast view (no copy)."""
    if tuple(a.shape) == tuple(shape):
        return a
    return a.expand(*shape) if is_torch(a) else np.broadcast_to(a, shape)


def _broadcast(name, sizes):
    out = max(sizes)
    for s in sizes:
        if s not in (1, out):
            raise InvalidArgumentError(name, "sizes that broadcast", str(sizes))
    return out


def _top_left_causal(like, seq_q, seq_k):
    """PyTorch's is_causal mask when S_q != S_k: key j visible to query i iff j <= i."""
    if is_torch(like):
        import torch

        return torch.ones(seq_q, seq_k, dtype=torch.bool).tril()
    return np.tril(np.ones((seq_q, seq_k), dtype=bool))


def _float_mask(attn_mask, query):
    """An additive mask as the float32 bias the kernel adds (a copy only for half dtypes)."""
    if attn_mask.dtype != query.dtype:
        raise ArgumentTypeError("attn_mask", f"bool or the query's dtype {query.dtype}",
                                str(attn_mask.dtype))
    if is_torch(attn_mask):
        return attn_mask.float()  # no copy when already float32
    return attn_mask.astype(np.float32, copy=False)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query keyᵀ·scale + attn_mask) value, as PyTorch 2.x defines it.

    query (N, H_q, L, E), key (N, H, S, E), value (N, H, S, E_v); (N, L, E) and (L, E) too.
    attn_mask: bool (True = takes part) or additive of the query's dtype, broadcastable to
    (N, H_q, L, S). is_causal: key j visible to query i iff j <= i (top-left, also when
    L != S); it excludes attn_mask. enable_gqa: H divides H_q and query head h reads key head
    h // (H_q / H). Leading axes broadcast as in torch.matmul, through stride-0 views.
    """
    for name, a in (("query", query), ("key", key), ("value", value)):
        check_kind(name, a)
    check_no_grad(query=query, key=key, value=value)
    if dropout_p != 0.0:
        raise NotImplementedFeatureError("dropout_p", "0.0 (seqattn has no dropout)",
                                         str(dropout_p))
    if is_causal and attn_mask is not None:
        raise InvalidArgumentError("attn_mask", "None when is_causal=True (PyTorch refuses both)",
                                   "a mask")
    rank = query.ndim
    if rank not in (2, 3, 4) or key.ndim != rank or value.ndim != rank:
        shapes = tuple(tuple(a.shape) for a in (query, key, value))
        raise InvalidArgumentError("query, key, value", "2, 3 or 4 axes each, the same number",
                                   f"shapes {shapes}")
    q = query[(None,) * (4 - rank)] if rank < 4 else query
    k = key[(None,) * (4 - rank)] if rank < 4 else key
    v = value[(None,) * (4 - rank)] if rank < 4 else value
    n = _broadcast("batch axis of query, key, value", [q.shape[0], k.shape[0], v.shape[0]])
    h_k = _broadcast("head axis of key, value", [k.shape[1], v.shape[1]])
    h_q = q.shape[1]
    if enable_gqa:
        if h_k == 0 or h_q % h_k != 0:
            raise InvalidArgumentError("key.shape[-3]",
                                       f"a divisor of query's {h_q} heads (enable_gqa)", str(h_k))
    elif h_k != 1:
        h_q = _broadcast("head axis of query, key", [h_q, h_k])
        h_k = h_q
    seq_q, seq_k, e_v = q.shape[2], k.shape[2], v.shape[3]
    out_shape = (n, h_q, seq_q, e_v)[4 - rank:]  # the inserted axes dropped again
    if min(n, h_q, seq_q, e_v) == 0:
        return empty(query, out_shape)
    if seq_k == 0:
        return zeros(query, out_shape)  # no key: the rows are 0, as for fully masked rows
    q = _expand(q, (n, h_q, seq_q, q.shape[3]))
    k = _expand(k, (n, h_k, seq_k, k.shape[3]))
    v = _expand(v, (n, h_k, seq_k, e_v))
    keep = bias = None
    causal = False
    if is_causal:
        if seq_q == seq_k:
            causal = True
        else:
            keep = _top_left_causal(query, seq_q, seq_k)[None, None]
    elif attn_mask is not None:
        check_kind("attn_mask", attn_mask)
        if attn_mask.ndim > 4:
            raise InvalidArgumentError("attn_mask", "at most 4 axes", str(tuple(attn_mask.shape)))
        m = attn_mask[(None,) * (4 - attn_mask.ndim)]
        if is_bool(m):
            keep = m
        else:
            bias = _float_mask(m, query)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3]) if q.shape[3] > 0 else 1.0
    opts = make_options("dense", causal=causal, scale=scale)
    out = empty(query, (n, h_q, seq_q, e_v))
    _seqattn.attend(q, k, v, out, opts, mask=keep, bias=bias, lse=None, weights=None,
                    layout="bhsd")
    return out[(0,) * (4 - rank)] if rank < 4 else out
