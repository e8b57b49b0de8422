#!/usr/bin/env python3
"""Generator for `crates/pycompat/src/tokens_tables.rs`: every character class
and Unicode table that the tokenizer (`crates/pycompat/src/tokens/`) needs to
reproduce RPDNN's `preprocessing_tweet_text` (Python 3.11 / Unicode 14.0
`str.lower`, `re`, `unicodedata`; nltk 3.10.4 `TweetTokenizer` on the `regex`
module) bit for bit.

Usage (from the repository root, with CPython 3.11.7 and the `regex` version
of requirements.txt beside this file):

    python3 tools/pycompat-tables/regen.py            # writes every output
    python3 tools/pycompat-tables/regen.py --check    # compares instead

The `regex` module carries Unicode tables of its own, newer than Python's:
another version gives other `\w` ranges (2026.5.9 does), hence the pin.

Every leaf class of nltk's patterns is *probed*: the class source, exactly as
nltk writes it, is compiled with nltk's flags (`regex.V0 | I | U | X` for the
tokenizer pattern, none for HANG_RE and ENT_RE) and matched against every code
point 0..=0x10FFFF except the surrogates. The Rust pattern is then assembled
from the resulting explicit ranges and compiled case-sensitively, so neither
Rust's Unicode tables nor its case folding ever matter.
"""

import html.entities
import sys
import unicodedata
from collections.abc import Iterable, Sequence

import regex
from generated import header

# The version the committed tables were generated with (see the docstring).
REGEX_VERSION = "2026.11.19"

SURR = range(0xD800, 0xE000)
ALL = "".join(chr(c) for c in range(0x110000) if c not in SURR)
TOK_FLAGS = regex.V0 | regex.I | regex.U | regex.X

# (Rust name, class source as written in nltk/tokenize/casual.py, flags)
CLASSES = [
    # URLS, first branch
    ("H", "h", TOK_FLAGS),
    ("T", "t", TOK_FLAGS),
    ("P", "p", TOK_FLAGS),
    ("S", "s", TOK_FLAGS),
    ("AZ09PCT", "[a-z0-9%]", TOK_FLAGS),
    ("AZ09DOTDASH", r"[a-z0-9.\-]", TOK_FLAGS),
    ("DOT", "[.]", TOK_FLAGS),
    ("AZ", "[a-z]", TOK_FLAGS),
    ("URLRUN", r"[^\s()<>{}\[\]]", TOK_FLAGS),
    ("NOSPPAR", r"[^\s()]", TOK_FLAGS),
    ("NOSP", r"[^\s]", TOK_FLAGS),
    ("URLEND", "[^\\s`!()\\[\\]{};:'\".,<>?«»“”‘’]", TOK_FLAGS),
    # naked domains (hand-written matcher)
    ("AZ09", "[a-z0-9]", TOK_FLAGS),
    ("DOTDASH", r"[.\-]", TOK_FLAGS),
    ("WORD", r"\w", TOK_FLAGS),
    # phone numbers
    ("ZEROONE", "[01]", TOK_FLAGS),
    ("PHSEP", r"[ *\-.\)]", TOK_FLAGS),
    ("LPAREN", r"[\(]", TOK_FLAGS),
    ("DIGIT", r"\d", TOK_FLAGS),
    # emoticons
    ("LTGT", "[<>]", TOK_FLAGS),
    ("EYES", "[:;=8]", TOK_FLAGS),
    ("NOSE", r"[\-o\*\']", TOK_FLAGS),
    ("MOUTH", r"[\)\]\(\[dDpP/\:\}\{@\|\\]", TOK_FLAGS),
    # html tags, arrows, handles, hashtags, emails
    ("TAGBODY", r"[^>\s]", TOK_FLAGS),
    ("DASH", r"[\-]", TOK_FLAGS),
    ("WORDU", r"[\w_]", TOK_FLAGS),
    ("HASHMID", r"[\w\'_\-]", TOK_FLAGS),
    ("EMLOCAL", r"[\w.+-]", TOK_FLAGS),
    ("WORDDASH", r"[\w-]", TOK_FLAGS),
    # emoji sequences, flags
    ("NONSPACE", r"\S", TOK_FLAGS),
    ("SKIN", r"[\U0001f3fb-\U0001f3ff]", TOK_FLAGS),
    ("REGIND", r"[\U0001F1E6-\U0001F1FF]", TOK_FLAGS),
    # words, numbers, ellipses
    ("LETTER", r"[^\W\d_]", TOK_FLAGS),
    ("APOSDASH", r"['\-_]", TOK_FLAGS),
    ("SIGN", r"[+\-]", TOK_FLAGS),
    ("NUMSEP", r"[,/.:-]", TOK_FLAGS),
    ("HSPACE", r"[^\S\r\n]", TOK_FLAGS),
    # HANG_RE (no flags) and ENT_RE (no flags)
    ("HANG", r"[^\p{L}\p{N}]", 0),
    ("ENTBODY", r"[^&;\s]", 0),
]

