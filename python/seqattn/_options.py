"""Keyword arguments → the compiled Options (shared by attention, plan and MultiHeadAttention).

The variant parameters (window, proj_len, block, ...) are not listed here: they come from the
library's variant table (`variant_parameters()`), which also drives the CLI's flags, so a
variant added to the table takes its keywords in Python with no change to this package."""

from . import _seqattn
from ._arrays import integer, lengths
from ._errors import ArgumentTypeError

_I64 = (-2**63, 2**63 - 1)
_U64 = (0, 2**64 - 1)
# {variant: {parameter: (kind, help)}}, and {parameter: kind} over every variant: read once.
_TABLE = {variant: {name: (kind, text) for name, kind, text in parameters}
          for variant, parameters in _seqattn.variant_parameters()}
_KINDS = {}
for _parameters in _TABLE.values():
    for _name, (_kind, _) in _parameters.items():
        _KINDS.setdefault(_name, _kind)


def variant_parameters():
    """{variant: {parameter: (kind, help)}} from the compiled variant table, in its order.

    kind: "integer", "unsigned", "integers" (a sequence), "number" or "name"."""
    return _TABLE


def _text(name, kind, value):
    """A keyword's value as the parameter text the library reads, typed by the table's kind."""
    if kind == "integer":
        return str(integer(name, value, *_I64))
    if kind == "unsigned":
        return str(integer(name, value, *_U64))
    if kind == "integers":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ArgumentTypeError(name, "a sequence of integers", repr(value))
        return ",".join(str(integer(f"{name}[{i}]", t, *_I64)) for i, t in enumerate(value))
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentTypeError(name, "a number", repr(value))
        return repr(float(value))
    if not isinstance(value, str):
        raise ArgumentTypeError(name, "a name", repr(value))
    return value


def variant_params(params):
    """Keyword arguments (None = not given) → {parameter: text}. A keyword no variant takes is
    a TypeError; one the chosen variant does not take is the library's ValueError."""
    texts = {}
    for name, value in params.items():
        if name not in _KINDS:
            raise ArgumentTypeError(
                name, f"an option or a variant parameter ({', '.join(_KINDS)})", repr(name),
                f"unexpected keyword argument {name!r}: not an option nor a variant "
                f"parameter ({', '.join(_KINDS)})")
        if value is not None:
            texts[name] = _text(name, _KINDS[name], value)
    return texts


def make_options(variant="dense", causal=False, key_lengths=None, scale=None, threads=0,
                 profile=None, max_error=None, rope=None, alibi=None, rotations=None,
                 fp32_precision="ieee", **params):
    """The compiled Options for these keyword arguments (shared by attention, plan and MHA).

    Integers are checked here (a float with a fraction, or a value outside the C++ type, is a
    TypeError/ValueError naming the argument); values are checked by the library. `rotations`
    (variant "lsh" only) is a float32 array [hashes, D, buckets/2] or [hashes*D, buckets/2],
    read without a copy: the returned Options keeps it alive."""
    if not isinstance(variant, str):
        raise ArgumentTypeError("variant", "a name such as 'dense'", repr(variant))
    if not isinstance(fp32_precision, str):
        raise ArgumentTypeError("fp32_precision", "'ieee' or 'bf16'", repr(fp32_precision))
    return _seqattn.options(
        variant=variant, causal=bool(causal), key_lengths=lengths(key_lengths),
        scale=None if scale is None else float(scale), params=variant_params(params),
        threads=integer("threads", threads, -2**31, 2**31 - 1), profile=profile,
        max_error=None if max_error is None else float(max_error), rope=rope, alibi=alibi,
        rotations=rotations, fp32_precision=fp32_precision)


def parameters_doc():
    """The variant parameters as docstring lines, from the table."""
    lines = ["Variant parameters (keyword arguments, from the library's variant table):"]
    for variant, parameters in variant_parameters().items():
        if not parameters:
            lines.append(f"    {variant}: none")
            continue
        lines.append(f"    {variant}:")
        for name, (kind, text) in parameters.items():
            lines.append(f"        {name} ({kind}): {text}")
    return "\n".join(lines)
