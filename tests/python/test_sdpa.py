"""seqattn.scaled_dot_product_attention against PyTorch 2.x's documented definition.

PyTorch 1.13 (Debian's) has no scaled_dot_product_attention, so `sdpa_definition` writes the
2.x documentation's reference formula in float64: the top-left causal mask tril(ones(L, S)),
boolean masks where True takes part, additive float masks, repeat_interleave for enable_gqa,
and broadcasting of the leading axes as torch.matmul does.
"""

import math

import pytest
import torch

import seqattn


def sdpa_definition(query, key, value, attn_mask=None, is_causal=False, scale=None,
                    enable_gqa=False):
    q, k, v = query.double(), key.double(), value.double()
    L, S = q.size(-2), k.size(-2)
    scale_factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    attn_bias = torch.zeros(L, S, dtype=torch.float64)
    if is_causal:
        attn_bias.masked_fill_(torch.ones(L, S, dtype=torch.bool).tril().logical_not(),
                               float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_bias = attn_bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            attn_bias = attn_mask.double() + attn_bias
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    w = q @ k.transpose(-2, -1) * scale_factor + attn_bias
    return torch.softmax(w, dim=-1) @ v


def close(ours, want, atol=2e-6):
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours.double(), want, atol=atol, rtol=0)


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(11)


@pytest.mark.parametrize("L,S", [(7, 7), (5, 13), (13, 5), (1, 9)])
def test_is_causal_is_top_left(L, S):
    q, k, v = torch.randn(2, 3, L, 16), torch.randn(2, 3, S, 16), torch.randn(2, 3, S, 8)
    close(seqattn.scaled_dot_product_attention(q, k, v, is_causal=True),
          sdpa_definition(q, k, v, is_causal=True))


@pytest.mark.parametrize("mask_shape", [(9, 11), (2, 1, 9, 11), (2, 4, 9, 11), (1, 11), (9, 1)])
def test_boolean_and_additive_masks_broadcast(mask_shape):
    q, k, v = torch.randn(2, 4, 9, 8), torch.randn(2, 4, 11, 8), torch.randn(2, 4, 11, 8)
    keep = torch.rand(mask_shape) > 0.25
    keep[..., 0] = True  # every row keeps a key (fully masked rows are tested below)
    close(seqattn.scaled_dot_product_attention(q, k, v, attn_mask=keep),
          sdpa_definition(q, k, v, attn_mask=keep))
    additive = torch.randn(mask_shape)
    close(seqattn.scaled_dot_product_attention(q, k, v, attn_mask=additive, scale=0.5),
          sdpa_definition(q, k, v, attn_mask=additive, scale=0.5))


def test_three_and_two_axes():
    q, k, v = torch.randn(3, 6, 8), torch.randn(3, 10, 8), torch.randn(3, 10, 4)
    m = torch.rand(3, 6, 10) > 0.2
    m[..., 0] = True
    out = seqattn.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert out.shape == (3, 6, 4)
    close(out, sdpa_definition(q, k, v, attn_mask=m))
    close(seqattn.scaled_dot_product_attention(q[0], k[0], v[0], is_causal=True),
          sdpa_definition(q[0], k[0], v[0], is_causal=True))


def test_enable_gqa_and_broadcast_heads_and_batch():
    q, k, v = torch.randn(2, 8, 5, 16), torch.randn(2, 2, 7, 16), torch.randn(2, 2, 7, 16)
    close(seqattn.scaled_dot_product_attention(q, k, v, enable_gqa=True),
          sdpa_definition(q, k, v, enable_gqa=True))
    with pytest.raises(ValueError, match="head axis"):
        seqattn.scaled_dot_product_attention(q, k, v)  # 8 vs 2 heads do not broadcast
    k1, v1 = k[:1, :1], v[:1, :1]  # one key head and one batch, broadcast by matmul's rules
    close(seqattn.scaled_dot_product_attention(q, k1, v1), sdpa_definition(q, k1, v1))
    with pytest.raises(ValueError, match="divisor"):
        seqattn.scaled_dot_product_attention(q, torch.randn(2, 3, 7, 16), torch.randn(2, 3, 7, 16),
                                             enable_gqa=True)


def test_fully_masked_rows_are_zero_where_pytorch_math_gives_nan():
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    keep = torch.ones(4, 6, dtype=torch.bool)
    keep[2] = False
    ours = seqattn.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    want = sdpa_definition(q, k, v, attn_mask=keep)
    assert torch.isnan(want[:, :, 2]).all()  # the documented difference (PyTorch < 2.5)
    assert (ours[:, :, 2] == 0).all()
    rows = [0, 1, 3]
    close(ours[:, :, rows], want[:, :, rows])


def test_half_dtypes_with_their_own_float_mask():
    q, k, v = torch.randn(1, 2, 16, 32), torch.randn(1, 2, 16, 32), torch.randn(1, 2, 16, 32)
    bias = torch.randn(16, 16)
    want = sdpa_definition(q, k, v, attn_mask=bias)
    for dtype, atol in ((torch.bfloat16, 5e-2), (torch.float16, 5e-3)):
        args = [a.to(dtype) for a in (q, k, v)]
        out = seqattn.scaled_dot_product_attention(*args, attn_mask=bias.to(dtype))
        assert out.dtype == dtype
        torch.testing.assert_close(out.double(), want, atol=atol, rtol=0)
        with pytest.raises(TypeError, match="attn_mask"):
            seqattn.scaled_dot_product_attention(*args, attn_mask=bias)  # float32 vs half


def test_refusals_and_empty_shapes():
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        seqattn.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="is_causal"):
        seqattn.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4) > 0,
                                             is_causal=True)
    assert seqattn.scaled_dot_product_attention(q[:, :, :0], q, q).shape == (1, 2, 0, 8)
    no_keys = seqattn.scaled_dot_product_attention(q, q[:, :, :0], q[:, :, :0])
    assert no_keys.shape == (1, 2, 4, 8) and (no_keys == 0).all()


def test_strided_views_are_read_in_place():
    base = torch.randn(2, 12, 4, 16)  # [B, S, H, D] activations
    q = base.transpose(1, 2)  # a [B, H, S, D] view, not contiguous
    assert not q.is_contiguous()
    seen = seqattn._seqattn.inspect(q)
    assert seen["data"] == q.data_ptr() and seen["strides"] == q.stride()
    close(seqattn.scaled_dot_product_attention(q, q, q, is_causal=True),
          sdpa_definition(q, q, q, is_causal=True))
