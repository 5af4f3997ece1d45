"""seqattn.MultiHeadAttention.from_torch against torch.nn.MultiheadAttention itself."""

import numpy as np
import pytest
import torch

import seqattn


def torch_mha(bias, batch_first, e=32, h=4):
    torch.manual_seed(5)
    m = torch.nn.MultiheadAttention(e, h, bias=bias, batch_first=batch_first).eval()
    if bias:  # PyTorch initialises the biases to 0; make them matter
        with torch.no_grad():
            m.in_proj_bias.normal_()
            m.out_proj.bias.normal_()
    return m


def reference(m, x, **kwargs):
    """The module's own result on its general path (grad mode on keeps 1.13 off its fast path,
    which fails for bias=False)."""
    with torch.enable_grad():
        out, w = m(x, x, x, **kwargs)
    return out.detach(), (None if w is None else w.detach())


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
@torch.no_grad()
def test_matches_torch_with_padding_and_attention_masks(bias, batch_first):
    m = torch_mha(bias, batch_first)
    ours = seqattn.MultiHeadAttention.from_torch(m)
    b, s = 3, 10
    x = torch.randn(b, s, 32) if batch_first else torch.randn(s, b, 32)
    pad = torch.zeros(b, s, dtype=torch.bool)
    pad[1, 7:] = True
    pad[2, 3:] = True
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)  # True = not allowed
    want = reference(m, x, key_padding_mask=pad, attn_mask=causal, need_weights=False)[0]
    torch.testing.assert_close(ours(x, key_padding_mask=pad, attn_mask=causal), want,
                               atol=2e-6, rtol=0)
    plain = reference(m, x, need_weights=False)[0]
    torch.testing.assert_close(ours(x), plain, atol=2e-6, rtol=0)
    out, w = ours(x, key_padding_mask=pad, need_weights=True)
    want_out, want_w = reference(m, x, key_padding_mask=pad)
    torch.testing.assert_close(out, want_out, atol=2e-6, rtol=0)
    torch.testing.assert_close(w, want_w, atol=2e-6, rtol=0)


@torch.no_grad()
def test_float_and_per_head_masks_and_unbatched_input():
    m = torch_mha(True, True)
    ours = seqattn.MultiHeadAttention.from_torch(m)
    x = torch.randn(2, 6, 32)
    additive = torch.randn(2 * 4, 6, 6)  # [B·H, S, S]
    want = reference(m, x, attn_mask=additive, need_weights=False)[0]
    torch.testing.assert_close(ours(x, attn_mask=additive), want, atol=3e-6, rtol=0)
    per_head = torch.rand(2 * 4, 6, 6) > 0.3
    per_head[..., 0] = False  # every row keeps key 0
    want = reference(m, x, attn_mask=per_head, need_weights=False)[0]
    torch.testing.assert_close(ours(x, attn_mask=per_head), want, atol=2e-6, rtol=0)
    single = x[0]
    torch.testing.assert_close(ours(single), reference(m, single, need_weights=False)[0],
                               atol=2e-6, rtol=0)


@torch.no_grad()
def test_numpy_input_and_other_variants():
    m = torch_mha(True, True)
    x = torch.randn(1, 40, 32)
    want = reference(m, x, need_weights=False)[0].numpy()
    ours = seqattn.MultiHeadAttention.from_torch(m)
    np.testing.assert_allclose(ours(x.numpy()), want, atol=2e-6)
    wide = seqattn.MultiHeadAttention.from_torch(m, variant="sliding-window", window=64)
    np.testing.assert_allclose(wide(x.numpy()), want, atol=2e-6)  # the band covers all keys
    lin = seqattn.MultiHeadAttention.from_torch(m, variant="linear")
    assert lin(x).shape == (1, 40, 32)


def test_refuses_what_it_cannot_load_and_tracked_tensors():
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        seqattn.MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(NotImplementedError, match="kdim"):
        seqattn.MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    ours = seqattn.MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2))
    with pytest.raises(ValueError, match="requires_grad"):
        ours(torch.randn(3, 1, 8, requires_grad=True))
    with pytest.raises(ValueError, match="d_model"):
        ours(torch.randn(3, 1, 6))


@torch.no_grad()
def test_a_bf16_module_loads_and_bf16_inputs_come_back_bf16():
    m = torch_mha(True, True)
    torch.manual_seed(11)
    x = torch.randn(2, 9, 32)
    want = reference(m, x, need_weights=False)[0]
    half = seqattn.MultiHeadAttention.from_torch(m.bfloat16(), fp32_precision="bf16")
    out = half(x.bfloat16())
    assert out.dtype == torch.bfloat16 and out.shape == want.shape
    # bf16 weights, inputs, q/k/v, P and out against the fp32 module: within bf16's rounding.
    scale = want.abs().max().item()
    assert (out.float() - want).abs().max().item() <= 3e-2 * scale
    out32 = half(x.bfloat16().float())
    assert out32.dtype == torch.float32
    assert torch.equal(out32.bfloat16(), out)  # the same fp32 computation, rounded once


@torch.no_grad()
def test_a_bf16_module_on_the_emulated_amx_tiles_agrees_with_torch_in_bf16(monkeypatch):
    """bf16 x runs the C++ layer as a bf16 layer: on a tile path (the AMX emulation, forced) its
    GEMMs and attention take bf16 operands, as torch's own bf16 module does."""
    monkeypatch.setenv("SEQATTN_COMPUTE_PATH", "amx-emulated")
    try:
        seqattn.bf16_compute_path()
    except seqattn.Error as e:
        pytest.skip(f"no tile path in this build: {e}")
    m = torch_mha(True, True).bfloat16()
    torch.manual_seed(12)
    x = torch.randn(2, 9, 32).bfloat16()
    want = reference(m, x, need_weights=False)[0]  # torch's bf16 module
    ours = seqattn.MultiHeadAttention.from_torch(m)
    out = ours(x)
    assert out.dtype == torch.bfloat16 and out.shape == want.shape
    scale = want.float().abs().max().item()
    assert (out.float() - want.float()).abs().max().item() <= 3e-2 * scale
    # The same layer run as fp32 with fp32_precision="bf16": the same bits, rounded once.
    as_f32 = seqattn.MultiHeadAttention.from_torch(m, fp32_precision="bf16")
    assert torch.equal(as_f32(x.float()).bfloat16(), out)
