"""The sample corpus that ships with the package: 38 PHEME-style threads (real
PHEME and RumourEval threads plus generated ones with deliberately broken files),
so that an installed package runs the main job without a clone::

    socialctx build --sample CACHE

    import socialctx
    socialctx.build(socialctx.sample_corpus(), "sample-cache")

In a clone it is ``data-samples/corpus`` (``socialctx/sample`` is a link to it that
the wheel and the sdist resolve into files).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["sample_corpus"]


def sample_corpus() -> Path:
    """The directory of the shipped sample corpus (read-only: build from it, never into it)."""
    path = Path(__file__).resolve().parent / "sample"
    if not path.is_dir():
        # A package assembled without its data (a hand-copied tree, a broken link).
        raise FileNotFoundError(f"{path}: the sample corpus is not installed with this package")
    return path
