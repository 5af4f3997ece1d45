"""MultiHeadAttention: the documents' transformer layer over any seqattn variant, loadable from
a torch.nn.MultiheadAttention."""

import numpy as np

from . import _seqattn
from ._arrays import check_kind, check_no_grad, empty, is_bool, is_torch, logical_not
from ._errors import NotImplementedFeatureError
from ._options import make_options


def _contiguous(a):
    if is_torch(a):
        return a.contiguous()
    return np.ascontiguousarray(a)


def _as_float32(m):
    return m.float() if is_torch(m) else m.astype(np.float32)


def _half_dtype(a):
    """a's dtype when it is bfloat16 or float16 (torch; numpy has float16 only), else None."""
    if is_torch(a):
        import torch
        return a.dtype if a.dtype in (torch.bfloat16, torch.float16) else None
    return a.dtype if getattr(a, "dtype", None) == np.float16 else None


def _widened(a):
    """a in float32: half-precision weights and inputs are widened exactly (the C++ layer keeps
    fp32 weights; a tile path rounds them back to bf16, exactly for a bf16 module's)."""
    return _as_float32(a) if _half_dtype(a) is not None else a


def _is_bf16(a):
    return is_torch(a) and str(a.dtype) == "torch.bfloat16"


class MultiHeadAttention:
    """out = concat_h(attention(x W_Qh, x W_Kh, x W_Vh)) W_O, on seqattn's kernels.

    MultiHeadAttention(embed_dim, num_heads, *, bias=True, batch_first=False,
    num_kv_heads=None, output_projection=True, sinusoidal_positions=False, **options): options
    are attention()'s (variant, window, feature_map, threads, rope, alibi, ...; not scale: the
    layer scales by 1/sqrt(d_k) as nn.MultiheadAttention does). sinusoidal_positions adds
    Vaswani et al.'s encoding (positions 0..S-1) to a copy of the inputs before the
    projections; rope and alibi act inside attention. Load weights with from_torch(module) or
    set_weights(); forward() computes no gradients (run it under torch.no_grad()).
    Inputs that are not [B, S, E] row-major (batch_first=False with B > 1, or a strided view)
    are copied once into that layout; attention itself reads the projections in place.
    """

    def __init__(self, embed_dim, num_heads, *, bias=True, batch_first=False, num_kv_heads=None,
                 output_projection=True, sinusoidal_positions=False, **options):
        self.embed_dim = int(embed_dim)
        self.num_heads = int(num_heads)
        self.batch_first = bool(batch_first)
        self.bias = bool(bias)
        self._options = options
        self._compiled = {}  # causal flag -> Options: built once, not on every forward()
        self._layer = _seqattn.MultiHeadAttention(
            self.embed_dim, self.num_heads, int(num_kv_heads or 0), self.bias,
            bool(output_projection), bool(sinusoidal_positions),
            self._options_for(options.get("causal", False)))

    @classmethod
    def from_torch(cls, module, **options):
        """A copy of a torch.nn.MultiheadAttention's weights (bias or not, batch_first or not).

        add_bias_kv, add_zero_attn and kdim/vdim != embed_dim raise NotImplementedError."""
        if module.bias_k is not None or module.add_zero_attn:
            raise NotImplementedFeatureError(
                "module", "no add_bias_kv or add_zero_attn", "a module with them",
                "module: add_bias_kv and add_zero_attn are not supported")
        if not module._qkv_same_embed_dim:
            raise NotImplementedFeatureError(
                "module", "kdim = vdim = embed_dim", "other kdim/vdim",
                "module: kdim/vdim different from embed_dim are not supported")
        e = module.embed_dim
        has_bias = module.in_proj_bias is not None
        layer = cls(e, module.num_heads, bias=has_bias, batch_first=module.batch_first, **options)
        w = module.in_proj_weight.detach()
        layer.set_weights(q=w[:e], k=w[e:2 * e], v=w[2 * e:],
                          o=module.out_proj.weight.detach())
        if has_bias:
            b = module.in_proj_bias.detach()
            layer.set_biases(q=b[:e], k=b[e:2 * e], v=b[2 * e:],
                             o=module.out_proj.bias.detach())
        return layer

    def set_weights(self, *, q=None, k=None, v=None, o=None):
        """Copies projection weights stored as PyTorch's nn.Linear does: [out, in]."""
        for which, w in (("q", q), ("k", k), ("v", v), ("o", o)):
            if w is not None:
                check_kind(f"{which} weight", w)
                self._layer.set_weight(which, _contiguous(_widened(w)))

    def set_biases(self, *, q=None, k=None, v=None, o=None):
        for which, b in (("q", q), ("k", k), ("v", v), ("o", o)):
            if b is not None:
                check_kind(f"{which} bias", b)
                self._layer.set_bias(which, _contiguous(_widened(b)))

    def _masks(self, key_padding_mask, attn_mask, b, s_q, s_k):
        """nn.MultiheadAttention's masks (True = hidden, or additive) as seqattn's keep mask
        (True = visible) and float32 bias, [B|1, H|1, S_q, S_k]."""
        keeps, biases = [], []

        def add(name, m):
            check_kind(name, m)
            if is_bool(m):
                keeps.append(logical_not(m))
            else:
                biases.append(_as_float32(m))

        if key_padding_mask is not None:
            add("key_padding_mask", key_padding_mask.reshape(b, 1, 1, s_k))
        if attn_mask is not None:
            add("attn_mask", attn_mask.reshape(1, 1, s_q, s_k) if attn_mask.ndim == 2 else
                attn_mask.reshape(b, self.num_heads, s_q, s_k))
        keep = keeps[0] if len(keeps) == 1 else (keeps[0] & keeps[1] if keeps else None)
        bias = biases[0] if len(biases) == 1 else (biases[0] + biases[1] if biases else None)
        return keep, bias

    def _options_for(self, causal):
        causal = bool(causal)
        if causal not in self._compiled:
            self._compiled[causal] = make_options(**dict(self._options, causal=causal))
        return self._compiled[causal]

    def _batch_major(self, a, unbatched):
        """[B, S, E] row-major, as the layer reads it (a copy only when a is not)."""
        if unbatched:
            a = a[None]
        elif not self.batch_first:
            a = a.transpose(0, 1) if is_torch(a) else np.swapaxes(a, 0, 1)
        return _contiguous(a)

    def forward(self, x, key_padding_mask=None, attn_mask=None, *, need_weights=False,
                average_attn_weights=True, is_causal=False, x_kv=None):
        """Self-attention of x ([B, S, E] with batch_first, else [S, B, E]; [S, E] unbatched),
        or cross attention to x_kv. Masks as nn.MultiheadAttention takes them:
        key_padding_mask [B, S_k] and attn_mask [S_q, S_k] or [B·H, S_q, S_k], True = hidden
        (or additive floats). Returns out, or (out, weights) with need_weights. bfloat16 x
        (and x_kv) run the layer as a bf16 layer (the C++ forward on bf16: on an AMX tile path
        its GEMMs and attention in bf16, elsewhere the fp32 layer on the widened values); float16
        x is widened exactly and runs in fp32 (its attention by the layer's fp32_precision). out
        comes back in x's dtype, rounded once; weights are float32."""
        check_kind("x", x)
        check_no_grad(x=x, x_kv=x_kv)
        if x_kv is not None:
            check_kind("x_kv", x_kv)
        half = _half_dtype(x)
        as_bf16 = _is_bf16(x) and (x_kv is None or _is_bf16(x_kv))
        if not as_bf16:
            x = _widened(x)
            if x_kv is not None:
                x_kv = _widened(x_kv)
        unbatched = x.ndim == 2
        xs = [self._batch_major(a, unbatched) for a in ([x] if x_kv is None else [x, x_kv])]
        xq = xs[0]
        xk = xs[-1]
        b, s_q, s_k = xq.shape[0], xq.shape[1], xk.shape[1]
        keep, bias = self._masks(key_padding_mask, attn_mask, b, s_q, s_k)
        opts = self._options_for(is_causal or self._options.get("causal", False))
        out = empty(xq, (b, s_q, self.embed_dim))
        weights = (empty(xq, (b, self.num_heads, s_q, s_k), float32=True) if need_weights
                   else None)
        self._layer.forward(xq, None if x_kv is None else xk, out, opts, mask=keep, bias=bias,
                            weights=weights)
        if unbatched:
            out = out[0]
        elif not self.batch_first:
            out = out.transpose(0, 1) if is_torch(out) else np.swapaxes(out, 0, 1)
        if half is not None and not as_bf16:
            out = out.to(half) if is_torch(out) else out.astype(half)
        if not need_weights:
            return out
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights[0] if unbatched else weights)

    __call__ = forward
