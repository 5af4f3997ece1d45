"""seqattn.attention against the float64 reference and against the C++ library's own results."""

import numpy as np
import pytest
import torch

import seqattn
from conftest import (hierarchical_float64, key_lengths_for, keyword_value, randn, reference,
                      variant_cases, variant_rows)


@pytest.mark.parametrize("s_q,s_k,d", [(1, 1, 1), (3, 17, 3), (17, 80, 80), (80, 3, 17)])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_matches_float64_on_odd_shapes(rng, s_q, s_k, d, causal):
    q, k, v = randn(rng, 2, 3, s_q, d), randn(rng, 2, 3, s_k, d), randn(rng, 2, 3, s_k, 5)
    out, lse = seqattn.attention(q, k, v, causal=causal, return_lse=True)
    want = reference(q, k, v, causal=causal)
    np.testing.assert_allclose(out, want, atol=2e-6)
    assert out.dtype == np.float32 and out.shape == (2, 3, s_q, 5) and lse.shape == (2, 3, s_q)


def test_gqa_key_lengths_mask_bias_scale(rng):
    q, k, v = randn(rng, 2, 8, 19, 16), randn(rng, 2, 2, 23, 16), randn(rng, 2, 2, 23, 7)
    keep = rng.random((2, 1, 19, 23)) > 0.3
    bias = randn(rng, 1, 8, 19, 23)
    out = seqattn.attention(q, k, v, key_lengths=[23, 11], mask=keep, bias=bias, scale=0.3)
    want = reference(q, k, v, scale=0.3, keep=keep, bias=bias, key_lengths=[23, 11])
    np.testing.assert_allclose(out, want, atol=3e-6)


def test_ranks_and_bshd_layout(rng):
    q, k, v = randn(rng, 9, 4), randn(rng, 12, 4), randn(rng, 12, 4)
    np.testing.assert_allclose(seqattn.attention(q, k, v),
                               reference(q[None, None], k[None, None], v[None, None])[0, 0],
                               atol=2e-6)
    q3, k3, v3 = randn(rng, 2, 9, 4), randn(rng, 2, 12, 4), randn(rng, 2, 12, 4)
    np.testing.assert_allclose(seqattn.attention(q3, k3, v3),
                               reference(q3[:, None], k3[:, None], v3[:, None])[:, 0], atol=2e-6)
    # [B, S, H, D] memory: the projected activation split into heads, read in place.
    qs, ks, vs = randn(rng, 2, 9, 3, 8), randn(rng, 2, 12, 3, 8), randn(rng, 2, 12, 3, 8)
    out = seqattn.attention(qs, ks, vs, layout="bshd", causal=True)
    assert out.shape == (2, 9, 3, 8)
    want = reference(*(a.transpose(0, 2, 1, 3) for a in (qs, ks, vs)), causal=True)
    np.testing.assert_allclose(out, want.transpose(0, 2, 1, 3), atol=2e-6)


def test_half_precision_numpy_and_torch(rng):
    q, k, v = randn(rng, 1, 2, 33, 16), randn(rng, 1, 2, 33, 16), randn(rng, 1, 2, 33, 16)
    want = reference(q, k, v)
    out16 = seqattn.attention(*(a.astype(np.float16) for a in (q, k, v)))
    assert out16.dtype == np.float16
    np.testing.assert_allclose(out16.astype(np.float32), want, atol=5e-3)
    tb = [torch.from_numpy(a).bfloat16() for a in (q, k, v)]
    outb = seqattn.attention(*tb)
    assert outb.dtype == torch.bfloat16
    np.testing.assert_allclose(outb.float().numpy(), want, atol=4e-2)


def test_torch_in_torch_out_and_record(rng):
    q = torch.from_numpy(randn(rng, 1, 2, 8, 8))
    out, rec = seqattn.attention(q, q, q, return_record=True, threads=1)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert rec.variant == "dense" and rec.threads == 1 and rec.flops > 0 and rec.seconds > 0
    assert rec.reason and rec.simd_target == seqattn.simd_target()


def test_fp32_precision_bf16_equals_the_run_on_bf16_rounded_inputs(rng):
    q, k, v = (torch.from_numpy(randn(rng, 2, 4, 19, 24)) for _ in range(3))
    rounded = [t.bfloat16().float() for t in (q, k, v)]
    want, rec_ieee = seqattn.attention(*rounded, causal=True, return_record=True)
    got, rec = seqattn.attention(q, k, v, causal=True, fp32_precision="bf16", return_record=True)
    assert torch.equal(got, want)
    assert rec.compute_path == seqattn.bf16_compute_path()[0]
    assert rec_ieee.compute_path == "fp32" and "compute_path='fp32'" in repr(rec_ieee)
    exact = seqattn.attention(q, k, v, causal=True)  # the default is exact fp32
    assert not torch.equal(exact, want)
    path, reason = seqattn.bf16_compute_path()
    assert path in ("fp32", "amx-bf16", "avx512-bf16") and reason
    p = seqattn.plan(heads_q=4, seq_q=19, dim=24, seq_k=19, batch=2, heads_kv=4,
                     fp32_precision="bf16", causal=True)
    assert torch.equal(p.run(q, k, v), want)
    with pytest.raises(seqattn.InvalidArgumentError, match="fp32_precision"):
        seqattn.attention(q, k, v, fp32_precision="tf32")
    with pytest.raises(seqattn.ArgumentTypeError, match="fp32_precision"):
        seqattn.attention(q, k, v, fp32_precision=True)


