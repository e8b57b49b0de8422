"""``python -m socialctx``: the ``socialctx`` command (see :mod:`socialctx.cli`)."""

from .cli import main

raise SystemExit(main())
