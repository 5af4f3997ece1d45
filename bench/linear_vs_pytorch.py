#!/usr/bin/env python3
"""Linear attention (elu+1): seqattn against the PyTorch formulas a user would write, in one run.

  /usr/bin/python3 bench/linear_vs_pytorch.py [--seq 65536] [--seqattn build/release/src/cli/seqattn]

PyTorch (one thread, float32, B = 1, H = 8, D = 64), per head:
  non-causal: (phi(q) @ (phi(k).T @ v)) / (phi(q) @ phi(k).sum(0))
  causal:     128-token chunks with a carried state (S, z): inside a chunk the masked
              quadratic form, across chunks the state, as in fast-transformers' causal product.
seqattn: `seqattn bench --variant linear --feature-map elu1 --threads 1`, the same shape, in the
same run; plus causal with one head (B·H_kv = 1) on one and on two threads. Prints medians
(ms), GFLOP/s on seqattn's FLOP count and the ratios. Needs python3-torch (Debian 12).
"""
import argparse
import json
import statistics
import subprocess
import time

import torch


def phi(x):
    return torch.nn.functional.elu(x) + 1


def torch_noncausal(q, k, v):
    out = torch.empty_like(q)
    for h in range(q.shape[1]):
        fq, fk = phi(q[0, h]), phi(k[0, h])
        out[0, h] = (fq @ (fk.T @ v[0, h])) / (fq @ fk.sum(0)).unsqueeze(-1)
    return out


def torch_causal(q, k, v, chunk=128):
    out = torch.empty_like(q)
    d, dv = q.shape[-1], v.shape[-1]
    mask = torch.tril(torch.ones(chunk, chunk))
    for h in range(q.shape[1]):
        fq, fk, vh = phi(q[0, h]), phi(k[0, h]), v[0, h]
        state, norm = torch.zeros(d, dv), torch.zeros(d)
        for c0 in range(0, q.shape[2], chunk):
            qc, kc, vc = fq[c0:c0 + chunk], fk[c0:c0 + chunk], vh[c0:c0 + chunk]
            n = qc.shape[0]
            scores = (qc @ kc.T) * mask[:n, :n]
            num = qc @ state + scores @ vc
            den = qc @ norm + scores.sum(-1)
            out[0, h, c0:c0 + n] = num / den.unsqueeze(-1)
            state = state + kc.T @ vc
            norm = norm + kc.sum(0)
    return out


def median_ms(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def seqattn_bench(binary, seq, heads, threads, causal, repeat):
    cmd = [binary, "bench", "--variant", "linear", "--feature-map", "elu1", "--seq", str(seq),
           "--heads", str(heads), "--dim", "64", "--threads", str(threads), "--repeat",
           str(repeat), "--json"]
    if causal:
        cmd.append("--causal")
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=65536)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seqattn", default="build/release/src/cli/seqattn")
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    shape = (1, 8, args.seq, 64)
    q, k, v = (torch.rand(shape, generator=gen) * 2 - 1 for _ in range(3))

    print(f"linear attention elu+1, B=1 H=8 D=64 S={args.seq}, one thread, float32; "
          f"torch {torch.__version__}, medians of {args.repeat}")
    print(f"{'case':<24}{'PyTorch ms':>12}{'seqattn ms':>12}{'GFLOP/s':>10}{'speed-up':>10}")
    for causal in (False, True):
        formula = torch_causal if causal else torch_noncausal
        ref_ms = median_ms(lambda: formula(q, k, v), args.repeat)
        ours = seqattn_bench(args.seqattn, args.seq, 8, 1, causal, args.repeat)
        name = "causal (128 chunks)" if causal else "non-causal"
        print(f"{name:<24}{ref_ms:>12.1f}{ours['median_ms']:>12.1f}{ours['gflops']:>10.1f}"
              f"{ref_ms / ours['median_ms']:>9.1f}x")

    one = seqattn_bench(args.seqattn, args.seq, 1, 1, True, args.repeat)
    two = seqattn_bench(args.seqattn, args.seq, 1, 2, True, args.repeat)
    print(f"seqattn causal, B*H_kv=1, S={args.seq}: 1 thread {one['median_ms']:.2f} ms, "
          f"2 threads {two['median_ms']:.2f} ms ({two['threads']} ran): "
          f"{one['median_ms'] / two['median_ms']:.2f}x")


if __name__ == "__main__":
    main()
