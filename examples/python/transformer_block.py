"""A pre-norm transformer block in PyTorch, with its attention swapped for seqattn.

The block is written the way PyTorch 1.13 code is (no fused attention): split heads, softmax
of the scaled scores, merge heads. Swapping in seqattn is one line:

    block.attention = seqattn.scaled_dot_product_attention

and the nn.MultiheadAttention variant of the block takes seqattn.MultiHeadAttention.from_torch.
The script checks that the outputs agree and prints the time of each, median of --repeats.

    PYTHONPATH=build/release/python python3 examples/python/transformer_block.py
"""

import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import seqattn


def torch_attention(q, k, v, is_causal=False):
    """softmax(q kᵀ / sqrt(d)) v, as written without a fused kernel."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        n = s.size(-1)
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return F.softmax(s, dim=-1) @ v


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))
        self.attention = torch_attention

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, e // self.heads).unbind(2)
        # [B, S, H, D] → [B, H, S, D] views: seqattn reads them in place.
        a = self.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, e))
        return x + self.ffn(self.norm2(x))


def median_seconds(f, repeats):
    f()  # warm up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(1, args.seq, args.d_model)
    print(f"B=1 S={args.seq} d_model={args.d_model} H={args.heads}, {args.threads} threads, "
          f"seqattn on {seqattn.simd_target()}")

    block = Block(args.d_model, args.heads).eval()
    before = block(x)
    t_before = median_seconds(lambda: block(x), args.repeats)
    block.attention = seqattn.scaled_dot_product_attention  # the one-line swap
    after = block(x)
    t_after = median_seconds(lambda: block(x), args.repeats)
    err = (after - before).abs().max().item()
    print(f"block, causal  torch {t_before * 1e3:8.1f} ms   seqattn {t_after * 1e3:8.1f} ms   "
          f"{t_before / t_after:4.2f}x   max |diff| {err:.2e}")
    assert err < 1e-4, err

    mha = nn.MultiheadAttention(args.d_model, args.heads, batch_first=True).eval()
    ours = seqattn.MultiHeadAttention.from_torch(mha)
    want = mha(x, x, x, need_weights=False)[0]
    got = ours(x)
    t_mha = median_seconds(lambda: mha(x, x, x, need_weights=False), args.repeats)
    t_ours = median_seconds(lambda: ours(x), args.repeats)
    err = (got - want).abs().max().item()
    print(f"nn.MultiheadAttention  torch {t_mha * 1e3:8.1f} ms   seqattn {t_ours * 1e3:8.1f} ms   "
          f"{t_mha / t_ours:4.2f}x   max |diff| {err:.2e}")
    assert err < 1e-4, err


if __name__ == "__main__":
    main()
