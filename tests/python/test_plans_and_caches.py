"""Plans and KV caches from Python: decode equals attention over the whole sequence."""

import re
import threading
import time

import numpy as np
import pytest
import torch

import seqattn
from conftest import randn, reference


def test_plan_runs_like_attention(rng):
    p = seqattn.plan(batch=2, heads_q=4, heads_kv=2, seq_q=9, seq_k=20, dim=16, causal=True)
    assert p.variant == "dense" and p.shape["seq_k"] == 20
    q, k, v = randn(rng, 2, 4, 9, 16), randn(rng, 2, 2, 20, 16), randn(rng, 2, 2, 20, 16)
    out, lse, rec = p.run(q, k, v, return_lse=True, return_record=True)
    np.testing.assert_array_equal(out, seqattn.attention(q, k, v, causal=True))
    np.testing.assert_allclose(out, reference(q, k, v, causal=True), atol=2e-6)
    assert lse.shape == (2, 4, 9) and rec.variant == "dense"
    with pytest.raises(ValueError, match="as planned"):
        p.run(q[:, :, :8], k, v)


def test_one_plan_serves_any_mask_and_key_lengths(rng):
    p = seqattn.plan(heads_q=1, seq_q=6, seq_k=6, dim=8, batch=2)
    q = randn(rng, 2, 1, 6, 8)
    for _ in range(2):
        keep = rng.random((1, 1, 6, 6)) > 0.4
        keep[..., 0] = True
        np.testing.assert_allclose(p(q, q, q, mask=keep), reference(q, q, q, keep=keep),
                                   atol=2e-6)
    for lengths in ([6, 2], [1, 5]):
        np.testing.assert_allclose(p(q, q, q, key_lengths=lengths),
                                   reference(q, q, q, key_lengths=lengths), atol=2e-6)
    bias = rng.standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(p(q, q, q, bias=bias), reference(q, q, q, bias=bias), atol=2e-6)


def test_cache_run_refuses_per_call_masks(rng):
    """The wrapper refuses them (the C++ refusal is tested in test_kv_cache_errors.cpp)."""
    cache = seqattn.KvCache(1, 1, 8, 8)
    x = randn(rng, 1, 1, 2, 8)
    cache.append(x, x)
    p = seqattn.plan(cache=cache, heads_q=1, seq_q=1)
    for name, value in (("key_lengths", [1]), ("mask", np.ones((1, 1, 1, 2), bool)),
                        ("bias", np.zeros((1, 1, 1, 2), np.float32))):
        with pytest.raises(seqattn.UnsupportedError, match=f"^{name}: "):
            p.run(x[:, :, :1], cache=cache, **{name: value})


def test_plan_refuses_per_call_options():
    for name, value in (("key_lengths", [3]), ("mask", np.ones((1, 1, 6, 6), bool)),
                        ("bias", np.zeros((1, 1, 6, 6), np.float32))):
        with pytest.raises(seqattn.InvalidArgumentError, match=f"^{name}: .*Plan.run"):
            seqattn.plan(heads_q=1, seq_q=6, seq_k=6, dim=8, **{name: value})


@pytest.mark.parametrize("dtype,atol", [("float32", 2e-6), ("bfloat16", 2e-2),
                                        (torch.float16, 3e-3), ("int8", 3e-2)])
def test_decode_over_a_cache_equals_causal_attention(rng, dtype, atol):
    h, h_kv, d, prompt, steps = 4, 2, 32, 13, 5
    total = prompt + steps
    q, k, v = randn(rng, 1, h, total, d), randn(rng, 1, h_kv, total, d), randn(rng, 1, h_kv, total, d)
    cache = seqattn.KvCache(1, h_kv, total, d, dtype=dtype)
    assert cache.shape["dtype"] in ("float32", "bfloat16", "float16", "int8")
    step = seqattn.plan(cache=cache, heads_q=h, seq_q=1, causal=True)
    cache.append(k[:, :, :prompt], v[:, :, :prompt])
    outs = []
    for t in range(prompt, total):
        cache.append(k[:, :, t:t + 1], v[:, :, t:t + 1])
        outs.append(step.run(q[:, :, t:t + 1], cache=cache))
    assert cache.length(0) == total
    want = reference(q, k, v, causal=True)[:, :, prompt:]
    np.testing.assert_allclose(np.concatenate(outs, axis=2), want, atol=atol)


