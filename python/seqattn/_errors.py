"""seqattn's exceptions: one hierarchy for the library's errors and the package's own checks.

Every error is a `seqattn.Error` that keeps what the C++ `seqattn::Error` keeps: its `kind`
("invalid_argument", "unsupported", "not_implemented", "io"), the `argument` it names, what was
`expected` and what was given (`actual`). Each class also derives from the built-in exception
the package raised before the hierarchy existed, so `except ValueError` (or `TypeError`,
`NotImplementedError`, `OSError`) clauses keep catching what they caught:

    Error                                     base of all of them
    ├─ InvalidArgumentError(Error, ValueError)   a shape, stride, value or name is wrong
    ├─ ArgumentTypeError(Error, TypeError)       an argument of the wrong Python type
    ├─ UnsupportedError(Error, ValueError)       the chosen variant cannot honour an option
    ├─ NotImplementedFeatureError(Error, NotImplementedError)   declared, not built yet
    └─ FileError(Error, OSError)                 a file could not be read or written
"""


class Error(Exception):
    """Base of seqattn's errors: `kind`, `argument`, `expected`, `actual` and the message."""

    kind = "invalid_argument"

    def __init__(self, argument, expected, actual, message=None):
        if message is None:
            message = f"{argument}: expected {expected}, got {actual}"
        super().__init__(message)
        self.argument = argument
        self.expected = expected
        self.actual = actual


class InvalidArgumentError(Error, ValueError):
    """A shape, stride, pointer, value or name is wrong: fix the call."""


class ArgumentTypeError(Error, TypeError):
    """An argument of a Python type seqattn does not take (a list for an array, a float for an
    integer, ...)."""


class UnsupportedError(Error, ValueError):
    """The chosen variant cannot honour an option: pick another variant or drop the option."""

    kind = "unsupported"


class NotImplementedFeatureError(Error, NotImplementedError):
    """A feature declared in the interface but not built yet."""

    kind = "not_implemented"


class FileError(Error, OSError):
    """A file (a profile, an .npy) could not be read or written."""

    kind = "io"

    def __str__(self):  # OSError's own __str__ would show the args tuple's errno form
        return self.args[0]


_BY_KIND = {cls.kind: cls for cls in (InvalidArgumentError, UnsupportedError,
                                      NotImplementedFeatureError, FileError)}


def from_library(kind, argument, expected, actual, message, type_error=False):
    """The exception for a C++ seqattn::Error (called by the bindings' translator)."""
    cls = ArgumentTypeError if type_error else _BY_KIND[kind]
    return cls(argument, expected, actual, message)
