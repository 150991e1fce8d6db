"""The `agentdesk` argument parser: commands, options and their defaults.

Global options (`--store`, `--busy-timeout`, `--allow-writes`) are accepted both
before and after the command name (`agentdesk --store X info` and `agentdesk info
--store X`), because people type them in both places.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agentdesk import __version__
from agentdesk.cli.admin_commands import add_admin_parser
from agentdesk.cli.agent_token_commands import add_agent_token_parser
from agentdesk.cli.analysis_commands import add_analysis_parsers
from agentdesk.cli.ask_commands import add_ask_parsers
from agentdesk.cli.audit_commands import audit_options, verify_options
from agentdesk.cli.control_commands import control_options
from agentdesk.cli.install import version_line
from agentdesk.cli.message_commands import message_options, messages_options
from agentdesk.cli.notes_commands import add_notes_parsers
from agentdesk.cli.opening import number, positive
from agentdesk.cli.otel_io import export_options, import_options
from agentdesk.cli.receive import receive_options
from agentdesk.cli.rules_commands import add_rules_parser
from agentdesk.cli.usage import Parser
from agentdesk.store.text.jsonsafe import undecodable

STATUSES = ("pending", "approved", "denied", "expired", "withdrawn", "all")
VIEWS = ("window", "tree", "timeline", "context", "approvals", "rules", "notes")
THEMES = ("system", "light", "dark")
DEFAULT_BUSY_TIMEOUT_S = 5.0
MAX_BUSY_TIMEOUT_S = 86_400.0
"""A day: SQLite counts its busy timeout in milliseconds in a 32-bit integer."""

Handler = Callable[[argparse.Namespace], int]


def common_options() -> Parser:
    common = Parser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS, metavar="PATH_OR_URL",
                        help="store file or database URL (default: $AGENTDESK_STORE, else the user "
                             "data folder)")
    common.add_argument("--busy-timeout", type=positive(float, most=MAX_BUSY_TIMEOUT_S),
                        default=argparse.SUPPRESS, metavar="SECONDS",
                        help=f"how long to wait for another writer's lock (default "
                             f"{DEFAULT_BUSY_TIMEOUT_S:g})")
    common.add_argument("--allow-writes", action="store_true", default=argparse.SUPPRESS,
                        help="allow decisions and edits in another runtime's database (opened "
                             "read-only otherwise)")
    return common


def build_parser(handlers: dict[str, Handler]) -> argparse.ArgumentParser:
    """`handlers` maps each command name to the function that runs it."""
    common = common_options()
    parser = Parser(prog="agentdesk", parents=[common], description="Inspect and control LLM agent runs.")
    parser.add_argument("--version", action="version", version=version_line(__version__),
                        help="print the version, the kind of install (bundle, pipx, checkout, virtualenv) "
                             "and where it is, and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=text, description=text)
        p.set_defaults(handler=handlers[name])
        return p

    command("init", "create or upgrade the store").add_argument(
        "--parents", action="store_true", help="also create the store's missing parent folders")
    sim_options(command("simulate", "play simulated agents writing to the store"))
    p = command("watch", "print every change as it is committed (Ctrl-C stops)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    raw_option(p)
    p.add_argument("--count", type=positive(int), help="stop after printing this many changes")
    p.add_argument("--timeout", type=positive(float), metavar="SECONDS", help="stop after this long")
    p.add_argument("--since", type=number(int, least=0, most=2**63 - 1), metavar="SEQ",
                   help="first replay the changes after this sequence number")
    p = command("approvals", "list approvals (newest first; pending ones oldest first)")
    p.add_argument("--status", choices=STATUSES, default="pending",
                   help="which approvals to list (default pending; expired includes overdue pending ones)")
    p.add_argument("--json", action="store_true", help="one JSON array with stable keys")
    raw_option(p)
    p.add_argument("--limit", type=positive(int), default=1000, help="list at most this many (default 1000)")
    p = command("approve", "approve a pending tool call")
    decision_options(p, reason_required=False)
    p.add_argument("--args", metavar="JSON",
                   help="edited arguments: JSON text, @FILE, or - for stdin (<= 1 MB)")
    decision_options(command("deny", "deny a pending tool call"), reason_required=True)
    control_options(command("pause", "pause a run: its agent blocks at its next checkpoint until resumed"))
    control_options(command("resume", "resume a paused run"))
    control_options(command("stop", "stop a run: its agent ends it cancelled at its next checkpoint"))
    command("info", "what the store is: kind, schema, size, counts").add_argument(
        "--json", action="store_true", help="one JSON object with stable keys")
    verify_options(command("verify", "check the audit log (chain, signatures, anchor) and the state it "
                                     "describes; exit 6 when tampered, 7 when it cannot be checked"))
    audit_options(command("audit", "the audit log: export it with its anchor for an auditor"), common)
    p = command("demo", "a throwaway store with simulated agents working, in the window")
    sim_options(p)
    theme_option(p)
    p.add_argument("--keep", action="store_true",
                   help="keep the demo's store when the window closes (it is removed otherwise)")
    add_admin_parser(command("admin", "a team store's upkeep: PostgreSQL roles, change-log pruning, backups"),
                     common)
    add_agent_token_parser(command("agent-token", "agent identities for the receiver's agent API: create "
                                                  "(printed once), list, revoke"), common)
    message_options(command("message", "send an agent a message (read at its next model call; prints the "
                                       "message id), or --cancel a pending one"))
    messages_options(command("messages", "list pending operators' messages, oldest first"))
    add_rules_parser(command("rules", "standing approval rules: list, add, remove, test (dry run), "
                                      "apply (PostgreSQL)"), common)
    receive_options(command("receive", "an OTLP/HTTP receiver: live spans from any OpenTelemetry exporter "
                                       "into the store (Ctrl-C stops)"))
    import_options(command("import", "import OpenTelemetry traces (OTLP/JSON, JSON Lines, protobuf) into "
                                     "the store"))
    export_options(command("export", "write a run or a project as OTLP/JSON or OTLP JSON Lines"))
    add_analysis_parsers(command)
    add_notes_parsers(command("note", "notes on a span, run or approval for the next shift: add, edit, remove, "
                                      "show"),
                      command("label", "labels on a span, run or approval: add, remove"),
                      command("notes", "everything noted or labelled since a time (default the last 8 hours), "
                                       "with who wrote it"), common)
    add_ask_parsers(command)
    p = command("gui", "open the window on the store")
    p.add_argument("--screenshot", metavar="PATH", help="render offscreen, save a PNG and exit")
    p.add_argument("--view", choices=VIEWS, default="window",
                   help="with --screenshot: the whole window (default) or one view")
    p.add_argument("--select", metavar="ID", help="select this entity (any id) at start")
    p.add_argument("--size", metavar="WxH", type=window_size, default=None,
                   help="with --screenshot: the window's size in pixels (default 1920x1080)")
    theme_option(p)
    return parser


def window_size(text: str) -> tuple[int, int]:
    """`1366x768` as (1366, 768): from 640x480 to 7680x4320."""
    width, _, height = text.lower().partition("x")
    try:
        size = int(width), int(height)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 1366x768") from None
    if not (640 <= size[0] <= 7680 and 480 <= size[1] <= 4320):
        raise argparse.ArgumentTypeError(f"{text} is outside 640x480 … 7680x4320")
    return size


def theme_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--theme", choices=THEMES, default="system",
                   help="colours: follow the system (default), or light or dark")


def raw_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw", action="store_true",
                   help="print agent text byte for byte (escape sequences and hidden characters are "
                        "otherwise shown as marks like ⟨ESC⟩ and ⟨U+202E⟩, on a terminal and in --json)")


def decision_options(p: argparse.ArgumentParser, *, reason_required: bool) -> None:
    p.add_argument("id", type=approval_id, help="the approval's id (`agentdesk approvals` lists them)")
    p.add_argument("--expect-hash", metavar="HASH",
                   help="the arguments hash you were shown (`approvals --json`: arguments_hash, or its "
                        "first 12 hex digits); refused with exit 3 if the stored arguments differ")
    p.add_argument("--actor", required=True,
                   help="your name, recorded with the decision and in the audit log")
    p.add_argument("--reason", required=reason_required,
                   help="why, recorded with the decision" + (" (required)" if reason_required else ""))


def sim_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agents", type=positive(int, most=10_000), default=3,
                   help="how many agents work at once (default 3)")
    p.add_argument("--seed", type=number(int, least=-(2**63), most=2**63 - 1), default=0,
                   help="the same seed plays the same agents, tools and arguments (default 0)")
    p.add_argument("--duration", type=positive(float), metavar="SECONDS",
                   help="stop after this long (default: until Ctrl-C)")
    p.add_argument("--approval-timeout", type=positive(float), default=120.0, metavar="SECONDS",
                   help="how long an agent waits for a human before giving up (default 120)")
    p.add_argument("--speed", type=positive(float, most=1e6), default=1.0,
                   help="simulated work runs this many times faster (approval deadlines stay real)")


def approval_id(text: str) -> str:
    """An id is a word: empty or blank (`approve ""`, an unset shell variable) is a usage error."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an approval id is needed, and this one is empty "
                                         "(`agentdesk approvals` lists the pending ones)")
    return text