def test_cache_refusals_change_nothing(rng):
    cache = seqattn.KvCache(1, 2, 4, 8)
    k = randn(rng, 1, 2, 3, 8)
    cache.append(k, k)
    with pytest.raises(ValueError, match="capacity"):
        cache.append(k, k)  # 3 + 3 > 4
    assert cache.length(0) == 3
    with pytest.raises(ValueError, match="v"):
        cache.append(k, k[..., :4])
    assert cache.length(0) == 3
    with pytest.raises(ValueError, match="dtype"):
        seqattn.KvCache(1, 2, 4, 8, dtype="int4")
    i8 = seqattn.KvCache(1, 2, 4, 8, dtype="int8")
    bad = k.copy()
    bad[0, 1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite value in batch 0, kv head 1, token 2"):
        i8.append(bad, k)
    assert i8.length(0) == 0
    with pytest.raises(ValueError, match="capacity"):
        seqattn.KvCache(1, 2, 0, 8)
    cache.clear()
    assert cache.length(0) == 0 and cache.nbytes > 0


def test_appends_and_runs_from_two_threads(rng):
    h_kv, d, n = 2, 16, 200
    k, v = randn(rng, 1, h_kv, n, d), randn(rng, 1, h_kv, n, d)
    q = randn(rng, 1, h_kv, 1, d)
    cache = seqattn.KvCache(1, h_kv, n, d)
    cache.append(k[:, :, :1], v[:, :, :1])
    p = seqattn.plan(cache=cache, heads_q=h_kv, seq_q=1)
    errors = []

    def appender():
        for t in range(1, n):
            cache.append(k[:, :, t:t + 1], v[:, :, t:t + 1])

    def reader():
        try:
            for _ in range(300):
                out = p.run(q, cache=cache)
                assert np.isfinite(out).all()
        except Exception as e:  # reported below, not swallowed
            errors.append(e)

    threads = [threading.Thread(target=appender), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    np.testing.assert_allclose(p.run(q, cache=cache), reference(q, k, v), atol=2e-6)


def test_records_say_which_cache_the_decode_prefetches_filled(rng):
    """A run over a KvCache or a PagedKvCache records the decode kernel's prefetch level (one
    per process: this CPU's, or SEQATTN_DECODE_PREFETCH's); a run over q, k, v has none."""
    q, k = randn(rng, 1, 2, 1, 8), randn(rng, 1, 2, 70, 8)
    _, rec = seqattn.plan(heads_q=2, seq_q=1, seq_k=70, dim=8).run(q, k, k, return_record=True)
    assert rec.decode_prefetch is None
    cache = seqattn.KvCache(1, 2, 70, 8)
    cache.append(k, k)
    _, rec_cache = seqattn.plan(cache=cache, heads_q=2, seq_q=1).run(q, cache=cache,
                                                                    return_record=True)
    pool = seqattn.PagedKvCache(2, 8, blocks=2)
    seq = pool.add()
    pool.append(seq, k, k)
    _, rec_paged = seqattn.plan(cache=pool, heads_q=2, seq_q=1, max_length=70).run(
        q, cache=pool, sequences=[seq], return_record=True)
    grammar = r"l[12](\+far(64|128|512|1024))?(\+near([1-9]|[1-5][0-9]|6[0-4]))?(\+paced)?"
    assert re.fullmatch(grammar, rec_cache.decode_prefetch), rec_cache.decode_prefetch
    assert rec_paged.decode_prefetch == rec_cache.decode_prefetch


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_a_paged_batch_equals_each_sequence_alone(rng, dtype):
    """Sequences of different lengths in one pool (one forked from another), run as one batch,
    give what each gives alone over its own KvCache; freeing returns the blocks."""
    h, h_kv, d = 4, 2, 16
    lengths = [1, 70, 130]
    k = [randn(rng, 1, h_kv, n, d) for n in lengths]
    v = [randn(rng, 1, h_kv, n, d) for n in lengths]
    pool = seqattn.PagedKvCache(h_kv, d, blocks=16, dtype=dtype)
    ids = []
    for kb, vb in zip(k, v):
        ids.append(pool.add())
        pool.append(ids[-1], kb, vb)
    child = pool.fork(ids[1])  # shares 70 tokens, then grows on its own
    extra_k, extra_v = randn(rng, 1, h_kv, 5, d), randn(rng, 1, h_kv, 5, d)
    pool.append(child, extra_k, extra_v)
    assert [pool.length(i) for i in ids + [child]] == [1, 70, 130, 75]
    q = randn(rng, 4, h, 1, d)
    p = seqattn.plan(cache=pool, batch=4, heads_q=h, seq_q=1, max_length=256, causal=True)
    out = p.run(q, cache=pool, sequences=ids + [child])
    alone_k = k + [np.concatenate([k[1], extra_k], axis=2)]
    alone_v = v + [np.concatenate([v[1], extra_v], axis=2)]
    for b, (kb, vb) in enumerate(zip(alone_k, alone_v)):
        cache = seqattn.KvCache(1, h_kv, kb.shape[2], d, dtype=dtype)
        cache.append(kb, vb)
        want = seqattn.plan(cache=cache, heads_q=h, seq_q=1, causal=True).run(q[b:b + 1],
                                                                            cache=cache)
        np.testing.assert_allclose(out[b:b + 1], want, atol=1e-6, rtol=0)
    used = 16 - pool.free_blocks
    pool.free(ids[1])
    # Its own partial block (the fork copied its share before appending) returns; the full
    # block stays, the fork holds it.
    assert pool.free_blocks == 16 - used + 1
    with pytest.raises(ValueError, match="sequences\\[1\\]"):
        p.run(q, cache=pool, sequences=ids + [child])
    with pytest.raises(ValueError, match="k.shape\\[2\\]"):
        pool.append(ids[0], randn(rng, 1, h_kv, 2000, d), randn(rng, 1, h_kv, 2000, d))
    assert pool.length(ids[0]) == 1


def test_paged_reserve_sizes_a_table_and_names_its_arguments(rng):
    pool = seqattn.PagedKvCache(2, 16, blocks=4)
    seq = pool.add()
    pool.reserve(seq, 256)  # the whole pool: no block is taken
    assert pool.free_blocks == 4 and pool.length(seq) == 0
    pool.append(seq, randn(rng, 1, 2, 100, 16), randn(rng, 1, 2, 100, 16))
    assert pool.length(seq) == 100 and pool.free_blocks == 2
    with pytest.raises(seqattn.InvalidArgumentError, match="'tokens'"):
        pool.reserve(seq, 257)
    with pytest.raises(seqattn.InvalidArgumentError, match="'sequence'"):
        pool.reserve(seq + 5, 10)
    assert pool.length(seq) == 100 and pool.free_blocks == 2


def test_paged_drop_front_keeps_a_window_run_and_refuses_dense(rng):
    h, h_kv, d = 4, 2, 16
    k, v = randn(rng, 1, h_kv, 300, d), randn(rng, 1, h_kv, 300, d)
    q = randn(rng, 1, h, 1, d)
    pools = [seqattn.PagedKvCache(h_kv, d, blocks=8) for _ in range(2)]
    outs = []
    for i, pool in enumerate(pools):
        seq = pool.add()
        pool.append(seq, k, v)
        if i == 1:
            pool.drop_front(seq, 250)  # the window below reaches back to 299 - 40 = 259
            assert pool.first_stored(seq) == 192 and pool.free_blocks == 8 - 5 + 3
            assert pool.length(seq) == 300
        p = seqattn.plan(cache=pool, batch=1, heads_q=h, seq_q=1, max_length=512, causal=True,
                         variant="sliding-window", window=40, window_right=0)
        outs.append(p.run(q, cache=pool, sequences=[seq]))
    np.testing.assert_array_equal(outs[0], outs[1])
    dense = seqattn.plan(cache=pools[1], batch=1, heads_q=h, seq_q=1, max_length=512)
    with pytest.raises(seqattn.InvalidArgumentError, match="'sequences\\[0\\]'"):
        dense.run(q, cache=pools[1], sequences=[0])
    with pytest.raises(seqattn.InvalidArgumentError, match="'position'"):
        pools[1].drop_front(0, 301)
    assert pools[1].first_stored(0) == 192


def test_paged_ragged_batch_equals_each_sequence_alone(rng):
    h, h_kv, d, s_q = 4, 2, 16, 3
    k = [randn(rng, 1, h_kv, n, d) for n in (40, 5, 90)]
    v = [randn(rng, 1, h_kv, n, d) for n in (40, 5, 90)]
    pool = seqattn.PagedKvCache(h_kv, d, blocks=8)
    ids = []
    for kb, vb in zip(k, v):
        ids.append(pool.add())
        pool.append(ids[-1], kb, vb)
    counts = [3, 1, 2]
    q = randn(rng, 3, h, s_q, d)
    p = seqattn.plan(cache=pool, batch=3, heads_q=h, seq_q=s_q, max_length=128, causal=True)
    out = np.full((3, h, s_q, d), np.nan, np.float32)
    _, lse = p.run(q, cache=pool, sequences=ids, query_lengths=counts, out=out, return_lse=True)
    for b, n in enumerate(counts):
        cache = seqattn.KvCache(1, h_kv, k[b].shape[2], d)
        cache.append(k[b], v[b])
        want = seqattn.plan(cache=cache, heads_q=h, seq_q=n, causal=True).run(
            q[b:b + 1, :, :n], cache=cache)
        np.testing.assert_allclose(out[b:b + 1, :, :n], want, atol=1e-6, rtol=0)
        assert (out[b, :, n:] == 0).all() and (lse[b, :, n:] == -np.inf).all()
        assert np.isfinite(lse[b, :, :n]).all()
    with pytest.raises(seqattn.InvalidArgumentError, match="'query_lengths\\[1\\]'"):
        p.run(q, cache=pool, sequences=ids, query_lengths=[3, 6, 2])
    with pytest.raises(seqattn.UnsupportedError, match="^query_lengths"):
        seqattn.plan(heads_q=h, seq_q=2, seq_k=2, dim=d)(q[:1, :, :2], q[:1, :, :2], q[:1, :, :2],
                                                         query_lengths=[1])


@pytest.mark.parametrize("variant,extra", [("dense", {}), ("lsh", {"hashes": 2, "chunk_length": 8,
                                                                   "qk": "separate"})])
def test_a_plan_keeps_its_workspace_between_runs(rng, variant, extra):
    # A run over float32 arrays takes the plan's workspace and keeps it: later runs, with other
    # key lengths too, reuse those bytes and equal one-shot attention() bit for bit. A run with
    # weights takes one too (at least the count, with the weights pass's scratch); one over
    # bfloat16 arrays takes more (their float32 copies).
    p = seqattn.plan(batch=2, heads_q=4, heads_kv=2, seq_q=33, seq_k=33, dim=16, causal=True,
                     variant=variant, **extra)
    assert p.qkv_workspace_bytes > 0 and p.held_workspace_bytes == 0
    q, k, v = randn(rng, 2, 4, 33, 16), randn(rng, 2, 2, 33, 16), randn(rng, 2, 2, 33, 16)
    once = dict(causal=True, variant=variant, **extra)
    if variant == "dense":
        out, weights = p.run(q, k, v, return_weights=True)
        assert p.held_workspace_bytes >= p.qkv_workspace_bytes
        want, want_weights = seqattn.attention(q, k, v, return_weights=True, **once)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(weights, want_weights)
        assert p.release_workspace() > 0
    for lengths in (None, [5, 33], None):
        got = p.run(q, k, v, key_lengths=lengths)
        assert p.held_workspace_bytes == p.qkv_workspace_bytes
        np.testing.assert_array_equal(got, seqattn.attention(q, k, v, key_lengths=lengths, **once))
    half = [torch.from_numpy(x).bfloat16() for x in (q, k, v)]
    got = p.run(*half)
    copies = 4 * (q.size + k.size + v.size + q.size)  # q, k, v and out (D_v = D) in float32
    assert p.held_workspace_bytes >= p.qkv_workspace_bytes + copies
    assert torch.equal(got, seqattn.attention(*half, **once))
    # Released: nothing held until the next run takes a workspace again, with the same result.
    assert p.release_workspace() >= p.qkv_workspace_bytes + copies
    assert p.held_workspace_bytes == 0 and p.release_workspace() == 0
    np.testing.assert_array_equal(p.run(q, k, v), seqattn.attention(q, k, v, **once))
    assert p.held_workspace_bytes == p.qkv_workspace_bytes
    # fp32_precision="bf16" stages q, k, v rounded: the count holds those copies.
    rounded = seqattn.plan(heads_q=4, heads_kv=2, seq_q=33, seq_k=33, dim=16,
                           fp32_precision="bf16")
    plain = seqattn.plan(heads_q=4, heads_kv=2, seq_q=33, seq_k=33, dim=16)
    copies = 4 * (q[:1].size + k[:1].size + v[:1].size)
    assert rounded.qkv_workspace_bytes >= plain.qkv_workspace_bytes + copies
    got = rounded.run(q[:1], k[:1], v[:1])
    assert rounded.held_workspace_bytes == rounded.qkv_workspace_bytes
    np.testing.assert_array_equal(
        got, seqattn.attention(q[:1], k[:1], v[:1], fp32_precision="bf16"))


def test_release_workspace_waits_for_the_run_that_holds_it(rng):
    # release_workspace() from another thread while a run holds the workspace waits for that
    # run. The workspace holds the float32 copies of bfloat16 q, k, v and out (16 MiB each):
    # glibc serves a block this large with mmap (above its largest threshold, 32 MiB) and
    # unmaps it on free, so a release that did not wait would fault the run or change its result.
    p = seqattn.plan(batch=1, heads_q=16, seq_q=4096, seq_k=4096, dim=64, threads=1)
    half = [torch.from_numpy(randn(rng, 1, 16, 4096, 64)).bfloat16() for _ in range(3)]
    want = seqattn.attention(*half)
    copies = 4 * 4 * half[0].numel()
    for attempt in range(3):  # until one release finds the run still going (the first, always)
        got, done = [], threading.Event()

        def work():
            try:
                got.append(p.run(*half))
            finally:  # a run that raised ends the wait below too (got stays empty)
                done.set()

        worker = threading.Thread(target=work)
        worker.start()
        while p.held_workspace_bytes == 0 and not done.is_set():
            time.sleep(0.0005)
        running = not done.is_set()
        freed = p.release_workspace()
        worker.join()
        assert freed >= p.qkv_workspace_bytes + copies and p.held_workspace_bytes == 0
        assert torch.equal(got[0], want)
        if running:
            break
    assert running, "every run ended before release_workspace() was called"


def test_runs_of_one_plan_from_two_threads_get_their_own_results(rng):
    # One run holds the plan's workspace; a run that finds it taken allocates its own. Either
    # way each thread gets its inputs' result, round after round.
    p = seqattn.plan(batch=1, heads_q=4, seq_q=300, seq_k=300, dim=32, causal=True, threads=1)
    inputs = [[randn(rng, 1, 4, 300, 32) for _ in range(3)] for _ in range(2)]
    want = [seqattn.attention(*x, causal=True) for x in inputs]
    failures, barrier = [], threading.Barrier(2)

    def work(i):
        barrier.wait()
        for _ in range(20):
            if not np.array_equal(p.run(*inputs[i]), want[i]):
                failures.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert p.held_workspace_bytes == p.qkv_workspace_bytes


def test_a_decode_plan_keeps_its_workspace(rng):
    cache = seqattn.KvCache(1, 2, 40, 16, dtype="bfloat16")
    step = seqattn.plan(cache=cache, heads_q=4, seq_q=1, causal=True)
    k, v, q = randn(rng, 1, 2, 40, 16), randn(rng, 1, 2, 40, 16), randn(rng, 1, 4, 40, 16)
    cache.append(k[:, :, :30], v[:, :, :30])
    for t in range(30, 40):
        cache.append(k[:, :, t:t + 1], v[:, :, t:t + 1])
        step.run(q[:, :, t:t + 1], cache=cache)
        assert step.held_workspace_bytes == step.workspace_bytes > 0
