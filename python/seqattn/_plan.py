"""Plans and KV caches: validate and prepare once, run many times (decode loops)."""

from . import _seqattn
from ._arrays import as_4d, check_kind, check_no_grad, empty, lengths, scores_4d
from ._errors import InvalidArgumentError, UnsupportedError
from ._options import make_options


def _dtype_name(dtype):
    name = getattr(dtype, "name", None) or str(dtype)
    return name.replace("torch.", "")


class KvCache:
    """Keys and values of past tokens in the layout the kernel reads (see kv_cache.hpp).

    KvCache(batch, heads_kv, capacity, dim, dim_v=None, *, dtype="float32", mode="linear").
    dtype: "float32", "bfloat16", "float16" (or a numpy/torch dtype) or "int8" (one scale per
    token and kv head, max|row| / 127; a non-finite token is refused); mode: "linear"
    (positions 0, 1, ...; appending past capacity is an error) or "ring" (the last `capacity`
    tokens, for sliding-window models). rope: as attention()'s; each appended key is rotated
    once at its position, and plans over the cache must carry the same rope. Appends and runs
    may come from different Python
    threads: an append waits for the runs reading the cache, and the runs for the append.
    """

    def __init__(self, batch, heads_kv, capacity, dim, dim_v=None, *, dtype="float32",
                 mode="linear", rope=None):
        self._cache = _seqattn.KvCache(int(batch), int(heads_kv), int(capacity), int(dim),
                                       int(dim if dim_v is None else dim_v), _dtype_name(dtype),
                                       mode, rope)

    def append(self, k, v, *, batch=None, layout="bhsd"):
        """Appends n tokens to every sequence (k [B, H_kv, n, D], v [B, H_kv, n, D_v]), or to
        sequence `batch` only (k [1, H_kv, n, D]). Nothing changes when it raises."""
        check_kind("k", k)
        check_kind("v", v)
        check_no_grad(k=k, v=v)
        self._cache.append(as_4d("k", k, layout), as_4d("v", v, layout),
                           batch=None if batch is None else int(batch), layout=layout)

    def length(self, batch=0):
        """Tokens appended to sequence `batch` (in ring mode: the next token's position)."""
        return self._cache.length(int(batch))

    def stored(self, batch=0):
        return self._cache.stored(int(batch))

    def clear(self, batch=None):
        self._cache.clear(None if batch is None else int(batch))

    @property
    def nbytes(self):
        return self._cache.nbytes

    @property
    def shape(self):
        return self._cache.shape

    def __repr__(self):
        s = self.shape
        return (f"KvCache(batch={s['batch']}, heads_kv={s['heads_kv']}, "
                f"capacity={s['capacity']}, dim={s['dim']}, dim_v={s['dim_v']}, "
                f"dtype='{s['dtype']}', mode='{s['mode']}')")


class PagedKvCache:
    """Keys and values of many sequences in one pool of 64-token blocks (see
    paged_kv_cache.hpp): sequences join and leave while others continue.

    PagedKvCache(heads_kv, dim, dim_v=None, *, blocks, dtype="float32", rope=None). add() and
    fork(parent) return a sequence id (fork shares the parent's blocks; a shared partial block
    is copied when either appends to it); reserve(id, tokens) sizes a sequence's block table so
    appends up to that length allocate nothing; drop_front(id, position) returns the blocks
    before a position (sliding windows); free(id) returns its blocks to the pool. Run a batch
    of sequences with plan(cache=pool, batch=B, heads_q=, seq_q=, max_length=).run(q,
    cache=pool, sequences=[ids]). Errors change nothing (an append past the pool, a freed id).
    """

    def __init__(self, heads_kv, dim, dim_v=None, *, blocks, dtype="float32", rope=None):
        self._cache = _seqattn.PagedKvCache(int(heads_kv), int(dim),
                                            int(dim if dim_v is None else dim_v), int(blocks),
                                            _dtype_name(dtype), rope)

    def add(self):
        return self._cache.add()

    def fork(self, parent):
        return self._cache.fork(int(parent))

    def reserve(self, sequence, tokens):
        """Sizes a sequence's block table for `tokens` tokens in all (no blocks are taken), so
        that appends up to that length allocate nothing."""
        self._cache.reserve(int(sequence), int(tokens))

    def free(self, sequence):
        self._cache.free(int(sequence))

    def drop_front(self, sequence, position):
        """Returns to the pool the blocks holding only positions before `position` (a
        sliding-window model's old tokens); the sequence keeps its length. A run whose window
        (or dense attention) still reaches a dropped position raises, naming sequences[b]."""
        self._cache.drop_front(int(sequence), int(position))

    def first_stored(self, sequence):
        """The first position still stored: a multiple of 64 (0 unless drop_front dropped)."""
        return self._cache.first_stored(int(sequence))

    def append(self, sequence, k, v, *, layout="bhsd"):
        """Appends n tokens to one sequence: k [1, H_kv, n, D], v [1, H_kv, n, D_v]."""
        check_kind("k", k)
        check_kind("v", v)
        check_no_grad(k=k, v=v)
        self._cache.append(int(sequence), as_4d("k", k, layout), as_4d("v", v, layout),
                           layout=layout)

    def length(self, sequence):
        return self._cache.length(int(sequence))

    @property
    def free_blocks(self):
        return self._cache.free_blocks

    @property
    def sequences(self):
        return self._cache.sequences

    @property
    def nbytes(self):
        return self._cache.nbytes


