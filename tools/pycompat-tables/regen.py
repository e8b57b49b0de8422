"""Regenerates every generated file of the pycompat crate, or with `--check`
compares them with what the generators give now (exit 1 on a difference).

    python3 tools/pycompat-tables/regen.py [--check]

Needs CPython 3.11.7 (Unicode 14.0, the Python RPDNN's features were computed
with) and the packages of requirements.txt beside this file.
"""

import difflib
import sys
from collections.abc import Callable
from pathlib import Path

import pytext_tables
import tokens_tables

ROOT = Path(__file__).resolve().parents[2]
CRATE = ROOT / "crates" / "pycompat"

# Each output and the function that gives its text.
OUTPUTS: list[tuple[Path, Callable[[], str]]] = [
    (CRATE / "src" / "pytext_tables.rs", pytext_tables.tables),
    (CRATE / "src" / "tokens_tables.rs", tokens_tables.tables),
    (CRATE / "tests" / "fixtures" / "pytext_cases.jsonl", pytext_tables.fixtures),
]


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        sys.exit(__doc__)
    check = argv == ["--check"]
    stale = 0
    for path, generate in OUTPUTS:
        text = generate()
        rel = path.relative_to(ROOT)
        if not check:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote {rel}")
            continue
        old = path.read_text(encoding="utf-8")
        if old == text:
            print(f"{rel}: up to date")
            continue
        stale += 1
        print(f"{rel}: differs from its generator's output:")
        diff = difflib.unified_diff(
            old.splitlines(), text.splitlines(), "committed", "generated", lineterm="", n=1
        )
        for n, line in enumerate(diff):
            if n == 40:
                print("...")
                break
            print(line)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
