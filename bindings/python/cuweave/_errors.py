# SPDX-License-Identifier: BSD-2-Clause
"""Exception classes generated from the C library's status list: one class
per cw_status (CW_ERROR_POOL_EXHAUSTED -> PoolExhaustedError, ...), all
deriving from CuweaveError; a few also derive from the matching built-in
(TimeoutError, ValueError, MemoryError) so that ordinary handlers catch them."""

import builtins

_BUILTIN_BASES = {
    "CW_ERROR_TIMEOUT": builtins.TimeoutError,
    "CW_ERROR_INVALID_ARGUMENT": builtins.ValueError,
    "CW_ERROR_OUT_OF_MEMORY": builtins.MemoryError,
}


class CuweaveError(Exception):
    """A failed cuweave call: .status (the cw_status), .name, .detail (the
    library's error detail as a dict) and the message."""

    status = None
    name = None

    def __init__(self, message, detail=None):
        super().__init__(message)
        self.detail = detail or {}


_by_status = {}


def _class_name(c_name):
    # CW_ERROR_POOL_EXHAUSTED -> PoolExhaustedError
    words = c_name[len("CW_ERROR_"):].split("_")
    return "".join(w.capitalize() for w in words) + "Error"


def build(name_of, string_of):
    """Generates one subclass per error status the library knows."""
    code = 1
    while True:
        name = name_of(code)
        if name == "CW_UNKNOWN_STATUS":
            break
        bases = (CuweaveError,) + ((_BUILTIN_BASES[name],) if name in _BUILTIN_BASES else ())
        cls = type(_class_name(name), bases, {"status": code, "name": name, "__doc__": string_of(code)})
        _by_status[code] = cls
        globals()[cls.__name__] = cls
        code += 1


def from_status(code, detail):
    cls = _by_status.get(code, CuweaveError)
    message = detail.get("message") or "cuweave status %d" % code
    return cls(message, detail)


def classes():
    """{status code: exception class}."""
    return dict(_by_status)
