"""The GIL is released while seqattn computes; nothing is copied; results own their memory."""

import gc
import threading
import time

import numpy as np
import torch

import seqattn
from conftest import randn, reference


def test_another_python_thread_runs_during_a_call(rng):
    # One long call on one thread. A Python thread that counts while it runs can only make
    # progress inside the call if the GIL was released: with the GIL held, the largest gap
    # between its ticks would span the whole call.
    q = randn(rng, 1, 4, 3072, 64)
    seqattn.attention(q, q, q, threads=1)  # warm up (thread pool, dispatch)
    ticks, stop = [], threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.01)
    start = time.perf_counter()
    seqattn.attention(q, q, q, threads=1)
    end = time.perf_counter()
    stop.set()
    counter.join()
    inside = [t for t in ticks if start <= t <= end]
    assert end - start > 0.02, "the call is too short to tell"
    assert len(inside) > 100
    gaps = np.diff([start] + inside + [end])
    assert gaps.max() < 0.5 * (end - start), (gaps.max(), end - start)


def test_two_threads_calling_at_once_overlap_and_get_their_own_results(rng):
    inputs = [[randn(rng, 2, 4, 1024, 32) for _ in range(3)] for _ in range(2)]
    results, spans = [None, None], [None, None]
    barrier = threading.Barrier(2)

    def work(i):
        barrier.wait()
        start = time.perf_counter()
        results[i] = seqattn.attention(*inputs[i], causal=True, threads=1)
        spans[i] = (start, time.perf_counter())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Both calls were inside seqattn at the same time (with the GIL held they would take turns).
    assert max(s[0] for s in spans) < min(s[1] for s in spans), spans
    for i in range(2):
        np.testing.assert_allclose(results[i], reference(*inputs[i], causal=True), atol=2e-6)


def test_results_outlive_their_inputs(rng):
    q = torch.from_numpy(randn(rng, 1, 2, 64, 16))
    out = seqattn.attention(q, q.clone(), q.clone())
    saved = out.clone()
    del q
    gc.collect()
    _ = [torch.randn(1, 2, 64, 16) for _ in range(50)]  # reuse the freed memory
    assert torch.equal(out, saved)


def test_strided_inputs_and_out_are_used_in_place(rng):
    act = torch.from_numpy(randn(rng, 2, 33, 3, 16))  # [B, S, H, D]
    q = act.transpose(1, 2)  # [B, H, S, D] view
    for name, a in (("q", q), ("numpy", q.numpy())):
        seen = seqattn._seqattn.inspect(a)
        itemsize = 4
        want_strides = a.stride() if name == "q" else tuple(s // itemsize for s in a.strides)
        assert seen["strides"] == want_strides
        assert seen["data"] == (a.data_ptr() if name == "q" else a.ctypes.data)
    target = torch.zeros(2, 33, 3, 16).transpose(1, 2)  # out as a strided view too
    got = seqattn.attention(q, q, q, out=target)
    assert got is target and got.data_ptr() == target.data_ptr()
    np.testing.assert_allclose(target.numpy(), reference(q.numpy(), q.numpy(), q.numpy()),
                               atol=2e-6)
