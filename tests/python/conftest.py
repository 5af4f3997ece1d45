"""Shared float64 references and input generators for the Python package's tests."""

import json
import math
import os
import pathlib
import re
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

def hierarchical_float64(q, k, v, block, causal=False, levels=0):
    """H-Transformer-1D from its definition, in numpy float64: each pair (i, j) at the finest
    level l whose blocks of block·2^l positions holding i and j are equal or adjacent, scored
    with the means of the 2^l-token groups of j's keys and i's queries (i's own query when
    causal), one softmax over all of them, values v_j."""
    b, h, s, d = q.shape
    group = h // k.shape[1]
    needed = 0
    while s > 2 * block * 2 ** needed:
        needed += 1
    top = needed if levels == 0 else min(levels, needed)
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    level = np.full((s, s), -1)
    for lv in range(top + 1):
        size = block << lv
        hit = (level < 0) & (np.abs(i // size - j // size) <= 1)
        level[hit] = lv
    q64, k64, v64 = (np.asarray(x, np.float64) for x in (q, k, v))
    k64 = np.repeat(k64, group, axis=1)
    v64 = np.repeat(v64, group, axis=1)
    scores = np.full((b, h, s, s), -np.inf)
    for lv in range(top + 1):
        n = 2 ** lv
        pad = (-s) % n
        def means(x):
            x = np.concatenate([x, np.full(x.shape[:2] + (pad, d), np.nan)], axis=2)
            return np.nanmean(x.reshape(b, h, -1, n, d), axis=3)
        kbar = means(k64)[:, :, j[0] // n]
        qbar = q64 if causal else means(q64)[:, :, i[:, 0] // n]
        s_l = np.einsum("bhid,bhjd->bhij", qbar, kbar) / np.sqrt(d)
        scores = np.where(level == lv, s_l, scores)
    if causal:
        scores = np.where(j <= i, scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v64



SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
_ROW = re.compile(r'^SEQATTN_VARIANT\((\w+), "([^"]+)", (\w+), (\w+)\)', re.M)


def variant_rows():
    """The rows of the variant table (include/seqattn/variant_list.inc), in its order, each
    with the test cases its folder declares (variants/<stem>/test_cases.json):
    [(name, stem, declaration)], read as CMake and the C++ suites read them."""
    table = (SOURCE_DIR / "include/seqattn/variant_list.inc").read_text()
    rows = []
    for _, name, _, stem in _ROW.findall(table):
        with open(SOURCE_DIR / "variants" / stem / "test_cases.json") as f:
            rows.append((name, stem, json.load(f)))
    return rows


def variant_cases():
    """Every declared case of every row: (variant, case, row), case["params"] as text."""
    return [(name, c, row) for name, _, row in variant_rows() for c in row["cases"]]


def keyword_value(kind, text):
    """A parameter's text (as the table writes it) as the Python keyword value of its kind."""
    if kind in ("integer", "unsigned"):
        return int(text)
    if kind == "integers":
        return [int(t) for t in text.split(",") if t]
    if kind == "number":
        return float(text)
    return text


def key_lengths_for(batch, seq_k):
    """The suites' padding (tests/support/variant_test_rows.cpp): S_k, S_k // 2 + 1, ..."""
    return [seq_k if b % 2 == 0 else seq_k // 2 + 1 for b in range(batch)]


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
