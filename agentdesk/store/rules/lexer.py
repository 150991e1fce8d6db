"""Two small shell lexers of our own, independent of bashlex, each failing in the safe direction.

`strict_commands` is the allow side's second opinion. It accepts only what it can
prove is plain words: unquoted safe characters, single quotes, double quotes with
no `$` or backtick, backslash escapes (not line continuations), `~` alone or
before `/`, the operators `&& || ; & |` and newlines, subshells `( … )`, brace
groups `{ …; }` and fd duplication (`2>&1`). Anything else — `$` in any form,
backticks, `<(`/`>(`, every file redirect and here-document, `#` comments, `!`,
reserved words (`if`, `for`, `time`…), braces inside a word, CR and other control
or non-ASCII punctuation/space characters outside quotes, an unclosed quote — makes
it return None with the reason: no allow rule can vouch for that command, a person
decides. Its words are compared with bashlex's: an allow rule matches only when
the two parsers agree on every simple command (bashlex mis-reads `~$(…)` and
`''$(…)''` as one harmless word; this lexer refuses both).

`deny_candidates` is the deny side's: an over-approximation of every command the
text might run. It splits at every operator and opens a new command at every
`$(`, backtick, `<(`, `>(`, `$((`, even inside double quotes or after `~`, decodes
`$'…'` (ANSI-C) quoting, brace-expands words (`{rm,-rf,~}`), strips leading
reserved words and assignments, looks past wrappers (`env`, `sudo`, `xargs`,
`exec`…) and reads the string arguments of `sh -c`, `eval`, `env -S`, `su -c`, `ssh`
and here-strings as scripts of their own. A word only known at run time is None,
and a deny rule treats it as matching anything: a deny rule errs towards denying.

Both are linear scans with a deadline (`Budget`): running out of time is reported,
and the caller lets no rule decide.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass

Words = tuple[str | None, ...]


class OverBudget(Exception):
    """The scan ran out of its time budget."""


@dataclass(slots=True)
class Budget:
    """A deadline in this thread's CPU time: a busy machine or another thread holding the GIL does not
    spend it, so a short command never runs out on a loaded host while a hostile one still stops."""

    deadline: float

    @classmethod
    def of(cls, seconds: float) -> Budget:
        return cls(time.thread_time() + seconds)

    @property
    def spent(self) -> bool:
        return time.thread_time() > self.deadline

    def check(self) -> None:
        if self.spent:
            raise OverBudget("the command took too long to parse")


# -- the strict lexer (allow side) ----------------------------------------------------------------
SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:,+=@%]")
GLOB = frozenset("*?[")
BLANK = frozenset(" \t")
ENDS_WORD = frozenset(" \t\n;&|()<>")
RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
                      "select", "function", "time", "coproc", "[[", "]]", "!", "{", "}"})
DQ_ESCAPES = frozenset('$`"\\')
FD_DUP = re.compile(r"[<>]&[0-9]+")
MAX_NESTING = 32


class Refused(Exception):
    """The strict lexer cannot prove the command is plain; the message says what it met."""


@dataclass(frozen=True, slots=True)
class StrictCommand:
    literal: tuple[str, ...]
    """The words after quote removal, as written (compared with bashlex's)."""
    words: Words
    """The same, with a word holding an unquoted glob (`*`, `?`, `[`) as None: only known at run time."""


class _Strict:
    def __init__(self, text: str, budget: Budget) -> None:
        self.text = text
        self.budget = budget
        self.commands: list[StrictCommand] = []
        self.literal: list[str] = []
        self.words: list[str | None] = []
        self.word: list[str] | None = None
        self.glob = False
        self.quoted = False
        self.stack: list[str] = []
        self.need = True
        """A command must follow (at the start, after && || | ( and {)."""
        self.closed = False
        """Just after `)` or `}`: only an operator, a newline or another closer may follow."""
        self.separator = "\n"
        """What ended the previous command: `}` may only follow ; & or a newline."""

    def run(self) -> list[StrictCommand]:
        text, i, n = self.text, 0, len(self.text)
        while i < n:
            if i % 512 == 0:
                self.budget.check()
            c = text[i]
            if c in BLANK:
                self.end_word()
                i += 1
            elif c == "\n":
                self.end_word()
                if not (self.need and not self.words and not self.closed):  # else still waiting for a command
                    self.separate("\n", need=False)
                i += 1
            elif c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise Refused("a single quote is never closed")
                self.append(text[i + 1:end], quoted=True)
                i = end + 1
            elif c == '"':
                i = self.double_quoted(i + 1)
            elif c == "\\":
                if i + 1 >= n or text[i + 1] == "\n":
                    raise Refused("it continues a line with a backslash")
                self.append(text[i + 1], quoted=True)
                i += 2
            elif c in "$`":
                raise Refused("it expands a parameter or substitutes a command ($ or a backtick)")
            elif c in ";&|":
                i = self.operator(i)
            elif c == "(":
                if self.word is not None or self.words or self.closed:
                    raise Refused("it uses ( inside a command")
                if text.startswith("((", i):  # an arithmetic command evaluates variables as expressions
                    raise Refused("it has an arithmetic command (( … ))")
                self.open("(")
                i += 1
            elif c == ")":
                self.end_word()
                if not self.stack or self.stack[-1] != "(" or (self.need and not self.words):
                    raise Refused("a ) does not close a subshell")
                self.stack.pop()
                self.finish_command()
                self.closed, self.separator = True, ")"
                i += 1
            elif c in "<>":
                i = self.redirect(i)
            elif c == "~":
                following = text[i + 1:i + 2]
                if self.word is not None or not (following in ("", "/") or following in ENDS_WORD):
                    raise Refused("it uses ~ other than alone or before /")
                self.append("~", quoted=False)
                i += 1
            elif c in "{}":
                i = self.brace(i)
            elif c == "#":
                if self.word is None:
                    raise Refused("it has a # comment")
                self.append(c, quoted=False)
                i += 1
            elif c in GLOB:
                self.append(c, quoted=False)
                self.glob = True
                i += 1
            elif c in SAFE or (ord(c) > 127 and c.isalnum()):
                self.append(c, quoted=False)
                i += 1
            else:
                shown = c if c.isascii() and c.isprintable() else f"U+{ord(c):04X}"
                raise Refused(f"it has the character {shown} outside quotes")
        self.end_word()
        if self.stack:
            raise Refused("a subshell or brace group is never closed")
        if self.need and not self.words and self.separator in ("&&", "||", "|"):
            raise Refused("an operator has no command after it")
        self.finish_command()
        if not self.commands:
            raise Refused("there is no command")
        return self.commands

    # -- words ------------------------------------------------------------------------------------
    def append(self, chars: str, *, quoted: bool) -> None:
        if self.closed:
            raise Refused("a word follows a closing ) or }")
        if self.word is None:
            self.word = []
        self.word.append(chars)
        self.quoted |= quoted

    def end_word(self) -> None:
        if self.word is None:
            return
        value = "".join(self.word)
        if not self.words and not self.quoted and value in RESERVED:
            raise Refused(f"it uses the reserved word {value!r}")
        self.literal.append(value)
        self.words.append(None if self.glob else value)
        self.word, self.glob, self.quoted = None, False, False

    def double_quoted(self, i: int) -> int:
        text, n = self.text, len(self.text)
        out: list[str] = []
        while i < n:
            c = text[i]
            if c == '"':
                self.append("".join(out), quoted=True)
                return i + 1
            if c in "$`":
                raise Refused("it expands a parameter or substitutes a command inside double quotes")
            if c == "\\":
                following = text[i + 1:i + 2]
                if following == "\n":
                    raise Refused("it continues a line with a backslash")
                if following in DQ_ESCAPES and following:
                    out.append(following)
                    i += 2
                    continue
            out.append(c)
            i += 1
        raise Refused("a double quote is never closed")

    # -- structure --------------------------------------------------------------------------------
    def finish_command(self) -> None:
        if self.words:
            self.commands.append(StrictCommand(tuple(self.literal), tuple(self.words)))
        self.literal, self.words = [], []

    def separate(self, separator: str, *, need: bool) -> None:
        self.finish_command()
        self.need, self.closed, self.separator = need, False, separator

    def operator(self, i: int) -> int:
        self.end_word()
        text = self.text
        two = text[i:i + 2]
        if two in (";;", ";&", "|&", "&>"):
            raise Refused(f"it uses {two}")
        op = two if two in ("&&", "||") else text[i]
        if not self.words and not self.closed:
            raise Refused(f"{op} has no command before it")
        self.separate(op, need=op in ("&&", "||", "|"))
        return i + len(op)

    def open(self, kind: str) -> None:
        if len(self.stack) >= MAX_NESTING:
            raise Refused("subshells or groups are nested too deeply")
        self.stack.append(kind)
        self.need, self.closed, self.separator = True, False, kind

    def brace(self, i: int) -> int:
        text = self.text
        following = text[i + 1:i + 2]
        alone = self.word is None and (following == "" or following in ENDS_WORD)
        if not alone:
            raise Refused("it uses { or } inside a word (brace expansion)")
        if text[i] == "{":
            if self.words or self.closed:
                raise Refused("a { is not at the start of a command")
            self.open("{")
        else:
            if self.words or not self.stack or self.stack[-1] != "{" or self.separator not in (";", "&", "\n") \
                    or self.need:
                raise Refused("a } does not close a brace group")
            self.stack.pop()
            self.closed, self.separator = True, "}"
        return i + 1

    def redirect(self, i: int) -> int:
        text = self.text
        if self.word is not None and not self.quoted and "".join(self.word).isdigit():
            self.word, self.glob = None, False  # the fd number of `2>&1`
        else:
            self.end_word()
        if self.closed:
            raise Refused("a closing ) or } has a redirect")
        match = FD_DUP.match(text, i)
        if match is None or (match.end() < len(text) and text[match.end()] not in ENDS_WORD):
            raise Refused("it redirects to or from a file, or has a here-document")
        return match.end()


def strict_commands(text: str, budget: Budget) -> list[StrictCommand]:
    """The simple commands of `text` if this lexer can prove they are plain words; raises `Refused` otherwise."""
    if "\x00" in text:
        raise Refused("it contains a NUL character")
    return _Strict(text, budget).run()


# -- the deny scanner (over-approximation) --------------------------------------------------------
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "ash", "busybox", "rbash"})
SCRIPT_RUNNERS = SHELLS | {"eval", "su", "ssh", "env", "watch", "runuser", "script", "flock", "sudo", "doas"}
"""Commands some of whose arguments may be a script: every literal argument is scanned as one."""
STDIN_READERS = SHELLS | {"source", ".", "eval", "xargs", "parallel", "ssh"}
"""With one of these in a text, every literal word holding a space anywhere in it is scanned as a script."""
WRAPPERS = frozenset({"env", "sudo", "doas", "exec", "nohup", "time", "command", "builtin", "nice", "ionice",
                      "timeout", "stdbuf", "xargs", "setsid", "chroot", "strace", "ltrace", "watch", "unbuffer",
                      "find", "parallel", "su", "ssh", "runuser", "chrt", "taskset", "flock", "nsenter", "unshare",
                      "busybox", "fakeroot", "proot", "firejail", "then", "do", "else", "coproc"})