def parse(argv: list[str] | None, handlers: dict[str, Handler]) -> argparse.Namespace:
    """Parse, then fill the global options' defaults (SUPPRESS lets either position set them)."""
    parser = build_parser(handlers)
    args = parser.parse_args(argv)
    refuse_undecodable(parser, args)
    args.store = getattr(args, "store", None)
    args.busy_timeout = getattr(args, "busy_timeout", DEFAULT_BUSY_TIMEOUT_S)
    args.allow_writes = getattr(args, "allow_writes", False)
    return args


def refuse_undecodable(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Text arguments that are not UTF-8 (argv's bytes kept by surrogateescape) are a usage error, one
    sentence, before anything is opened; file names (`Path` values) may be any bytes the system allows."""
    for dest, value in vars(args).items():
        texts = value if isinstance(value, list) else [value]
        for text in texts:
            if not isinstance(text, str) or (at := undecodable(text)) is None:
                continue
            where, flag = _owner(parser, args, dest) or (parser, dest)
            code = ord(text[at])
            what = f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
            where.error(f"argument {flag}: is not UTF-8 text ({what} at character {at + 1}); give it as "
                        "UTF-8")


def _owner(parser: argparse.ArgumentParser, args: argparse.Namespace,
           dest: str) -> tuple[argparse.ArgumentParser, str] | None:
    """The (sub)parser that defines `dest` along the commands chosen, and the option's long name. A command
    whose own dest was overwritten (`rules add --command` writes `command`) is searched through all."""
    found = None
    for action in parser._actions:
        if action.dest == dest and not isinstance(action, argparse._SubParsersAction):
            found = (parser, action.option_strings[-1] if action.option_strings else action.dest)
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest or "", None)
            subs = ([action.choices[chosen]] if isinstance(chosen, str) and chosen in action.choices
                    else list(action.choices.values()))
            for sub in subs:
                deeper = _owner(sub, args, dest)
                if deeper is not None:
                    return deeper
    return found