def test_forced_emulated_tile_path_runs_bf16_on_tiles(rng, monkeypatch):
    q, k, v = (torch.from_numpy(randn(rng, 1, 2, 40, 32)).bfloat16() for _ in range(3))
    widened, rec = seqattn.attention(q, k, v, causal=True, return_record=True)
    assert rec.compute_path == seqattn.bf16_compute_path()[0]
    monkeypatch.setenv("SEQATTN_COMPUTE_PATH", "amx-emulated")
    assert seqattn.bf16_compute_path() == ("amx-emulated",
                                           "forced by SEQATTN_COMPUTE_PATH=amx-emulated")
    tiles, rec = seqattn.attention(q, k, v, causal=True, return_record=True)
    assert rec.compute_path == "amx-emulated"
    np.testing.assert_allclose(tiles.float().numpy(), widened.float().numpy(), atol=2e-2)
    monkeypatch.setenv("SEQATTN_COMPUTE_PATH", "tiles")
    with pytest.raises(seqattn.InvalidArgumentError, match="SEQATTN_COMPUTE_PATH"):
        seqattn.attention(q, k, v)


def test_select_and_simd_target():
    assert seqattn.select(100)[0] == "dense"
    assert seqattn.select(1000)[0] == "sliding-window"
    variant, reason = seqattn.select(5000)
    assert variant == "linear" and "2048" in reason
    assert seqattn.simd_target().split(":")[0] in ("highway", "xsimd")


def test_auto_runs_what_select_says(rng):
    q = randn(rng, 1, 2, 600, 8)
    out, rec = seqattn.attention(q, q, q, variant="auto", return_record=True)
    assert rec.variant == seqattn.select(600)[0]


def test_variant_keywords_come_from_the_table(rng):
    table = seqattn.variant_parameters()
    assert list(table) == ["dense", "sliding-window", "linear", "linformer", "hierarchical", "lsh"]
    assert table["lsh"]["qk"][0] == "name"
    assert table["hierarchical"]["block"][0] == "integer"
    assert table["sliding-window"]["global_tokens"][0] == "integers"
    assert table["linear"]["epsilon"][0] == "number"
    for variant, parameters in table.items():  # the docstring is generated from the table
        assert variant in seqattn.attention.__doc__
        for name in parameters:
            assert name in seqattn.attention.__doc__
    q = randn(rng, 1, 2, 40, 8)
    # A parameter of another variant is refused by name, never dropped.
    with pytest.raises(ValueError, match="window"):
        seqattn.attention(q, q, q, variant="dense", window=16)
    with pytest.raises(ValueError, match="window"):
        seqattn.attention(q, q, q, variant="auto", window=16)
    with pytest.raises(TypeError, match="windw"):
        seqattn.attention(q, q, q, variant="sliding-window", windw=16)
    # A parameter added to a row is a keyword with no change to the package: epsilon (linear,
    # elu1) was never listed in Python.
    small = seqattn.attention(q, q, q, variant="linear", epsilon=1e-6)
    large = seqattn.attention(q, q, q, variant="linear", epsilon=1e3)
    assert not np.allclose(small, large)


CASES = variant_cases()  # every case every row of the variant table declares


@pytest.mark.parametrize("variant,case,row", CASES,
                         ids=[f"{v}-{c['name']}" for v, c, _ in CASES])
def test_every_variant_equals_the_cpp_library(rng, tmp_path, cli, variant, case, row):
    """The keywords and the CLI's flags both come from the row's parameters (the table's names
    and kinds): the same call through both gives the same bits."""
    kinds = {name: kind for name, (kind, _) in seqattn.variant_parameters()[variant].items()}
    kwargs = {name: keyword_value(kinds[name], text) for name, text in case["params"].items()}
    flags = [f for name, text in case["params"].items()
             for f in ("--" + name.replace("_", "-"), text)]
    s_q = 40 if "S_q != S_k" in row["unsupported"] else 29  # self-attention-only rows: S_q = S_k
    q, k, v = randn(rng, 2, 4, s_q, 16), randn(rng, 2, 2, 40, 16), randn(rng, 2, 2, 40, 12)
    if case.get("causal"):
        kwargs["causal"] = True
        flags.append("--causal")
    if case.get("key_lengths"):
        lengths = key_lengths_for(2, 40)
        kwargs["key_lengths"] = lengths
        flags += ["--key-lengths", ",".join(map(str, lengths))]
    ours = seqattn.attention(q, k, v, variant=variant, threads=1, **kwargs)
    theirs = cli(tmp_path, {"q": q, "k": k, "v": v}, "--variant", variant, "--threads", "1",
                 *flags)
    # The same kernels on the same inputs and thread count: bit for bit.
    np.testing.assert_array_equal(ours, theirs)
    if variant == "dense":
        np.testing.assert_allclose(ours, reference(q, k, v, **kwargs), atol=2e-6)


