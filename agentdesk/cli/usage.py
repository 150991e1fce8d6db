"""Usage errors in one sentence, with a "did you mean" for a misspelled command, option or choice.

argparse's own messages ("argument COMMAND: invalid choice: 'aprovals' (choose from
'init', 'simulate', …)") name the grammar, not the fix; this parser keeps its usage
line and replaces the message with a sentence that ends in the likely intended word.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

from agentdesk.store.text.visible import visible

INVALID_CHOICE = re.compile(
    r"argument (?P<arg>[^:]+): invalid choice: '(?P<value>.*)' \(choose from (?P<choices>.*)\)$")
UNRECOGNIZED = re.compile(r"unrecognized arguments: (?P<args>.*)$")
REQUIRED = re.compile(r"the following arguments are required: (?P<args>.*)$")
ONE_VALUE = re.compile(r"argument (?P<arg>[^:]+): expected one argument$")
BAD_VALUE = re.compile(r"argument (?P<arg>[^:]+): (?P<why>.*)$")
AMBIGUOUS = re.compile(r"ambiguous option: (?P<arg>\S+) could match (?P<options>.*)$")


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else "."


def first_option(arg: str) -> str:
    """`-h/--help` or `--store PATH` as argparse names them: the long spelling alone."""
    names = arg.split("/")
    return next((n for n in names if n.startswith("--")), names[0]).split(" ")[0]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one sentence; subcommands inherit it."""

    def option_strings(self) -> list[str]:
        return [o for action in self._actions for o in action.option_strings]

    def sentence(self, message: str) -> str:
        if m := INVALID_CHOICE.match(message):
            choices = re.findall(r"'([^']*)'", m["choices"])
            value, arg = m["value"], m["arg"]
            if arg.isupper():  # a subcommand: COMMAND, or a command's ACTION
                return f"There is no {arg.lower()} '{value}'" + did_you_mean(value, choices)
            return f"{first_option(arg)} cannot be '{value}' (it is one of {', '.join(choices)})" + \
                did_you_mean(value, choices)
        if m := UNRECOGNIZED.match(message):
            words = m["args"].split()
            option = next((w for w in words if w.startswith("-")), None)
            if option is not None:
                name = option.split("=", 1)[0]
                return f"There is no option {name} here" + did_you_mean(name, self.option_strings())
            return f"Unexpected argument {words[0]!r}; `{self.prog} --help` says what goes where."
        if m := REQUIRED.match(message):
            names = m["args"].split(", ")
            pronoun = "them" if len(names) > 1 else "it"
            return f"Missing {' and '.join(names)}; `{self.prog} --help` describes {pronoun}."
        if m := ONE_VALUE.match(message):
            return f"{first_option(m['arg'])} needs a value."
        if m := AMBIGUOUS.match(message):
            return f"{m['arg']} could be any of {m['options']}; spell it out."
        if m := BAD_VALUE.match(message):
            why = m["why"].rstrip(".")
            if not m["arg"].startswith("-"):  # a positional argument: the reason says it all
                return why[:1].upper() + why[1:] + "."
            return f"{first_option(m['arg'])}: {why}."
        return message[:1].upper() + message[1:].rstrip(".") + "."

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        # the sentence may quote what was typed: shown as the terminal shows any untrusted text
        self.exit(2, f"{self.prog}: {' '.join(visible(self.sentence(message)).split())}\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """Leftover words are blamed on the subcommand they were typed after, whose options are the
        candidates for "did you mean" (argparse would report them from the top-level parser)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.subcommand(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def subcommand(self, parsed: argparse.Namespace) -> Parser:
        for action in self._actions:
            chosen = getattr(parsed, action.dest, None)
            if isinstance(action, argparse._SubParsersAction) and chosen in action.choices:
                sub = action.choices[chosen]
                return sub.subcommand(parsed) if isinstance(sub, Parser) else self
        return self
