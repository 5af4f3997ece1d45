# Type stubs of the seqattn package's public API (PEP 561: the package ships py.typed).
# Arrays are numpy.ndarray or torch.Tensor; every function returns the kind it was given.
# tests/python/test_packaging.py checks that each name and signature here matches the package.
from typing import Any, Literal, Mapping, Optional, Sequence, Tuple, Union

Array = Any  # numpy.ndarray or torch.Tensor (torch is optional)
Layout = Literal["bhsd", "bshd"]
Rope = Union[None, float, Mapping[str, Any]]
AlibiArg = Union[None, bool, Sequence[float], Mapping[str, Any]]
Param = Union[int, float, str, Sequence[int], None]

__version__: str

class Error(Exception):
    kind: str  # "invalid_argument", "unsupported", "not_implemented" or "io"
    argument: str
    expected: str
    actual: str
    def __init__(
        self, argument: str, expected: str, actual: str, message: Optional[str] = ...
    ) -> None: ...

class InvalidArgumentError(Error, ValueError): ...
class ArgumentTypeError(Error, TypeError): ...
class UnsupportedError(Error, ValueError): ...
class NotImplementedFeatureError(Error, NotImplementedError): ...
class FileError(Error, OSError): ...

class RunRecord:
    @property
    def variant(self) -> str: ...
    reason: str
    flops: float
    bytes: float
    seconds: float
    threads: int
    simd_target: str
    compute_path: str
    decode_prefetch: Optional[str]  # "l1", "l2", "l2+near16+paced"… over a KV cache, None over q, k, v

def simd_target() -> str: ...
def bf16_compute_path() -> Tuple[str, str]: ...
def select(seq: int, profile: Optional[str] = ...) -> Tuple[str, str]: ...
def variant_parameters() -> dict[str, dict[str, Tuple[str, str]]]: ...
def lsh_random_rotations(hashes: int, dim: int, buckets: int, seed: int = ...) -> Any: ...
def attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    variant: str = ...,
    causal: bool = ...,
    key_lengths: Optional[Sequence[int]] = ...,
    mask: Optional[Array] = ...,
    bias: Optional[Array] = ...,
    scale: Optional[float] = ...,
    return_lse: bool = ...,
    return_weights: bool = ...,
    threads: int = ...,
    layout: Layout = ...,
    out: Optional[Array] = ...,
    return_record: bool = ...,
    profile: Optional[str] = ...,
    max_error: Optional[float] = ...,
    rope: Rope = ...,
    alibi: AlibiArg = ...,
    fp32_precision: Literal["ieee", "bf16"] = ...,
    **params: Param,
) -> Any: ...  # out, or a tuple (out, lse?, weights?, record?) as requested
def scaled_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    attn_mask: Optional[Array] = ...,
    dropout_p: float = ...,
    is_causal: bool = ...,
    scale: Optional[float] = ...,
    enable_gqa: bool = ...,
) -> Array: ...

class KvCache:
    def __init__(
        self,
        batch: int,
        heads_kv: int,
        capacity: int,
        dim: int,
        dim_v: Optional[int] = ...,
        *,
        dtype: Any = ...,
        mode: Literal["linear", "ring"] = ...,
        rope: Rope = ...,
    ) -> None: ...
    def append(
        self, k: Array, v: Array, *, batch: Optional[int] = ..., layout: Layout = ...
    ) -> None: ...
    def length(self, batch: int = ...) -> int: ...
    def stored(self, batch: int = ...) -> int: ...
    def clear(self, batch: Optional[int] = ...) -> None: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def shape(self) -> dict[str, Any]: ...

class PagedKvCache:
    def __init__(
        self,
        heads_kv: int,
        dim: int,
        dim_v: Optional[int] = ...,
        *,
        blocks: int,
        dtype: Any = ...,
        rope: Rope = ...,
    ) -> None: ...
    def add(self) -> int: ...
    def fork(self, parent: int) -> int: ...
    def reserve(self, sequence: int, tokens: int) -> None: ...
    def drop_front(self, sequence: int, position: int) -> None: ...
    def first_stored(self, sequence: int) -> int: ...
    def free(self, sequence: int) -> None: ...
    def append(self, sequence: int, k: Array, v: Array, *, layout: Layout = ...) -> None: ...
    def length(self, sequence: int) -> int: ...
    @property
    def free_blocks(self) -> int: ...
    @property
    def sequences(self) -> int: ...
    @property
    def nbytes(self) -> int: ...

class Plan:
    @property
    def variant(self) -> str: ...
    @property
    def shape(self) -> dict[str, Any]: ...
    @property
    def qkv_workspace_bytes(self) -> Optional[int]: ...
    @property
    def workspace_bytes(self) -> int: ...
    @property
    def held_workspace_bytes(self) -> int: ...
    def release_workspace(self) -> int: ...
    def run(
        self,
        q: Array,
        k: Optional[Array] = ...,
        v: Optional[Array] = ...,
        *,
        cache: Optional[Union[KvCache, PagedKvCache]] = ...,
        sequences: Optional[Sequence[int]] = ...,
        out: Optional[Array] = ...,
        key_lengths: Optional[Sequence[int]] = ...,
        mask: Optional[Array] = ...,
        bias: Optional[Array] = ...,
        query_lengths: Optional[Sequence[int]] = ...,
        return_lse: bool = ...,
        return_weights: bool = ...,
        return_record: bool = ...,
        layout: Layout = ...,
    ) -> Any: ...
    __call__ = run

def plan(
    *,
    heads_q: int,
    seq_q: int,
    dim: Optional[int] = ...,
    batch: int = ...,
    heads_kv: Optional[int] = ...,
    seq_k: Optional[int] = ...,
    dim_v: Optional[int] = ...,
    cache: Optional[Union[KvCache, PagedKvCache]] = ...,
    max_length: Optional[int] = ...,
    **options: Any,
) -> Plan: ...

class MultiHeadAttention:
    embed_dim: int
    num_heads: int
    batch_first: bool
    bias: bool
    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        bias: bool = ...,
        batch_first: bool = ...,
        num_kv_heads: Optional[int] = ...,
        output_projection: bool = ...,
        sinusoidal_positions: bool = ...,
        **options: Any,
    ) -> None: ...
    @classmethod
    def from_torch(cls, module: Any, **options: Any) -> "MultiHeadAttention": ...
    def set_weights(
        self,
        *,
        q: Optional[Array] = ...,
        k: Optional[Array] = ...,
        v: Optional[Array] = ...,
        o: Optional[Array] = ...,
    ) -> None: ...
    def set_biases(
        self,
        *,
        q: Optional[Array] = ...,
        k: Optional[Array] = ...,
        v: Optional[Array] = ...,
        o: Optional[Array] = ...,
    ) -> None: ...
    def forward(
        self,
        x: Array,
        key_padding_mask: Optional[Array] = ...,
        attn_mask: Optional[Array] = ...,
        *,
        need_weights: bool = ...,
        average_attn_weights: bool = ...,
        is_causal: bool = ...,
        x_kv: Optional[Array] = ...,
    ) -> Any: ...
    __call__ = forward
