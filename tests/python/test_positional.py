"""RoPE and ALiBi from Python: against numpy float64 with the encodings applied explicitly,
the KV cache's decode, and the argument errors."""

import numpy as np
import pytest

import seqattn
from conftest import hierarchical_float64, randn, reference


def rotate(x, positions, theta=10000.0, dims=None, layout="halves"):
    """x [..., S, D] rotated pair by pair at positions [S], in float64."""
    x = np.array(x, dtype=np.float64)
    d = x.shape[-1]
    dims = d if not dims else dims
    half = dims // 2
    freq = theta ** (-2.0 * np.arange(half) / dims)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * freq[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    if layout == "halves":
        i0, i1 = np.arange(half), np.arange(half) + half
    else:
        i0, i1 = 2 * np.arange(half), 2 * np.arange(half) + 1
    a, b = x[..., i0].copy(), x[..., i1].copy()
    x[..., i0] = a * cos - b * sin
    x[..., i1] = a * sin + b * cos
    return x


def published_slopes(heads):
    n = 2 ** int(np.floor(np.log2(heads)))
    base = [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]
    extra = [2.0 ** (-4.0 * (2 * k - 1) / n) for k in range(1, heads - n + 1)]
    return np.array(base + extra)


@pytest.mark.parametrize("layout", ["halves", "interleaved"])
@pytest.mark.parametrize("dims", [0, 8])
def test_rope_matches_explicit_rotation(rng, layout, dims):
    q, k, v = randn(rng, 2, 4, 7, 32), randn(rng, 2, 2, 19, 32), randn(rng, 2, 2, 19, 32)
    rope = dict(theta=500.0, dims=dims, layout=layout, offset=3)
    out = seqattn.attention(q, k, v, causal=True, rope=rope)
    pos_q, pos_k = 3 + 12 + np.arange(7), 3 + np.arange(19)
    want = reference(rotate(q, pos_q, 500.0, dims, layout), rotate(k, pos_k, 500.0, dims, layout),
                     v, causal=True)
    np.testing.assert_allclose(out, want, atol=1e-5)
    assert np.abs(out - seqattn.attention(q, k, v, causal=True)).max() > 1e-3


def test_rope_in_linear_attention_rotates_before_the_feature_map(rng):
    q, k, v = randn(rng, 1, 2, 30, 16), randn(rng, 1, 2, 30, 16), randn(rng, 1, 2, 30, 16)
    rope = dict(theta=100.0, layout="interleaved", offset=5)
    pos = 5 + np.arange(30)
    phi = [np.where(a > 0, a + 1.0, np.exp(a))
           for a in (rotate(q, pos, 100.0, None, "interleaved"),
                     rotate(k, pos, 100.0, None, "interleaved"))]
    num = phi[0] @ (phi[1].transpose(0, 1, 3, 2) @ v)
    den = phi[0] @ phi[1].sum(2)[..., None] + 1e-6
    np.testing.assert_allclose(seqattn.attention(q, k, v, variant="linear", rope=rope), num / den,
                               atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_rope_in_hierarchical_attention_rotates_before_averaging(rng, causal):
    q, k, v = randn(rng, 1, 2, 70, 16), randn(rng, 1, 2, 70, 16), randn(rng, 1, 2, 70, 8)
    rope = dict(theta=50.0, dims=8, layout="interleaved", offset=7)
    pos = 7 + np.arange(70)
    rq, rk = (rotate(2 * x, pos, 50.0, 8, "interleaved") for x in (q, k))
    out = seqattn.attention(2 * q, 2 * k, v, variant="hierarchical", block=4, causal=causal,
                            rope=rope)
    np.testing.assert_allclose(out, hierarchical_float64(rq, rk, v, 4, causal), atol=1e-5)
    plain = seqattn.attention(2 * q, 2 * k, v, variant="hierarchical", block=4, causal=causal)
    assert np.abs(out - plain).max() > 1e-3


def test_alibi_equals_the_explicit_bias(rng):
    h, s = 12, 40
    q, k, v = randn(rng, 1, h, s, 16), randn(rng, 1, 4, s, 16), randn(rng, 1, 4, s, 16)
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    slopes = published_slopes(h)[:, None, None]
    np.testing.assert_allclose(seqattn.attention(q, k, v, causal=True, alibi=True),
                               reference(q, k, v, causal=True, bias=-slopes * (i - j)), atol=1e-5)
    np.testing.assert_allclose(seqattn.attention(q, k, v, alibi=True),  # symmetric, non-causal
                               reference(q, k, v, bias=-slopes * np.abs(i - j)), atol=1e-5)
    given = np.linspace(0.05, 0.6, h)
    np.testing.assert_allclose(
        seqattn.attention(q, k, v, alibi=dict(slopes=list(given), form="causal")),
        reference(q, k, v, bias=-given[:, None, None] * (i - j)), atol=1e-5)


def test_cache_decode_with_rope_and_alibi_equals_full_attention(rng):
    h, h_kv, d, prompt, steps = 4, 2, 32, 11, 4
    total = prompt + steps
    q, k, v = randn(rng, 1, h, total, d), randn(rng, 1, h_kv, total, d), randn(rng, 1, h_kv, total, d)
    rope = dict(theta=10000.0, layout="interleaved")
    cache = seqattn.KvCache(1, h_kv, total, d, rope=rope)
    step = seqattn.plan(cache=cache, heads_q=h, seq_q=1, causal=True, rope=rope, alibi=True)
    cache.append(k[:, :, :prompt], v[:, :, :prompt])
    outs = []
    for t in range(prompt, total):
        cache.append(k[:, :, t:t + 1], v[:, :, t:t + 1])
        outs.append(step.run(q[:, :, t:t + 1], cache=cache))
    full = seqattn.attention(q, k, v, causal=True, rope=rope, alibi=True)
    np.testing.assert_allclose(np.concatenate(outs, axis=2), full[:, :, prompt:], atol=1e-5)
    with pytest.raises(ValueError, match="options.rope"):  # a plan without the cache's rope
        seqattn.plan(cache=cache, heads_q=h, seq_q=1, causal=True).run(q[:, :, :1], cache=cache)


def test_bad_positional_arguments(rng):
    q = randn(rng, 1, 2, 5, 8)
    with pytest.raises(TypeError, match="rope"):
        seqattn.attention(q, q, q, rope="10000")
    with pytest.raises(ValueError, match="options.rope.theta"):
        seqattn.attention(q, q, q, rope=0.0)
    with pytest.raises(ValueError, match="options.rope.dims"):
        seqattn.attention(q, q, q, rope=dict(dims=3))
    with pytest.raises(ValueError, match="unknown key"):
        seqattn.attention(q, q, q, rope=dict(base=10.0))
    with pytest.raises(ValueError, match="layout"):
        seqattn.attention(q, q, q, rope=dict(layout="neox"))
    with pytest.raises(ValueError, match="options.alibi.slopes"):
        seqattn.attention(q, q, q, alibi=[0.5])
    with pytest.raises(ValueError, match="form"):
        seqattn.attention(q, q, q, alibi=dict(form="left"))
    with pytest.raises(ValueError, match="options.alibi"):  # no key distance to bias
        seqattn.attention(q, q, q, variant="linear", alibi=True)


def test_mha_layer_with_sinusoidal_rope_and_alibi(rng):
    torch = pytest.importorskip("torch")
    e, h, b, s = 32, 4, 2, 20
    torch.manual_seed(3)
    m = torch.nn.MultiheadAttention(e, h, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    x = randn(rng, b, s, e)
    rope = dict(theta=1000.0, dims=4)
    ours = seqattn.MultiHeadAttention.from_torch(m, rope=rope, alibi=True, causal=True,
                                                 sinusoidal_positions=True)
    pos, c = np.arange(s), np.arange(e)
    angle = pos[:, None] * 10000.0 ** (-(c - c % 2) / e)[None, :]
    xe = x.astype(np.float64) + np.where(c % 2 == 0, np.sin(angle), np.cos(angle))
    w = m.in_proj_weight.detach().numpy().astype(np.float64)
    bias = m.in_proj_bias.detach().numpy().astype(np.float64)
    q, k, v = ((xe @ w[i * e:(i + 1) * e].T + bias[i * e:(i + 1) * e])
               .reshape(b, s, h, e // h).transpose(0, 2, 1, 3) for i in range(3))
    i, j = pos[:, None], pos[None, :]
    att = reference(rotate(q, pos, 1000.0, 4), rotate(k, pos, 1000.0, 4), v, causal=True,
                    bias=-published_slopes(h)[:, None, None] * (i - j))
    wo = m.out_proj.weight.detach().numpy().astype(np.float64)
    want = att.transpose(0, 2, 1, 3).reshape(b, s, e) @ wo.T + m.out_proj.bias.detach().numpy()
    np.testing.assert_allclose(ours(x), want, atol=1e-5)
    plain = seqattn.MultiHeadAttention.from_torch(m, causal=True)
    assert np.abs(plain(x) - ours(x)).max() > 1e-2  # the encodings are not dropped
    with pytest.raises(ValueError, match="scale"):
        seqattn.MultiHeadAttention.from_torch(m, scale=0.5)
