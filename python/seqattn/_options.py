"""Keyword arguments → the compiled Options (shared by attention, plan and MultiHeadAttention)."""

from . import _seqattn
from ._arrays import integer, lengths

_I64 = (-2**63, 2**63 - 1)


def _optional(name, x):
    return None if x is None else integer(name, x, *_I64)


def make_options(variant="dense", causal=False, key_lengths=None, scale=None, window=None,
                 window_right=None, global_tokens=None, feature_map=None, features=None,
                 proj_len=None, seed=0, threads=0, profile=None, max_error=None, rope=None,
                 alibi=None, block=None, levels=None):
    """The compiled Options for these keyword arguments (shared by attention, plan and MHA).

    Integers are checked here (a float with a fraction, or a value outside the C++ type, is a
    TypeError/ValueError naming the argument); values are checked by the library."""
    if not isinstance(variant, str):
        raise TypeError(f"variant: expected a name such as 'dense', got {variant!r}")
    if feature_map is not None and not isinstance(feature_map, str):
        raise TypeError(f"feature_map: expected 'elu1', 'relu' or 'favor', got {feature_map!r}")
    return _seqattn.options(
        variant=variant, causal=bool(causal), key_lengths=lengths(key_lengths),
        scale=None if scale is None else float(scale), window=_optional("window", window),
        window_right=_optional("window_right", window_right),
        global_tokens=[integer(f"global_tokens[{i}]", t, *_I64)
                       for i, t in enumerate(global_tokens or [])],
        feature_map=feature_map or "elu1", features=integer("features", features or 0, *_I64),
        proj_len=_optional("proj_len", proj_len), seed=integer("seed", seed, 0, 2**64 - 1),
        block=_optional("block", block), levels=_optional("levels", levels),
        threads=integer("threads", threads, -2**31, 2**31 - 1), profile=profile,
        max_error=None if max_error is None else float(max_error), rope=rope, alibi=alibi)