class Plan:
    """A validated attention problem of fixed shape; run() checks only the arrays."""

    def __init__(self, compiled, cache):
        self._plan = compiled
        self._cache = cache

    @property
    def variant(self):
        return self._plan.variant

    @property
    def shape(self):
        return self._plan.shape

    @property
    def qkv_workspace_bytes(self):
        """Scratch bytes a run over float32 q, k, v takes (no weights): the kernel's, plus
        float32 copies of q, k and v when fp32_precision="bf16" rounds them. Runs over
        bfloat16/float16 arrays take more (a float32 copy of each half array). Counted on the
        compute path such runs take (SEQATTN_COMPUTE_PATH may force a bf16 tile path, whose
        tiles are shaped differently)."""
        return self._plan.qkv_workspace_bytes

    @property
    def workspace_bytes(self):
        """Scratch bytes a run over a cache takes (with float32 copies of a half q and out)."""
        return self._plan.workspace_bytes

    @property
    def held_workspace_bytes(self):
        """Scratch bytes this plan keeps between runs: the largest workspace a run took (with
        the float32 copies of half arrays, and the weights pass's rows with return_weights). A
        run reuses it when no other thread's run of this plan holds it (it then allocates its
        own), so a steady loop of runs does not allocate the library's scratch again. It is
        kept until release_workspace()."""
        return self._plan.held_workspace_bytes

    def release_workspace(self):
        """Frees the workspace this plan keeps between runs and returns its size in bytes (0 if
        none was held). A run in progress in another thread keeps it until that run returns;
        this call waits for it. The next run that takes a workspace allocates one again."""
        return self._plan.release_workspace()

    def run(self, q, k=None, v=None, *, cache=None, sequences=None, out=None, key_lengths=None,
            mask=None, bias=None, query_lengths=None, return_lse=False, return_weights=False,
            return_record=False, layout="bhsd"):
        """attention(q, k, v) of the planned shape, or of q over `cache` (append the new
        tokens first: query i sits at position length - S_q + i, or length - query_lengths[b] + i); over a PagedKvCache, row b of
        q belongs to sequences[b]. key_lengths, mask and bias (as attention()'s) are this
        run's: one plan serves any of them (q/k/v runs only; a cache's lengths are its own).
        query_lengths (runs over a cache): sequence b's new queries are rows 0..n_b-1 of its
        S_q (a ragged batch: chunked prefill and decode in one call); the other rows of out
        are zeros. Returns like attention()."""
        check_kind("q", q)
        check_no_grad(q=q, k=k, v=v, out=out)
        s = self._plan.shape
        if q.ndim != 4:
            raise InvalidArgumentError("q", "4 axes", f"shape {tuple(q.shape)}")
        shape = ((s["batch"], s["heads_q"], s["seq_q"], s["dim_v"]) if layout == "bhsd" else
                 (s["batch"], s["seq_q"], s["heads_q"], s["dim_v"]))
        result = empty(q, shape) if out is None else out
        lse = empty(q, (s["batch"], s["heads_q"], s["seq_q"]), float32=True) if return_lse else None
        extra = [lse] if return_lse else []
        if cache is not None:
            if k is not None or v is not None:
                raise InvalidArgumentError("k, v", "None with cache= (the keys are the cache's)",
                                           "arrays")
            for name, given in (("key_lengths", key_lengths), ("mask", mask), ("bias", bias)):
                if given is not None:
                    raise UnsupportedError(
                        name, "None for a run over a cache", "an argument",
                        f"{name}: expected None for a run over a cache, got an argument (a "
                        "cache's own per-sequence lengths are its key lengths; masks and biases "
                        "over a cache are not built)")
            if return_weights:
                raise InvalidArgumentError("return_weights", "False for a run over a cache", "True")
            ragged = None if query_lengths is None else lengths(query_lengths, "query_lengths")
            if isinstance(cache, PagedKvCache):
                if sequences is None:
                    raise InvalidArgumentError("sequences", "the batch's sequence ids", "None")
                record = self._plan.run_paged(q, cache._cache, [int(i) for i in sequences],
                                              result, lse=lse, query_lengths=ragged,
                                              layout=layout)
            else:
                record = self._plan.run_cache(q, cache._cache, result, lse=lse,
                                              query_lengths=ragged, layout=layout)
        else:
            if k is None or v is None:
                raise InvalidArgumentError("k, v", "arrays (or cache=)", "None")
            if query_lengths is not None:
                raise UnsupportedError(
                    "query_lengths", "None for a run over q, k, v", "an argument",
                    "query_lengths: expected None for a run over q, k, v, got an argument "
                    "(per-sequence query counts are for runs over a cache)")
            weights = (empty(q, (s["batch"], s["heads_q"], s["seq_q"], s["seq_k"]), float32=True)
                       if return_weights else None)
            if return_weights:
                extra.append(weights)
            record = self._plan.run(
                q, k, v, result, key_lengths=None if key_lengths is None else lengths(key_lengths),
                mask=None if mask is None else scores_4d("mask", mask, 4),
                bias=None if bias is None else scores_4d("bias", bias, 4), lse=lse,
                weights=weights, layout=layout)
        if return_record:
            extra.append(record)
        return tuple([result] + extra) if extra else result

    __call__ = run


