"""The one function that turns untrusted text into what a person is shown: `visible`.

Agent text can hide what it says. Bidi controls (U+202A-202E, U+2066-2069,
U+200E/200F, U+061C) reorder what is drawn, so a command reads differently from
what runs (Trojan Source, CVE-2021-42574); zero-width and other default-ignorable
characters (U+200B-200D, U+2060, U+FEFF, U+00AD, variation selectors, Hangul
fillers…) and Unicode tag characters (U+E0000-E007F, read by models, invisible
to people) pass unseen; C0/C1 controls start terminal escape sequences that
recolour, retitle or rewrite a terminal; U+2028/2029 break lines in Qt. Every view,
tooltip, dialog and the command line shows agent text through `visible`, which
replaces each such character by a distinct mark (`⟨U+202E⟩`, `⟨ESC⟩`) in logical
order, so `ESC[31m` reads `⟨ESC⟩[31m` and nothing is interpreted.

The mark brackets themselves (U+27E8, U+27E9) are marked too when they occur in
the input, so agent text cannot forge a mark or hide a real one behind a fake.

`findings` lists the hidden characters with their names and positions (for the
approval banner); `mixed_scripts` flags words that mix writing systems ("paypal" spelt
with a Cyrillic a, U+0430), the usual homoglyph trick. No Qt here: the CLI uses it too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

OPEN, CLOSE = "⟨", "⟩"
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
"""Controls, format characters (bidi, zero-width, tags, soft hyphen), line/paragraph separators,
surrogates, private use and unassigned code points: none of them reads as itself."""

EXTRA_INVISIBLE: tuple[tuple[int, int], ...] = (
    (0x034F, 0x034F),    # COMBINING GRAPHEME JOINER
    (0x115F, 0x1160),    # HANGUL CHOSEONG/JUNGSEONG FILLER
    (0x17B4, 0x17B5),    # KHMER VOWEL INHERENT AQ/AA
    (0x180B, 0x180F),    # MONGOLIAN FREE VARIATION SELECTORS
    (0x2800, 0x2800),    # BRAILLE PATTERN BLANK (renders as a space)
    (0x3164, 0x3164),    # HANGUL FILLER
    (0xFE00, 0xFE0F),    # VARIATION SELECTORS (also used to smuggle bytes)
    (0xFFA0, 0xFFA0),    # HALFWIDTH HANGUL FILLER
    (0xE0100, 0xE01EF),  # VARIATION SELECTORS SUPPLEMENT
)
"""Default-ignorable or blank-rendering characters that are letters or marks, not format characters."""

C0_ABBREVIATIONS = ("NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "TAB", "LF", "VT", "FF", "CR",
                    "SO", "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC",
                    "FS", "GS", "RS", "US")
C0_NAMES = ("NULL", "START OF HEADING", "START OF TEXT", "END OF TEXT", "END OF TRANSMISSION", "ENQUIRY",
            "ACKNOWLEDGE", "BELL", "BACKSPACE", "CHARACTER TABULATION", "LINE FEED", "LINE TABULATION",
            "FORM FEED", "CARRIAGE RETURN", "SHIFT OUT", "SHIFT IN", "DATA LINK ESCAPE", "DEVICE CONTROL ONE",
            "DEVICE CONTROL TWO", "DEVICE CONTROL THREE", "DEVICE CONTROL FOUR", "NEGATIVE ACKNOWLEDGE",
            "SYNCHRONOUS IDLE", "END OF TRANSMISSION BLOCK", "CANCEL", "END OF MEDIUM", "SUBSTITUTE", "ESCAPE",
            "INFORMATION SEPARATOR FOUR", "INFORMATION SEPARATOR THREE", "INFORMATION SEPARATOR TWO",
            "INFORMATION SEPARATOR ONE")
C1_NAMES = {0x85: "NEXT LINE", 0x9B: "CONTROL SEQUENCE INTRODUCER", 0x9D: "OPERATING SYSTEM COMMAND",
            0x90: "DEVICE CONTROL STRING", 0x9C: "STRING TERMINATOR"}
LINE_KEEPERS = "\n\t"
"""What a multi-line block may keep as itself (`lines=True`): real line breaks and tabs."""
SLICE = 4096
"""Text is checked in slices: a slice `str.isprintable()` accepts needs no per-character work."""
_EXTRAS = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in EXTRA_INVISIBLE) + OPEN + CLOSE + "]")


@lru_cache(maxsize=4096)
def is_hidden(char: str) -> bool:
    """True for a character that must not reach a person as itself (see the module docstring)."""
    if char in (OPEN, CLOSE):
        return True
    if unicodedata.category(char) in HIDDEN_CATEGORIES:
        return True
    code = ord(char)
    return any(a <= code <= b for a, b in EXTRA_INVISIBLE)


def mark(char: str) -> str:
    """The visible stand-in for one hidden character: `⟨ESC⟩` for C0 controls and DEL, else `⟨U+202E⟩`."""
    code = ord(char)
    if code < 0x20:
        return f"{OPEN}{C0_ABBREVIATIONS[code]}{CLOSE}"
    if code == 0x7F:
        return f"{OPEN}DEL{CLOSE}"
    return f"{OPEN}U+{code:04X}{CLOSE}"


def char_name(char: str) -> str:
    """A name a person can look up: the Unicode name, or what kind of code point it is."""
    code = ord(char)
    if code < 0x20:
        return C0_NAMES[code]
    if code == 0x7F:
        return "DELETE"
    if 0x80 <= code <= 0x9F:
        return C1_NAMES.get(code, f"C1 CONTROL U+{code:04X}")
    name = unicodedata.name(char, "")
    if name:
        return name
    kind = {"Cs": "SURROGATE", "Co": "PRIVATE USE"}.get(unicodedata.category(char), "UNASSIGNED")
    return f"{kind} U+{code:04X}"


def _suspect(piece: str, lines: bool) -> bool:
    """Whether a slice may hold a hidden character (cheap: two C-level scans for ordinary text)."""
    if lines:
        piece = piece.replace("\n", "").replace("\t", "")
    if not piece.isprintable():
        return True
    return not piece.isascii() and _EXTRAS.search(piece) is not None  # ASCII holds no extra invisible


def visible(text: str, *, lines: bool = False) -> str:
    """`text` with every hidden character replaced by its mark, in logical order.

    With `lines=True` line feeds and tabs stay as themselves (multi-line blocks);
    otherwise they are marked too, so the result is always one line.
    """
    out: list[str] = []
    for start in range(0, len(text), SLICE):
        piece = text[start:start + SLICE]
        if not _suspect(piece, lines):
            out.append(piece)
            continue
        out.append(piece.translate(_LINE_MARKS if lines else _MARKS))
    return "".join(out)


class _MarkTable(dict[int, "int | str"]):
    """A `str.translate` table filled on demand: each code point is judged once, then looked up in C."""

    def __init__(self, lines: bool) -> None:
        super().__init__()
        self.lines = lines

    def __missing__(self, code: int) -> int | str:
        char = chr(code)
        value: int | str = code
        if is_hidden(char) and not (self.lines and char in LINE_KEEPERS):
            value = mark(char)
        if len(self) < 200_000:  # bounded: a text of every code point must not grow it without end
            self[code] = value
        return value


_MARKS, _LINE_MARKS = _MarkTable(lines=False), _MarkTable(lines=True)


def has_hidden(text: str) -> bool:
    """Whether `text` holds a character `findings` would report (the mark brackets are not hidden)."""
    return any(_suspect(text[s:s + SLICE], True) and any(is_hidden(c) and c not in LINE_KEEPERS + OPEN + CLOSE
                                                          for c in text[s:s + SLICE])
               for s in range(0, len(text), SLICE))


@dataclass(frozen=True, slots=True)
class Finding:
    """One hidden character: where it is (code-point offset), what it is, and how it is shown."""

    position: int
    char: str

    @property
    def name(self) -> str:
        return char_name(self.char)

    @property
    def mark(self) -> str:
        return mark(self.char)


def findings(text: str, *, lines: bool = True) -> list[Finding]:
    """Every hidden character in `text` (line feeds and tabs are not news in multi-line text)."""
    found: list[Finding] = []
    for start in range(0, len(text), SLICE):
        piece = text[start:start + SLICE]
        if not _suspect(piece, lines):
            continue
        found += [Finding(start + n, c) for n, c in enumerate(piece)
                  if is_hidden(c) and c not in (OPEN, CLOSE) and not (lines and c in LINE_KEEPERS)]
    return found


@dataclass(frozen=True, slots=True)
class MixedWord:
    """A word whose letters come from more than one script: a likely homoglyph."""

    position: int
    word: str
    scripts: tuple[str, ...]


WORD = re.compile(r"[^\W\d_]+")
SCRIPT_FAMILIES = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "IDEOGRAPHIC": "CJK", "CJK": "CJK"}
"""Scripts that legitimately share a word (Japanese mixes kanji and kana) count as one."""


@lru_cache(maxsize=8192)
def script_of(char: str) -> str:
    """The script a letter belongs to, from the first word of its Unicode name (LATIN, CYRILLIC…)."""
    first = unicodedata.name(char, "UNKNOWN").split(" ", 1)[0]
    return SCRIPT_FAMILIES.get(first, first)


def mixed_scripts(text: str) -> list[MixedWord]:
    """Words (runs of letters) that mix scripts, e.g. Latin p, y, l with a Cyrillic a (U+0430)."""
    if text.isascii():
        return []
    found = []
    for match in WORD.finditer(text):
        word = match.group()
        if word.isascii():
            continue
        scripts = tuple(sorted({script_of(c) for c in word if unicodedata.category(c).startswith("L")}))
        if len(scripts) > 1:
            found.append(MixedWord(match.start(), word, scripts))
    return found


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"
