#!/usr/bin/env python3
"""Generator for `crates/pycompat/src/pytext_tables.rs` and the `pytext` parity
fixtures (`crates/pycompat/tests/fixtures/pytext_cases.jsonl`).

Usage (from the repository root, with CPython 3.11.7 = Unicode 14.0, the
Python that RPDNN's features were computed with):

    python3 tools/pycompat-tables/regen.py            # writes every output
    python3 tools/pycompat-tables/regen.py --check    # compares instead

Both outputs are deterministic (the fixtures use a fixed seed).

Definitions (checked against alternatives by `check_definitions`):
  * word char  : re.match(r'\\w', c)  (== c.isalnum() or c == '_')
  * space char : c.isspace()          (== re `\\s`, == what str.split()/strip() use)

Fixture format (JSON Lines), one case per line as a JSON array (compact):
  [text, screen_name, count_words, [a, b], has_token, char_len, context_len]
where text.strip() == text[a:b] (code point offsets), then one line per block:
  {"block": k, "word": "<hex>", "space": "<hex>"}
A block line holds, for code points k*4096 .. k*4096+4095, the 64-bit FNV-1a
hash (lower-case hex, 16 digits) of the 512-byte little-endian bitmap whose bit
i is the predicate of code point k*4096+i (surrogates count as false).
"""

import io
import json
import random
import re
import sys
import unicodedata
from collections.abc import Callable
from typing import Any

from generated import header

MAX_CP = 0x10FFFF
SURROGATES = range(0xD800, 0xE000)


def is_word(cp: int) -> bool:
    if cp in SURROGATES:
        return False
    return re.match(r"\w", chr(cp)) is not None


def is_space(cp: int) -> bool:
    if cp in SURROGATES:
        return False
    return chr(cp).isspace()


def check_definitions() -> None:
    for cp in range(MAX_CP + 1):
        if cp in SURROGATES:
            continue
        c = chr(cp)
        w = is_word(cp)
        assert w == (c.isalnum() or c == "_"), hex(cp)
        s = is_space(cp)
        assert s == (re.match(r"\s", c) is not None), hex(cp)
        assert s == (len(("a" + c + "a").split()) == 2), hex(cp)
        assert s == (("a" + c).strip() == "a"), hex(cp)
        assert not (w and s), hex(cp)