def plan(*, heads_q, seq_q, dim=None, batch=1, heads_kv=None, seq_k=None, dim_v=None, cache=None,
         max_length=None, **options):
    """Validates a problem once: plan(heads_q=, seq_q=, dim=, seq_k=, ...) for q/k/v arrays,
    or plan(cache=KvCache, heads_q=, seq_q=) for decoding over a cache, or
    plan(cache=PagedKvCache, batch=, heads_q=, seq_q=, max_length=) for a batch of its
    sequences, none longer than max_length tokens. options are attention()'s (variant, causal,
    scale, window, rope, ...) but the per-call ones: key_lengths, mask and bias go to
    Plan.run, so one plan serves any of them."""
    for name in ("key_lengths", "mask", "bias"):
        if options.get(name) is not None:
            raise InvalidArgumentError(
                name, "None when planning", "an argument",
                f"{name}: expected None when planning, got an argument (pass {name}= to "
                f"Plan.run: one plan serves any {name})")
    options.pop("key_lengths", None)
    options.pop("mask", None)
    options.pop("bias", None)
    opts = make_options(**options)
    if isinstance(cache, PagedKvCache):
        if max_length is None:
            raise InvalidArgumentError("max_length", "the longest sequence the plan serves",
                                       "None")
        shape = _seqattn.paged_shape(cache._cache, int(batch), int(heads_q), int(seq_q),
                                     int(max_length))
    elif cache is not None:
        shape = _seqattn.cache_shape(cache._cache, int(heads_q), int(seq_q))
    else:
        if dim is None or seq_k is None:
            raise InvalidArgumentError("dim, seq_k", "integers (or cache=)", "None")
        shape = _seqattn.AttentionShape(int(batch), int(heads_q),
                                        int(heads_q if heads_kv is None else heads_kv),
                                        int(seq_q), int(seq_k), int(dim),
                                        int(dim if dim_v is None else dim_v))
    return Plan(_seqattn.Plan(shape, opts), cache)