"""Commands that run another command named in their arguments: every suffix of their argv is a candidate."""
LEADING = frozenset({"!", "{", "}", "(", ")", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                     "time", "coproc", "function", "case", "esac", "select", "[[", "]]"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
IFS = re.compile(r"\$(\{IFS\}|IFS(?![A-Za-z0-9_]))")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
MAX_DEPTH = 3
MAX_SUFFIXES = 64
"""A wrapper's argv is looked past at its first 64 non-option words (`sudo -u root rm …`)."""
MAX_EXPANSION = 64
ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
               "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


class _Word:
    __slots__ = ("chars", "dynamic", "started")

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.dynamic = False
        self.started = False


class _Frame:
    """One command context: the top level, a `$(…)`, a backtick, a `<(…)`…"""

    __slots__ = ("candidate", "closer", "parens", "target", "word")

    def __init__(self, closer: str) -> None:
        self.closer = closer
        self.parens = 0
        self.candidate: list[str | None] = []
        self.word = _Word()
        self.target = ""
        """The redirect operator whose target the next word is ("" when none)."""


class _Scanner:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.found: list[list[str | None]] = []
        self.scripts: list[str] = []

    def scan(self, text: str) -> None:
        frames = [_Frame("")]
        i, n = 0, len(text)
        while i < n:
            if i % 256 == 0:
                self.budget.check()
            frame = frames[-1]
            if frame.closer in ("}", "]"):  # inside ${…} or $[…]: only look for substitutions
                i = self.in_parameter(text, i, frames)
            elif frame.closer == '"':
                i = self.in_double_quotes(text, i, frames)
            else:
                i = self.in_command(text, i, frames)
        for frame in reversed(frames):
            self.end_candidate(frame)

    def in_command(self, text: str, i: int, frames: list[_Frame]) -> int:
        frame = frames[-1]
        word = frame.word
        c = text[i]
        if frame.closer == "`" and c == "`":
            self.end_candidate(frame)
            frames.pop()
            return i + 1
        if c in " \t":
            self.end_word(frame)
        elif c in "\n;&|\r":
            self.end_candidate(frame)
        elif c == "(":
            self.end_candidate(frame)
            frame.parens += 1
        elif c == ")":
            self.end_candidate(frame)
            if frame.parens == 0 and frame.closer == ")":
                frames.pop()
            else:
                frame.parens = max(0, frame.parens - 1)
        elif c == "'":
            end = text.find("'", i + 1)
            end = len(text) if end < 0 else end
            self.add(word, text[i + 1:end])
            return end + 1
        elif c == '"':
            self.open_quote(frames)
        elif c == "\\":
            if text[i + 1:i + 2] != "\n":  # a line continuation joins the two halves of a word
                self.add(word, text[i + 1:i + 2])
            return i + 2
        elif c == "$":
            return self.dollar(text, i, frames)
        elif c == "`":
            word.dynamic = word.started = True
            frames.append(_Frame("`"))
        elif c in "<>":
            if text[i + 1:i + 2] == "(":
                word.dynamic = word.started = True
                frames.append(_Frame(")"))
                return i + 2
            if word.started and not word.dynamic and "".join(word.chars).isdigit():
                frame.word = _Word()  # the fd number of `2>&1`, not an argument
            else:
                self.end_word(frame)
            j = i
            while j < len(text) and text[j] in "<>&|-":
                j += 1
            frame.target = text[i:j]
            return j
        else:
            self.add(word, c)
        return i + 1

    @staticmethod
    def open_quote(frames: list[_Frame]) -> None:
        quote = _Frame('"')
        quote.word = frames[-1].word  # the quoted text belongs to the word it is in
        quote.word.started = True
        frames.append(quote)

    def in_double_quotes(self, text: str, i: int, frames: list[_Frame]) -> int:
        word = frames[-1].word
        c = text[i]
        if c == '"':
            frames.pop()
            return i + 1
        if c == "\\" and i + 1 < len(text):
            self.add(word, text[i + 1] if text[i + 1] in DQ_ESCAPES else text[i:i + 2])
            return i + 2
        if c == "$":
            return self.dollar(text, i, frames)
        if c == "`":
            word.dynamic = True
            frames.append(_Frame("`"))
            return i + 1
        self.add(word, c)
        return i + 1

    def dollar(self, text: str, i: int, frames: list[_Frame]) -> int:
        """`$…` at `i`: a substitution opens a new frame; an ANSI-C string is decoded; the rest is dynamic."""
        quoted = frames[-1].closer == '"'
        word = frames[-1].word
        if not quoted:
            split = IFS.match(text, i)
            if split is not None:  # `rm${IFS}-rf${IFS}~`: unquoted, the default IFS splits it into words
                self.end_word(frames[-1])
                return split.end()
        following = text[i + 1:i + 2]
        if following in ("(", "{", "["):
            word.dynamic = word.started = True
            frames.append(_Frame({"(": ")", "{": "}", "[": "]"}[following]))
            return i + 2  # `$((` is `$(` then `(`: its words are candidates too (over-approximation)
        if following == "'" and not quoted:
            decoded, end = ansi_c(text, i + 2)
            self.add(word, decoded)
            return end
        if following == '"' and not quoted:
            self.open_quote(frames)
            return i + 2
        match = NAME.match(text, i + 1)
        if match is None:
            self.add(word, "$")
            return i + 1
        word.dynamic = word.started = True
        return match.end()

    def in_parameter(self, text: str, i: int, frames: list[_Frame]) -> int:
        frame = frames[-1]
        c = text[i]
        if c == frame.closer and frame.parens == 0:
            frames.pop()
            return i + 1
        if c == "{":
            frame.parens += 1
        elif c == "}":
            frame.parens = max(0, frame.parens - 1)
        elif c == "\\":
            return i + 2
        elif c == "$" and text[i + 1:i + 2] in ("(", "{", "["):
            frames.append(_Frame({"(": ")", "{": "}", "[": "]"}[text[i + 1]]))
            return i + 2
        elif c == "`":
            frames.append(_Frame("`"))
        elif c in "<>" and text[i + 1:i + 2] == "(":
            frames.append(_Frame(")"))
            return i + 2
        return i + 1

    @staticmethod
    def add(word: _Word, chars: str) -> None:
        word.chars.append(chars)
        word.started = True

    def end_word(self, frame: _Frame) -> None:
        word = frame.word
        if not word.started:
            return
        value = None if word.dynamic else "".join(word.chars)
        frame.word = _Word()
        if value in ("{", "}") and not frame.target:  # `f() { rm -rf ~; }`: a group opens a new command
            self.end_candidate(frame)
            return
        if frame.target:
            target, frame.target = frame.target, ""
            if target == "<<<" and value is not None:
                self.scripts.append(value)  # `bash <<< 'rm -rf ~'`: a here-string may be a script
            return  # a redirect's target is not an argument
        frame.candidate.append(value)

    def end_candidate(self, frame: _Frame) -> None:
        self.end_word(frame)
        frame.target = ""
        if frame.candidate:
            self.found.append(frame.candidate)
        frame.candidate = []


def ansi_c(text: str, i: int) -> tuple[str, int]:
    """Decode a `$'…'` string whose body starts at `i`; returns the value and the index after the closing quote."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "'":
            return "".join(out), i + 1
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        i += 2
        if e in ANSI_SIMPLE:
            out.append(ANSI_SIMPLE[e])
        elif e in "01234567":
            digits = re.match(r"[0-7]{0,2}", text[i:]).group()  # type: ignore[union-attr]
            out.append(chr(int(e + digits, 8) & 0xFF))
            i += len(digits)
        elif e in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[e]
            digits = re.match(rf"[0-9A-Fa-f]{{1,{size}}}", text[i:])
            if digits is None:
                out.append("\\" + e)
            else:
                code = int(digits.group(), 16)
                out.append(chr(code) if code < 0x110000 else "\ufffd")
                i += len(digits.group())
        elif e == "c" and i < n:
            out.append(chr(ord(text[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    return "".join(out), n


def brace_expand(word: str, limit: int = MAX_EXPANSION) -> list[str]:
    """Bash's brace expansion of `word` (`{a,b}`, nested; not sequences), at most `limit` results."""
    results = [word]
    done: list[str] = []
    while results:
        current = results.pop()
        span = _first_brace(current)
        if span is None:
            done.append(current)
        else:
            start, end, parts = span
            results.extend(current[:start] + part + current[end + 1:] for part in reversed(parts))
        if len(done) + len(results) > limit:
            return done + results
    return done


def _first_brace(word: str) -> tuple[int, int, list[str]] | None:
    for start, c in enumerate(word):
        if c != "{":
            continue
        depth, commas = 0, [start]
        for j in range(start, len(word)):
            if word[j] == "{":
                depth += 1
            elif word[j] == "}":
                depth -= 1
                if depth == 0:
                    if len(commas) == 1:
                        break
                    commas.append(j)
                    parts = [word[a + 1:b] for a, b in itertools.pairwise(commas)]
                    return start, j, parts
            elif word[j] == "," and depth == 1:
                commas.append(j)
    return None


def normalised(words: list[str | None]) -> list[str | None]:
    """Leading reserved words and assignments removed: what is left starts with the command that runs."""
    start = 0
    while start < len(words):
        word = words[start]
        if word is not None and (word in LEADING or ASSIGNMENT.match(word)):
            start += 1
        else:
            break
    return words[start:]


def deny_candidates(text: str, budget: Budget, depth: int = 0) -> list[Words]:
    """Every simple command `text` might run, over-approximated (see the module's docstring)."""
    scanner = _Scanner(budget)
    scanner.scan(text)
    out: list[Words] = []
    for found in scanner.found:
        for words in _variants(found):
            out.extend(argv_candidates(words, budget, depth))
    if depth < MAX_DEPTH:
        scripts = scanner.scripts
        if any(_name(normalised(found)) in STDIN_READERS for found in scanner.found):
            # `echo 'rm -rf ~' | bash`: a shell reading its input may run any word the text holds
            scripts = scripts + [w for found in scanner.found for w in found if w is not None and " " in w]
        for script in scripts:
            out.extend(deny_candidates(script, budget, depth + 1))
    return out


def _name(words: list[str | None]) -> str | None:
    head = words[0] if words else None
    return head.rsplit("/", 1)[-1] if head is not None else None


def _variants(words: list[str | None]) -> list[list[str | None]]:
    """The words as written and, when a word has braces, brace-expanded."""
    if not any(w is not None and "{" in w and "}" in w for w in words):
        return [words]
    expanded: list[str | None] = []
    for word in words:
        expanded.extend(brace_expand(word) if word is not None and "{" in word else [word])
    return [words, expanded]


def argv_candidates(words: list[str | None] | tuple[str | None, ...], budget: Budget, depth: int = 0) -> list[Words]:
    """One argv and every command it might hand over to: wrapper suffixes and script arguments."""
    words = normalised(list(words))
    if not words:
        return []
    out: list[Words] = [tuple(words)]
    head = words[0]
    name = head.rsplit("/", 1)[-1] if head is not None else None
    if name in WRAPPERS or head is None:
        starts = [n for n, w in enumerate(words) if n > 0 and (w is None or not w.startswith("-"))]
        for start in starts[:MAX_SUFFIXES]:
            budget.check()
            suffix = normalised(words[start:])
            if suffix:
                out.append(tuple(suffix))
    if (name in SCRIPT_RUNNERS or head is None) and depth < MAX_DEPTH:
        for word in words[1:]:
            if word is not None and (" " in word or not word.startswith("-")):
                out.extend(deny_candidates(word, budget, depth + 1))
    return out