def test_the_package_lists_the_rows_of_the_table():
    assert list(seqattn.variant_parameters()) == [name for name, _, _ in variant_rows()]


def test_linear_and_sliding_window_against_float64(rng):
    q, k, v = randn(rng, 1, 2, 50, 8), randn(rng, 1, 2, 50, 8), randn(rng, 1, 2, 50, 8)
    band = np.abs(np.arange(50)[:, None] - np.arange(50)[None, :]) <= 4
    band[:, 0] = band[0, :] = True  # global token 0
    np.testing.assert_allclose(
        seqattn.attention(q, k, v, variant="sliding-window", window=4, global_tokens=[0]),
        reference(q, k, v, keep=band), atol=2e-6)
    phi = [np.where(a > 0, a + 1.0, np.exp(a)).astype(np.float64) for a in (q, k)]
    num = phi[0] @ (phi[1].transpose(0, 1, 3, 2) @ v)
    den = phi[0] @ phi[1].sum(2)[..., None] + 1e-6
    np.testing.assert_allclose(seqattn.attention(q, k, v, variant="linear"), num / den,
                               atol=2e-6)


@pytest.mark.parametrize("block,causal,levels", [(4, False, 0), (6, True, 0), (2, False, 2),
                                                 (8, True, 1)])
def test_hierarchical_against_float64(rng, block, causal, levels):
    q, k, v = randn(rng, 2, 4, 75, 8), randn(rng, 2, 2, 75, 8), randn(rng, 2, 2, 75, 5)
    q, k = 2 * q, 2 * k  # peaked enough that the level structure matters
    out = seqattn.attention(q, k, v, variant="hierarchical", block=block, levels=levels,
                            causal=causal)
    np.testing.assert_allclose(out, hierarchical_float64(q, k, v, block, causal, levels),
                               atol=3e-6)


def test_hierarchical_refuses_what_it_cannot_honour(rng):
    q, k = randn(rng, 1, 1, 9, 8), randn(rng, 1, 1, 12, 8)
    with pytest.raises(ValueError, match="S_q"):
        seqattn.attention(q, k, k, variant="hierarchical")
    with pytest.raises(ValueError, match="hierarchical.block"):
        seqattn.attention(k, k, k, variant="hierarchical", block=5)
    with pytest.raises(ValueError, match="options.alibi"):
        seqattn.attention(k, k, k, variant="hierarchical", alibi=True)


def test_lsh_rotations_given_equal_the_seeded_ones(rng):
    q, v = randn(rng, 1, 2, 40, 8), randn(rng, 1, 2, 40, 8)
    seeded = seqattn.attention(q, q, v, variant="lsh", hashes=2, buckets=6, chunk_length=4, seed=5)
    r = seqattn.lsh_random_rotations(2, 8, 6, seed=5)
    assert r.dtype == np.float32 and r.shape == (2, 8, 3)
    for given in (r, r.reshape(16, 3)):
        out = seqattn.attention(q, q, v, variant="lsh", chunk_length=4, hashes=2, rotations=given)
        np.testing.assert_array_equal(out, seeded)
    p = seqattn.plan(heads_q=2, seq_q=40, seq_k=40, dim=8, variant="lsh", hashes=2,
                     chunk_length=4, rotations=r.copy())
    np.testing.assert_array_equal(p.run(q, q, v), seeded)  # the plan copied R


def test_lsh_rotations_refusals(rng):
    q = randn(rng, 1, 1, 9, 4)
    with pytest.raises(seqattn.UnsupportedError) as e:
        seqattn.attention(q, q, q, rotations=np.zeros((4, 1), np.float32))
    assert e.value.argument == "rotations"
    with pytest.raises(seqattn.InvalidArgumentError) as e:
        seqattn.attention(q, q, q, variant="lsh", hashes=1, rotations=np.zeros((5, 1), np.float32))
    assert e.value.argument == "lsh.rotations"
    with pytest.raises(seqattn.ArgumentTypeError) as e:
        seqattn.attention(q, q, q, variant="lsh", rotations=np.zeros((4, 2), np.float64))
    assert e.value.argument == "rotations"
    with pytest.raises(seqattn.InvalidArgumentError) as e:
        seqattn.attention(q, q, q, variant="lsh", rotations=np.zeros((2, 4, 2), np.float32))
    assert e.value.argument == "rotations"  # shape[0] = 2 rounds, hashes = 4
