"""Keyword arguments → the compiled Options (shared by attention, plan and MultiHeadAttention)."""

from . import _seqattn
from ._arrays import lengths


def make_options(variant="dense", causal=False, key_lengths=None, scale=None, window=None,
                 window_right=None, global_tokens=None, feature_map=None, features=None,
                 proj_len=None, seed=0, threads=0, profile=None):
    """The compiled Options for these keyword arguments (shared by attention, plan and MHA)."""
    return _seqattn.options(
        variant=variant, causal=bool(causal), key_lengths=lengths(key_lengths),
        scale=None if scale is None else float(scale), window=window, window_right=window_right,
        global_tokens=[int(t) for t in (global_tokens or [])],
        feature_map=feature_map or "elu1", features=int(features or 0), proj_len=proj_len,
        seed=int(seed), threads=int(threads), profile=profile)