# Literal characters of the tokenizer pattern that are not letters: each must
# match only itself under the pattern's flags (checked, not assumed).
LITERALS = ":/()<>-@#+.3\u200d\U0001f3f4" + "".join(
    chr(c)
    for c in (
        0xE0067,
        0xE0062,
        0xE0065,
        0xE006E,
        0xE0073,
        0xE0063,
        0xE0074,
        0xE0077,
        0xE006C,
        0xE007F,
    )
)


def probe(src: str, flags: int) -> list[int]:
    rx = regex.compile(src, flags)
    return sorted(ord(ch) for ch in rx.findall(ALL))


def ranges(cps: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for c in cps:
        if out and out[-1][1] + 1 == c:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def emit_ranges(out: list[str], name: str, rs: Sequence[Sequence[int]], doc: str) -> None:
    out.append(f"/// {doc}")
    out.append(f"pub static {name}: &[(u32, u32)] = &[")
    line = "   "
    for lo, hi in rs:
        item = f" (0x{lo:X}, 0x{hi:X}),"
        if len(line) + len(item) > 96:
            out.append(line)
            line = "   "
        line += item
    if line.strip():
        out.append(line)
    out.append("];")


def emit_pairs(
    out: list[str], name: str, ty: str, items: Iterable[Sequence[int | str]], doc: str
) -> None:
    out.append(f"/// {doc}")
    out.append(f"pub static {name}: &[{ty}] = &[")
    line = "   "
    for it in items:
        item = " (" + ", ".join(f"0x{v:X}" if isinstance(v, int) else v for v in it) + "),"
        if len(line) + len(item) > 96:
            out.append(line)
            line = "   "
        line += item
    if line.strip():
        out.append(line)
    out.append("];")


def tables() -> str:
    """The text of tokens_tables.rs."""
    assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version
    if regex.__version__ != REGEX_VERSION:
        sys.exit(f"regex {regex.__version__} installed; the tables need regex=={REGEX_VERSION}")
    out = header(
        "tokens_tables.py",
        f"Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}, "
        f"regex {regex.__version__}",
    )
    out.append("")
    for ch in LITERALS:
        got = probe(regex.escape(ch), TOK_FLAGS)
        assert got == [ord(ch)], (hex(ord(ch)), got)
    # The port anchors each match at the first non-\s char: every class that can
    # start a match must lie inside \S.
    nonspace = set(probe(r"\S", TOK_FLAGS))
    for first in [
        "h",
        r"[a-z0-9.\-]",
        "[a-z0-9]",
        r"\+",
        "[01]",
        r"[\(]",
        r"\d",
        "[<>]",
        "[:;=8]",
        r"[\)\]\(\[dDpP/\:\}\{@\|\\]",
        "<",
        r"[\-]",
        "@",
        r"\#",
        r"[\w.+-]",
        r"[\U0001F1E6-\U0001F1FF]",
        "\U0001f3f4",
        r"[^\W\d_]",
        r"[+\-]",
        r"[\w_]",
        r"\.",
    ]:
        assert set(probe(first, TOK_FLAGS)) <= nonspace, first
    for name, src, flags in CLASSES:
        fl = "V0|I|U|X" if flags else "none"
        emit_ranges(
            out,
            f"CLS_{name}",
            ranges(probe(src, flags)),
            f"`{src}` (flags {fl})".replace("\\", "\\\\"),
        )

    # str.isspace: reused from pytext (same definition), but checked here.
    # str.lower(): full mappings (Final_Sigma handled in Rust for U+03A3).
    single: list[tuple[int, int]] = []
    multi: list[tuple[int, str]] = []
    for c in range(0x110000):
        if c in SURR:
            continue
        lo = chr(c).lower()
        if lo != chr(c):
            if len(lo) == 1:
                single.append((c, ord(lo)))
            else:
                multi.append((c, lo))
    emit_pairs(
        out,
        "LOWER1",
        "(u32, u32)",
        single,
        "`str.lower()` mappings to one code point (other than U+03A3's context rule).",
    )
    out.append("/// `str.lower()` mappings to several code points.")
    out.append("pub static LOWER_MULTI: &[(u32, &str)] = &[")
    for c, lo in multi:
        esc = "".join(f"\\u{{{ord(x):X}}}" for x in lo)
        out.append(f'    (0x{c:X}, "{esc}"),')
    out.append("];")
    # Final_Sigma: ci = case-ignorable; cased_nci = cased and not case-ignorable.
    ci: list[int] = []
    cased_nci: list[int] = []
    for c in range(0x110000):
        if c in SURR:
            continue
        f1 = (chr(c) + "\u03a3").lower()[-1] == "\u03c2"
        f2 = ("A" + chr(c) + "\u03a3").lower()[-1] == "\u03c2"
        f3 = ("A\u03a3" + chr(c)).lower()[1] == "\u03c2"
        # f1 = !ci && cased ; f2 = ci || cased ; f3 = ci || !cased  (forward scan)
        if f1:
            cased_nci.append(c)
            assert f2 and not f3
        elif f2:
            ci.append(c)
            assert f3
        else:
            assert f3
    emit_ranges(
        out,
        "CASE_IGNORABLE",
        ranges(ci),
        "Case-ignorable code points (CPython's Final_Sigma rule), probed.",
    )
    emit_ranges(
        out,
        "CASED_NOT_CI",
        ranges(cased_nci),
        "Cased code points that are not case-ignorable, probed.",
    )

    # int(): decimal digit values (any Unicode Nd).
    dec = [
        (c, unicodedata.decimal(chr(c)))
        for c in range(0x110000)
        if c not in SURR and unicodedata.decimal(chr(c), -1) >= 0
    ]
    emit_pairs(
        out,
        "DECIMAL",
        "(u32, u32)",
        dec,
        "Code points with a decimal value (`int()` accepts them as digits).",
    )

    # unicodedata: full canonical decompositions (Hangul is algorithmic in Rust).
    dec_idx: list[tuple[int, int, int]] = []
    dec_data: list[int] = []
    for c in range(0x110000):
        if c in SURR or 0xAC00 <= c <= 0xD7A3:
            continue
        d = unicodedata.normalize("NFD", chr(c))
        if d != chr(c):
            dec_idx.append((c, len(dec_data), len(d)))
            dec_data.extend(ord(x) for x in d)
    emit_pairs(
        out,
        "DECOMP",
        "(u32, u16, u8)",
        dec_idx,
        "NFD of single code points: (code point, offset in DECOMP_DATA, length).",
    )
    out.append("/// Concatenated decompositions.")
    out.append("pub static DECOMP_DATA: &[u32] = &[")
    for i in range(0, len(dec_data), 10):
        out.append("    " + " ".join(f"0x{v:X}," for v in dec_data[i : i + 10]))
    out.append("];")
    ccc: list[list[int]] = []
    for c in range(0x110000):
        if c in SURR:
            continue
        k = unicodedata.combining(chr(c))
        if k:
            if ccc and ccc[-1][1] == c - 1 and ccc[-1][2] == k:
                ccc[-1][1] = c
            else:
                ccc.append([c, c, k])
    emit_pairs(
        out,
        "CCC",
        "(u32, u32, u8)",
        ccc,
        "Canonical combining classes other than 0: (first, last, class).",
    )
    mn = [c for c in range(0x110000) if c not in SURR and unicodedata.category(chr(c)) == "Mn"]
    emit_ranges(out, "MN", ranges(mn), "General category Mn (what gensim's deaccent drops).")
    comp: list[tuple[int, int, int]] = []
    for c in range(0x110000):
        if c in SURR or 0xAC00 <= c <= 0xD7A3:
            continue
        d = unicodedata.decomposition(chr(c))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        if len(parts) == 2 and unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(
            c
        ):
            comp.append((parts[0], parts[1], c))
    comp.sort()
    assert min(b for _, b, _ in comp) >= 0x300  # normalize.rs relies on it
    emit_pairs(
        out,
        "COMPOSE",
        "(u32, u32, u32)",
        comp,
        "Primary composites: (first, second, composite), sorted.",
    )

    # html.entities.name2codepoint (HTML 4, case-sensitive names).
    names = sorted(html.entities.name2codepoint.items())
    out.append("/// `html.entities.name2codepoint`, sorted by name.")
    out.append("pub static ENTITIES: &[(&str, u32)] = &[")
    for n, c in names:
        out.append(f'    ("{n}", 0x{c:X}),')
    out.append("];")
    cp: list[int] = []
    for b in range(0x80, 0xA0):
        try:
            cp.append(ord(bytes((b,)).decode("cp1252")))
        except UnicodeDecodeError:
            cp.append(0)
    out.append("/// cp1252 decoding of bytes 0x80..=0x9F (0 = undefined: UnicodeDecodeError).")
    out.append("pub static CP1252: [u32; 32] = [" + ", ".join(f"0x{v:X}" for v in cp) + "];")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(tables())