def ranges(pred: Callable[[int], bool], lo: int = 0x80) -> list[tuple[int, int]]:
    """Sorted, inclusive, maximal ranges of code points >= lo satisfying pred."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    for cp in range(lo, MAX_CP + 1):
        if pred(cp):
            if start is None:
                start = cp
        elif start is not None:
            out.append((start, cp - 1))
            start = None
    if start is not None:
        out.append((start, MAX_CP))
    return out


def ascii_mask(pred: Callable[[int], bool]) -> int:
    return sum(1 << cp for cp in range(128) if pred(cp))


def emit_table(name: str, doc: str, rs: list[tuple[int, int]]) -> str:
    lines = [f"/// {doc}", "#[rustfmt::skip]", f"pub(super) static {name}: &[(u32, u32)] = &["]
    row: list[str] = []
    for lo, hi in rs:
        row.append(f"(0x{lo:X}, 0x{hi:X}),")
        if len(row) == 4:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines.append("];")
    return "\n".join(lines)


def tables() -> str:
    check_definitions()
    word = ranges(is_word)
    space = ranges(is_space)
    apos = ord("'")
    out = [
        *header(
            "pytext_tables.py",
            f"Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}",
        ),
        "//",
        "// word  = re.match(r'\\w', c)  (== c.isalnum() or c == '_')",
        "// space = c.isspace()          (== re \\s == str.split()/str.strip() whitespace)",
        "// ASCII is covered by the u128 bitmasks (bit i = code point i); the range",
        "// tables hold only code points >= 0x80, as sorted disjoint inclusive ranges.",
        "",
        "/// Bit i set iff ASCII char i is a Python `\\w` char.",
        f"pub(super) const ASCII_WORD: u128 = 0x{ascii_mask(is_word):032X};",
        "",
        "/// Bit i set iff ASCII char i is a Python `\\w` char or an apostrophe (`[\\w']`).",
        f"pub(super) const ASCII_WORD_APOS: u128 = 0x{ascii_mask(lambda c: is_word(c) or c == apos):032X};",
        "",
        "/// Bit i set iff ASCII char i is Python whitespace (`str.isspace`).",
        f"pub(super) const ASCII_SPACE: u128 = 0x{ascii_mask(is_space):032X};",
        "",
        emit_table("WORD_RANGES", f"Non-ASCII `\\w` chars ({len(word)} ranges).", word),
        "",
        emit_table("SPACE_RANGES", f"Non-ASCII whitespace chars ({len(space)} ranges).", space),
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------- fixtures


def fnv1a64(data: bytes | bytearray) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def block_hash(block: int, pred: Callable[[int], bool]) -> str:
    bits = bytearray(512)
    base = block * 4096
    for i in range(4096):
        if pred(base + i):
            bits[i >> 3] |= 1 << (i & 7)
    return f"{fnv1a64(bits):016x}"


SPACES = [chr(c) for c in range(MAX_CP + 1) if is_space(c)]
TRICKY = (
    SPACES
    + ["\u200b", "\u180e", "\ufeff", "\x00", "\x7f", "\u00ad"]  # not whitespace
    + ["\u0301", "\u0308", "\u093e", "\u0345", "\u20dd", "\ufe0f"]  # Mn/Mc/Me marks
    + ["\u4e00", "\u6587", "\u3042", "\uac00"]  # CJK / kana / hangul
    + ["\u0645", "\u0631", "\u0661", "\u06f3"]  # Arabic letters / digits
    + ["\U0001f600", "\U0001f44d", "\U0001d400", "\U00020000", "\U0001f3fb"]  # astral
    + ["\u2160", "\u3007", "\u00bd", "\u00b2", "\u2460", "\U00010107"]  # Nl / No
    + ["\u0966", "\uff11", "\u0e51"]  # Nd of other scripts
    + ["_", "\u203f", "\u2040", "\u2054", "\ufe33", "\uff3f"]  # Pc
    + ["\u00aa", "\u00b5", "\u00ba", "\u00df", "\u0130", "\u01c5", "\u02b0"]  # L* odds
    + ["\u2019", "\u02bc", "`", "\u00b4", "\u2018"]  # apostrophe look-alikes
)
ASCII = [chr(c) for c in range(0x20, 0x7F)]
PIECES = [
    "@",
    "@",
    "'",
    "'",
    " ",
    " ",
    " ",
    "http",
    " http",
    " http://",
    "https://t.co/x",
    " https://t.co/Ab1",
    " http",
    "don't",
    "'s",
    "\t",
    "\n",
    "http://a.b/c?d=e",
]


def rand_name(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return ""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
    if r < 0.15:
        alphabet += "\u00e9\u4e00\u0301"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))


def rand_text(rng: random.Random, name: str) -> str:
    out: list[str] = []
    for _ in range(rng.randint(0, 24)):
        r = rng.random()
        if r < 0.30:
            out.append(rng.choice(ASCII))
        elif r < 0.50:
            out.append(rng.choice(TRICKY))
        elif r < 0.70:
            out.append(rng.choice(PIECES))
        elif r < 0.85:
            # the screen name, or a near miss: prefix / extension / other case
            k = rng.random()
            if k < 0.6 or not name:
                out.append("@" + name)
            elif k < 0.75:
                out.append("@" + name[: rng.randint(0, len(name))])
            elif k < 0.9:
                out.append("@" + name + rng.choice("xY_1\u0301"))
            else:
                out.append("@" + name.swapcase())
        else:
            out.append(rng.choice(SPACES) * rng.randint(1, 3))
    return "".join(out)


def py_context_len(text: str, name: str) -> int:
    # literal screen name (re.escape is the identity on [A-Za-z0-9_])
    cleaned = re.sub(r"(?:@" + re.escape(name) + r")\s+| http\S+", "", text)
    return len(re.findall(r"[\w']+", cleaned))


def strip_span(text: str) -> list[int]:
    stripped = text.strip()
    a = len(text) - len(text.lstrip())
    b = a + len(stripped)
    assert text[a:b] == stripped
    return [a, b]


def case(text: str, name: str) -> list[Any]:
    return [
        text,
        name,
        len(re.findall(r"[\w']+", text)),  # count_words
        strip_span(text),  # py_strip, as code point offsets
        len(text.split()) > 0,  # has_token
        len(text),  # char_len
        py_context_len(text, name),  # context_len
    ]


def fixtures(n: int = 3000, seed: int = 20240611) -> str:
    rng = random.Random(seed)
    lines: list[Any] = []
    for _ in range(n):
        name = rand_name(rng)
        lines.append(case(rand_text(rng, name), name))
    for block in range((MAX_CP + 1) // 4096):
        lines.append(
            {
                "block": block,
                "word": block_hash(block, is_word),
                "space": block_hash(block, is_space),
            }
        )
    return "\n".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in lines) + "\n"


if __name__ == "__main__":
    assert isinstance(sys.stdout, io.TextIOWrapper)
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")
    if sys.argv[1:] == ["--fixtures"]:
        sys.stdout.write(fixtures())
    elif not sys.argv[1:]:
        sys.stdout.write(tables())
    else:
        sys.exit(__doc__)
