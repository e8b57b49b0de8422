"""Writing an output the user named: the crate's one routine for it
(``socialctx.internals::Replacement``, through the binding), so that the
package's writers (``describe``'s HTML, ``export``'s Parquet, a fold's CSV
files) keep the rules of the command's (``--report``, ``stats --save``): the
file is whole or as it was, keeps its mode and group, a symlink stays one
(its target is replaced), and a temporary file a killed run left beside it
is removed by the next."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ._socialctx import _Replacement


def cannot_write(path: Path, e: OSError) -> OSError:
    """``e`` naming ``path``, the file the user asked for, not the
    temporary file beside it."""
    reason = e.strerror or (str(e.args[0]) if len(e.args) == 1 else str(e)) or type(e).__name__
    message = f"cannot write {path}: {reason}"
    if e.errno is None:
        # No errno (an error the writing callback raised): the message
        # alone, never "[Errno None] ...".
        return OSError(message)
    try:
        return type(e)(e.errno, message)
    except TypeError:  # a subclass with a constructor of its own
        return OSError(e.errno, message)


def write_output(path: Path, write: Callable[[BinaryIO], object]) -> Path:
    """Writes ``path`` with ``write`` (given the open temporary file) whole
    or not at all, and returns it."""
    try:
        r = _Replacement(path)
    except OSError as e:
        raise cannot_write(path, e) from None
    try:
        # A duplicate: the Replacement's own descriptor holds the lock that
        # tells the next run this temporary file is being written.
        with os.fdopen(os.dup(r.fileno()), "wb") as f:
            write(f)
        r.commit()
    except OSError as e:
        r.abort()
        raise cannot_write(path, e) from None
    except BaseException:
        r.abort()
        raise
    return path
