"""The install hint of a missing optional package, worded for how this
package was installed: ``pip install 'socialctx[describe]'`` is right only
from an index (PyPI); from a wheel it is the wheel's path with the extra;
from a clone (``pip install ./python``, ``maturin develop``) the packages'
own names, since ``'./python[describe]'`` would compile the package again."""

from __future__ import annotations

import json
import os
from importlib import metadata
from urllib.parse import unquote, urlparse

#: What each extra installs (python/pyproject.toml's optional-dependencies).
EXTRAS = {
    "describe": "pandas pyarrow matplotlib",
    "torch": "torch",
    "pyg": "torch torch_geometric",
    "dask": "'dask[distributed]'",
}


def _origin() -> str | None:
    """What pip installed this package from: a wheel's path (PEP 610's
    direct_url.json), "socialctx" for an index, None otherwise (a
    directory, or not an installed distribution: a tree on PYTHONPATH)."""
    try:
        dist = metadata.distribution("socialctx")
        text = dist.read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None
    if not text:
        return "socialctx"
    try:
        direct = json.loads(text)
        url = urlparse(direct["url"])
    except (ValueError, KeyError, TypeError):
        return None
    if url.scheme != "file" or "archive_info" not in direct:
        return None
    return unquote(url.path)


def install_hint(extra: str) -> str:
    """The command that installs ``extra``'s packages here."""
    packages = EXTRAS[extra]
    origin = _origin()
    if origin is None or (origin != "socialctx" and not os.path.exists(origin)):
        # A clone, or the wheel it came from is gone: the names work anywhere.
        return f"pip install {packages} (the {extra} extra)"
    return f"pip install '{origin}[{extra}]' (or: pip install {packages})"


def missing(what: str, package: str, extra: str = "describe") -> ImportError:
    """The error for ``what`` needing ``package`` of ``extra``."""
    return ImportError(f"{what} needs {package}: {install_hint(extra)}")
