"""Every bad input is a ValueError or TypeError naming the argument, and writes nothing."""

import numpy as np
import pytest
import torch

import seqattn
from conftest import randn


@pytest.fixture
def qkv(rng):
    return randn(rng, 1, 2, 5, 8), randn(rng, 1, 2, 7, 8), randn(rng, 1, 2, 7, 8)


def test_wrong_kinds_and_dtypes(qkv):
    q, k, v = qkv
    with pytest.raises(TypeError, match="q: expected a numpy.ndarray or a torch.Tensor, got list"):
        seqattn.attention(q.tolist(), k, v)
    with pytest.raises(TypeError, match="k: expected a numpy array of float32.*float64"):
        seqattn.attention(q, k.astype(np.float64), v)
    with pytest.raises(TypeError, match="v: .*torch.int64"):
        seqattn.attention(torch.from_numpy(q), torch.from_numpy(k), torch.zeros(1, 2, 7, 8,
                                                                                dtype=torch.long))
    with pytest.raises(TypeError, match="native byte order"):
        seqattn.attention(q.astype(">f4"), k, v)
    with pytest.raises(TypeError, match="q: expected float32, float16 or bfloat16"):
        seqattn.attention(q > 0, k, v)
    with pytest.raises(TypeError, match="masked array"):
        seqattn.attention(np.ma.masked_less(q, 0), k, v)


def test_shapes_values_and_options(qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match=r"k.shape\[3\]|dim|D"):
        seqattn.attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match=r"shape\[2\].*>= 1.*0"):
        seqattn.attention(q[:, :, :0], k, v)  # zero-size: refused, not a crash
    with pytest.raises(ValueError, match="scale"):
        seqattn.attention(q, k, v, scale=float("nan"))
    with pytest.raises(ValueError, match="scale"):
        seqattn.attention(q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match="variant"):
        seqattn.attention(q, k, v, variant="flash")
    with pytest.raises(ValueError, match="layout"):
        seqattn.attention(q, k, v, layout="bsdh")
    with pytest.raises(ValueError, match="key_lengths"):
        seqattn.attention(q, k, v, key_lengths=[9])
    with pytest.raises(ValueError, match="mask.shape: expected broadcastable"):
        seqattn.attention(q, k, v, mask=np.ones((5, 6), dtype=bool))
    with pytest.raises(ValueError, match="2, 3 or 4 axes"):
        seqattn.attention(q[None], k[None], v[None])
    with pytest.raises(ValueError, match="threads"):
        seqattn.attention(q, k, v, threads=-1)
    # Integers are never truncated or wrapped on the way to C++.
    with pytest.raises(TypeError, match=r"key_lengths\[0\]: expected an integer, got 2.5"):
        seqattn.attention(q, k, v, key_lengths=[2.5])
    with pytest.raises(ValueError, match=r"seed: expected an integer in \[0, "):
        seqattn.attention(q, k, v, variant="linear", feature_map="favor", seed=-1)
    with pytest.raises(ValueError, match="threads: expected an integer in"):
        seqattn.attention(q, k, v, threads=2**40)
    with pytest.raises(TypeError, match="window: expected an integer"):
        seqattn.attention(q, k, v, variant="sliding-window", window="wide")
    with pytest.raises(ValueError, match="seq: expected an integer >= 1|seq: expected an integer in"):
        seqattn.select(-5)


def test_out_problems_leave_out_untouched(qkv):
    q, k, v = qkv
    out = np.full((1, 2, 5, 8), 7.0, dtype=np.float32)
    with pytest.raises(ValueError, match="scale"):
        seqattn.attention(q, k, v, out=out, scale=0.0)
    assert (out == 7.0).all()
    readonly = out.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="out: expected a writable array"):
        seqattn.attention(q, k, v, out=readonly)
    with pytest.raises(ValueError, match="out"):
        seqattn.attention(q, k, v, out=q)  # out aliases q
    with pytest.raises(ValueError, match="out"):
        seqattn.attention(q, k, v, out=np.broadcast_to(out[:, :, :1], out.shape))  # self-overlap
    with pytest.raises(ValueError, match="out"):
        seqattn.attention(q, k, v, out=out[..., :4])
    assert (out == 7.0).all()


def test_unaligned_and_odd_strides():
    raw = np.zeros(4 * 64 + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float32, count=64, offset=1).reshape(1, 1, 8, 8)
    with pytest.raises(ValueError, match="aligned"):
        seqattn.attention(unaligned, unaligned, unaligned)
    ok = np.ones((1, 1, 8, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="negative strides"):
        seqattn.attention(ok[:, :, ::-1], ok, ok)
    # A stride of half an element (a structured view) cannot be read as float32 elements.
    packed = np.zeros((1, 1, 8, 8), dtype=[("a", "<f4"), ("b", "<f2")])["a"]
    with pytest.raises(ValueError, match="multiple of the element size"):
        seqattn.attention(packed, ok, ok)


def test_torch_specific_refusals(qkv):
    q, k, v = (torch.from_numpy(a) for a in qkv)
    with pytest.raises(ValueError, match="requires_grad"):
        seqattn.attention(q.requires_grad_(), k, v)
    with torch.no_grad():  # allowed: nothing to differentiate
        assert seqattn.attention(q, k, v).shape == (1, 2, 5, 8)
    q = q.detach()
    # PyTorch gives an empty tensor a null data pointer: the zero-size axis is what is named.
    for axis, label in enumerate(("batch", "heads", "seq", "dim")):
        shape = list(q.shape)
        shape[axis] = 0
        with pytest.raises(ValueError, match=rf"q\.shape\[{axis}\] \({label}\)"):
            seqattn.attention(torch.zeros(shape), k, v)
    with pytest.raises(ValueError, match=r"k\.shape\[2\] \(seq\)"):
        seqattn.attention(q, torch.zeros(1, 2, 0, 8), torch.zeros(1, 2, 0, 8))
    with pytest.raises(TypeError, match="strided"):
        seqattn.attention(q.to_sparse(), k, v)
    with pytest.raises(TypeError, match="device meta"):
        seqattn.attention(q.to("meta"), k, v)


def test_error_kinds_map_to_python_exceptions(qkv, tmp_path):
    q, k, v = qkv
    # kUnsupported: Linformer has no causal form (its projection mixes every key).
    with pytest.raises(ValueError, match="causal"):
        seqattn.attention(q, k, v, variant="linformer", causal=True)
    # kIo: a profile that cannot be read names the file.
    missing = str(tmp_path / "no-such-profile.json")
    with pytest.raises(OSError, match="no-such-profile.json"):
        seqattn.select(100, profile=missing)
    with pytest.raises(OSError, match="cannot be read"):  # a directory
        seqattn.select(100, profile=str(tmp_path))
