"""Shared float64 references and input generators for the Python package's tests."""

import math
import os
import subprocess

import numpy as np
import pytest


def reference(q, k, v, scale=None, keep=None, bias=None, causal=False, key_lengths=None):
    """softmax(q kᵀ·scale + bias, hidden keys excluded) v in float64, [B, H, S, D] arrays.

    GQA: query head h reads key head h // (H_q / H_kv). A row with no visible key is 0."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    b, h_q, s_q, d = q.shape
    h_kv, s_k = k.shape[1], k.shape[2]
    k = np.repeat(k, h_q // h_kv, axis=1)
    v = np.repeat(v, h_q // h_kv, axis=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = q @ k.transpose(0, 1, 3, 2) * scale
    visible = np.ones((b, h_q, s_q, s_k), dtype=bool)
    if causal:
        visible &= np.tril(np.ones((s_q, s_k), dtype=bool), k=s_k - s_q)
    if key_lengths is not None:
        for i, n in enumerate(key_lengths):
            visible[i, :, :, n:] = False
    if keep is not None:
        visible &= np.broadcast_to(np.asarray(keep, dtype=bool), visible.shape)
    if bias is not None:
        s = s + np.asarray(bias, dtype=np.float64)
    s = np.where(visible, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    den = p.sum(-1, keepdims=True)
    out = np.divide(p, den, out=np.zeros_like(p), where=den > 0) @ v
    return out


def randn(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


@pytest.fixture
def cli():
    """The C++ command line (the library's own results), or a skip that says why."""
    path = os.environ.get("SEQATTN_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("SEQATTN_CLI is not set to the seqattn binary (ctest sets it when the CLI "
                    "is built)")

    def run(tmp_path, arrays, *flags):
        args = [path, "run"]
        for name, a in arrays.items():
            np.save(tmp_path / f"{name}.npy", a)
            args += [f"--{name}", str(tmp_path / f"{name}.npy")]
        args += ["--out", str(tmp_path / "out.npy"), *flags]
        subprocess.run(args, check=True, capture_output=True)
        return np.load(tmp_path / "out.npy")

    return run
