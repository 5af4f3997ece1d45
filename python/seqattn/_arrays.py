"""Array plumbing shared by the public functions: numpy or torch in, the same kind out.

Nothing here copies an input. Rank changes are views (``a[None]``), outputs are allocated
once in the caller's array library, and the compiled module reads every array through its
own strides.
"""

import numpy as np

from ._errors import ArgumentTypeError, InvalidArgumentError

_LAYOUTS = ("bhsd", "bshd")


def is_torch(a):
    t = type(a)
    return any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in t.__mro__)


def check_kind(name, a):
    if isinstance(a, np.ma.MaskedArray):  # its mask would be ignored: say so instead
        raise ArgumentTypeError(name, "a plain numpy.ndarray",
                                "a masked array (pass .filled(...) and give the mask as mask=)")
    if isinstance(a, np.ndarray) or is_torch(a):
        return
    raise ArgumentTypeError(name, "a numpy.ndarray or a torch.Tensor", type(a).__name__)


def check_no_grad(**arrays):
    """seqattn computes no gradients: refuse tensors that autograd would track."""
    for name, a in arrays.items():
        if a is None or not is_torch(a) or not a.requires_grad:
            continue
        import torch

        if torch.is_grad_enabled():
            raise InvalidArgumentError(
                name, "a tensor autograd does not track", "requires_grad=True in grad mode",
                f"{name}: expected a tensor autograd does not track, got one with "
                "requires_grad=True while grad mode is on (seqattn has no backward pass: run "
                "under torch.no_grad() or torch.inference_mode(), or pass .detach())")


def as_4d(name, a, layout):
    """[S, D] and [B, S, D] become [B, H, S, D] (bhsd) or [B, S, H, D] (bshd) views."""
    if a.ndim == 4:
        return a
    if a.ndim == 3:
        return a[:, None] if layout == "bhsd" else a[:, :, None]
    if a.ndim == 2:
        return a[None, None] if layout == "bhsd" else a[None, :, None]
    raise InvalidArgumentError(name, "2, 3 or 4 axes ([S, D], [B, S, D] or [B, H, S, D])",
                               f"shape {tuple(a.shape)}")


def scores_4d(name, m, rank):
    """A mask or bias over the scores of rank-`rank` inputs, as a [B|1, H|1, S_q|1, S_k|1] view.

    Its axes are aligned at the right against the scores ([S_q, S_k], [B, S_q, S_k] or
    [B, H, S_q, S_k]), as numpy and PyTorch broadcast.
    """
    if m.ndim > rank:
        raise InvalidArgumentError(name, f"at most {rank} axes for inputs of {rank}",
                                   f"shape {tuple(m.shape)}")
    m = m[(None,) * (rank - m.ndim)]
    if rank == 3:
        return m[:, None]
    if rank == 2:
        return m[None, None]
    return m


def empty(like, shape, float32=False):
    """A fresh C-contiguous array of `like`'s kind (and dtype, unless float32)."""
    if is_torch(like):
        import torch

        return torch.empty(shape, dtype=torch.float32 if float32 else like.dtype)
    return np.empty(shape, dtype=np.float32 if float32 else like.dtype)


def zeros(like, shape):
    if is_torch(like):
        import torch

        return torch.zeros(shape, dtype=like.dtype)
    return np.zeros(shape, dtype=like.dtype)


def from_rank4(a, rank, layout):
    """The inverse of as_4d on an output."""
    if rank == 4:
        return a
    if rank == 3:
        return a[:, 0] if layout == "bhsd" else a[:, :, 0]
    return a[0, 0] if layout == "bhsd" else a[0, :, 0]


def integer(name, x, lo=None, hi=None):
    """x as a Python int, or a ValueError/TypeError naming it (never silently truncated)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        if isinstance(x, (float, np.floating)) and float(x).is_integer():
            x = int(x)
        else:
            raise ArgumentTypeError(name, "an integer", repr(x))
    x = int(x)
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        bounds = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise InvalidArgumentError(name, f"an integer {bounds}", str(x))
    return x


def lengths(values, name="key_lengths"):
    if values is None:
        return []
    if is_torch(values):
        values = values.tolist()
    flat = np.asarray(values, dtype=object).reshape(-1)
    return [integer(f"{name}[{i}]", x, -2**63, 2**63 - 1) for i, x in enumerate(flat)]


def is_bool(m):
    return str(m.dtype) in ("bool", "torch.bool")


def logical_not(m):
    """~m for a boolean mask of either kind (a new array: the masks' meanings differ)."""
    if is_torch(m):
        return m.logical_not()
    return np.logical_not(m)
