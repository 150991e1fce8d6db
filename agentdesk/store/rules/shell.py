"""What a shell command would run: every simple command, found by parsing (bashlex), never by regex.

`simple_commands` walks the whole syntax tree: lists (`&&`, `||`, `;`, `&`, newlines),
pipelines, subshells and brace groups, command and process substitutions inside
any word (`$(…)`, backticks, `<(…)`), and assignment prefixes. Each simple command
comes back as its words after quote removal (`'npm' te"st"` is `npm test`, which
is what runs); a word whose value is only known at run time (`$X`, `${X}`) is None.

The result also says whether the command is *plain*: parsed completely, only
constructs an allow rule can vouch for (no loops, conditionals, functions, file
redirects or here-documents). An allow rule matches only a plain command; a deny
rule looks at every simple command found, plain or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_COMMAND_CHARS = 20_000
"""Longer commands are not parsed (they never match an allow rule): parsing stays cheap."""

SIMPLE_PARAMETER = re.compile(r"#?[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
"""`$x`, `${x}`, `${#x}`, `$1`, `$@`…: expansions that yield words and never run anything."""
_CONTAINERS = frozenset({"list", "pipeline"})
_SEPARATORS = frozenset({"operator", "pipe", "reservedword"})


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    words: tuple[str | None, ...]
    """Assignments (`X=1`) first, then argv; None for a word only known at run time."""
    redirects: bool = False
    """Redirects to or from files, or here-documents (fd duplication like 2>&1 is not counted)."""

    @property
    def argv(self) -> tuple[str | None, ...]:
        return self.words


@dataclass(slots=True)
class Parsed:
    commands: list[SimpleCommand] = field(default_factory=list)
    plain: bool = True
    error: str | None = None

    @property
    def parsed(self) -> bool:
        return self.error is None


def load_parser() -> None:
    """Import bashlex now (~0.25 s the first time), outside any parse-time budget."""
    import bashlex  # type: ignore[import-untyped]  # noqa: F401


def simple_commands(script: str) -> Parsed:
    """Parse `script` and list every simple command it would run."""
    if len(script) > MAX_COMMAND_CHARS:
        return Parsed(plain=False, error=f"longer than {MAX_COMMAND_CHARS:,} characters")
    if "\x00" in script:
        return Parsed(plain=False, error="contains a NUL character")
    if not script.strip():
        return Parsed(plain=False, error="empty command")
    import bashlex  # type: ignore[import-untyped]  # here, not at the top: it costs ~0.25 s to import

    try:
        trees = bashlex.parse(script)
    except RecursionError:
        return Parsed(plain=False, error="nested too deeply")
    except Exception as exc:  # bashlex raises ParsingError, NotImplementedError, IndexError…
        return Parsed(plain=False, error=f"{type(exc).__name__}: {exc}")
    out = Parsed()
    try:
        for tree in trees:
            _walk(tree, out)
    except RecursionError:
        return Parsed(plain=False, error="nested too deeply")
    if not out.commands:
        out.plain = False
    return out


def argv_of(value: Any) -> Parsed:
    """A command given as a list: `["bash", "-c", SCRIPT]` is parsed; any other list is one argv."""
    if not isinstance(value, list) or not value or not all(isinstance(w, str) for w in value):
        return Parsed(plain=False, error="not a list of strings")
    if len(value) == 3 and value[0].rsplit("/", 1)[-1] in ("sh", "bash", "zsh", "dash") \
            and value[1] in ("-c", "-lc"):
        return simple_commands(value[2])
    return Parsed(commands=[SimpleCommand(tuple(value))])


def command_of(value: Any) -> Parsed:
    """The simple commands of a command argument, whatever shape it came in."""
    if isinstance(value, str):
        return simple_commands(value)
    return argv_of(value)


def _walk(node: Any, out: Parsed) -> None:
    kind = node.kind
    if kind in _CONTAINERS:
        for part in node.parts:
            _walk(part, out)
    elif kind in _SEPARATORS:
        return
    elif kind == "command":
        _command(node, out)
    elif kind == "compound":
        if getattr(node, "redirects", None):
            out.plain = False
        for part in node.list:
            _walk(part, out)
    else:
        out.plain = False  # for/while/until/if/function…: found commands count for deny only
        _descend(node, out)


def _descend(node: Any, out: Parsed) -> None:
    for name in ("parts", "list"):
        for part in getattr(node, name, None) or ():
            if getattr(part, "kind", None) in ("word", "assignment"):
                _word(part, out)
            elif hasattr(part, "kind"):
                _walk(part, out)
    command = getattr(node, "command", None)
    if command is not None:
        _walk(command, out)


def _command(node: Any, out: Parsed) -> None:
    words: list[str | None] = []
    redirects = False
    for part in node.parts:
        kind = part.kind
        if kind in ("word", "assignment"):
            words.append(_word(part, out))
        elif kind == "redirect":
            if not _is_fd_duplication(part):
                redirects = True
                out.plain = False
            target = getattr(part, "output", None)
            if target is not None and getattr(target, "kind", None) == "word":
                _word(target, out)
        else:
            out.plain = False
            _walk(part, out)
    out.commands.append(SimpleCommand(tuple(words), redirects))


def _word(node: Any, out: Parsed) -> str | None:
    """The word after quote removal, or None when an expansion makes it unknown until run time."""
    dynamic = False
    for part in getattr(node, "parts", None) or ():
        kind = part.kind
        if kind in ("commandsubstitution", "processsubstitution"):
            dynamic = True
            _walk(part.command, out)
        elif kind == "parameter":
            dynamic = True
            if not SIMPLE_PARAMETER.fullmatch(str(part.value)):
                _complex_parameter(str(part.value), out)
        elif kind == "tilde":
            continue
        else:
            dynamic = True
            out.plain = False
            _descend(part, out)
    return None if dynamic else str(node.word)


def _complex_parameter(value: str, out: Parsed) -> None:
    """`${x:-$(cmd)}`, `${a[$(cmd)]}`, `${x@P}`…: bashlex does not look inside, but bash may run code there.

    Never plain (no allow rule vouches for it); the commands substituted inside are found on a best-effort
    re-parse so a deny rule still sees them.
    """
    out.plain = False
    if "$(" not in value and "`" not in value:
        return
    inner = simple_commands("echo " + value)
    nested = inner.commands
    if nested and nested[-1].words[:1] == ("echo",):
        nested = nested[:-1]
    out.commands.extend(nested)


def _is_fd_duplication(node: Any) -> bool:
    """`2>&1`, `>&2`: moves output between descriptors, touches no file."""
    return node.type in (">&", "<&") and isinstance(node.output, int)
