"""`agentdesk rules list|add|remove|test|apply`: standing approval rules from the command line.

`test ID` is the dry run: every past approval the rule would have decided, how,
and where that differs from what the person decided; plus the pending approvals
it would settle now. Rules live only in agentdesk's own stores; another
runtime's database is refused with one sentence (exit 2). Agent text (arguments,
notes, tool names) goes through `out.clean` on the terminal and `out.json_text`
in `--json`, like everywhere else.
"""

from __future__ import annotations

import argparse
import math
import shlex
from datetime import UTC, datetime
from typing import Any

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, CommandFailed, number, open_any, positive, say
from agentdesk.cli.rules_apply import add_apply_parser, cmd_rules_apply
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import EntityKind
from agentdesk.store.rules import commands as rules
from agentdesk.store.rules.dryrun import DEFAULT_HISTORY, DryRun, DryRunRow, dry_run, propose_rule
from agentdesk.store.rules.model import Effect, Rule, covers_every_call, every_call_warning, parse_matcher
from agentdesk.store.text.jsonsafe import DuplicateKey, TooDeep, loads_limited
from agentdesk.store.validation import MAX_ARGUMENTS_DEPTH

"""A century: past it a deadline is no longer a date the store can hold."""
RULE_HEADERS = ["ID", "EFFECT", "TOOL", "MATCHES", "SCOPE", "ON", "EXPIRES", "HITS", "LAST HIT", "NOTE"]
DRY_HEADERS = ["APPROVAL", "WHEN", "TOOL", "WOULD", "ACTUAL", "DECIDED BY", "", "ARGUMENTS"]


def add_rules_parser(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", parents=[common], help="every rule, more specific above broader")
    listing.add_argument("--json", action="store_true", help="one JSON array with stable keys")
    add = sub.add_parser("add", parents=[common], help="save a rule (use `test` on it before relying on it)")
    add.add_argument("--effect", choices=[e.value for e in Effect], default=None,
                     help="allow, deny or ask (default: allow; from an approval: what the person decided)")
    add.add_argument("--tool", help="the tool name (* for every tool)")
    how = add.add_mutually_exclusive_group()
    how.add_argument("--command", action="append", metavar="WORDS",
                     help="a shell command the rule covers, e.g. \"npm test\" or \"git status *\" (repeat it; "
                          "every command a call runs must be one of them)")
    how.add_argument("--matcher", metavar="JSON", help="a matcher as JSON (see docs/rules.md)")
    how.add_argument("--from-approval", metavar="ID", help="the narrowest rule matching this approval")
    add.add_argument("--field", action="append", default=[], metavar="NAME=JSON",
                     help="with --command: another argument the call may have, and the value it must "
                          "equal (NAME=* for any value)")
    for scope in ("project", "agent", "session"):
        add.add_argument(f"--{scope}", metavar="ID", help=f"only for this {scope}")
    add.add_argument("--any-arguments", action="store_true",
                     help="confirm a rule with no matcher: it decides every call of the tool, whatever its "
                          "arguments")
    add.add_argument("--expires-in", type=float, metavar="SECONDS",
                     help=f"the rule stops applying after this (at most {MAX_EXPIRES_IN:,.0f}: 100 years)")
    add.add_argument("--note", default="", help="a note for the other operators, shown with the rule")
    add.add_argument("--disabled", action="store_true", help="save it switched off")
    add.add_argument("--actor", required=True, help="your name, recorded in the audit log")
    add.add_argument("--json", action="store_true", help="print the saved rule as JSON")
    remove = sub.add_parser("remove", parents=[common], help="delete a rule (approvals it decided keep its id)")
    remove.add_argument("id", help="the rule's id (`agentdesk rules list` shows them)")
    remove.add_argument("--actor", required=True, help="your name, recorded in the audit log")
    remove.add_argument("--revision", type=number(int, least=0, most=2**63 - 1),
                        help="only if the rule is still at this revision")
    add_apply_parser(sub, common)
    test = sub.add_parser("test", parents=[common], help="dry run: what the rule would have decided")
    test.add_argument("id", help="the rule's id (`agentdesk rules list` shows them)")
    test.add_argument("--limit", type=positive(int), default=DEFAULT_HISTORY, help="past approvals to replay")
    test.add_argument("--json", action="store_true", help="the dry run's result as JSON")


def _native(args: argparse.Namespace, *, write: bool = False) -> NativeSource:
    source = open_any(args, write=write)
    if not isinstance(source, NativeSource):
        kind = source.descriptor.kind
        source.close()
        raise CommandFailed(f"Rules live in agentdesk stores; this is a {kind} database.",
                            InvalidInput.exit_code)
    return source


def cmd_rules(args: argparse.Namespace) -> int:
    action = {"list": _list, "add": _add, "remove": _remove, "test": _test,
              "apply": cmd_rules_apply}[args.rules_command]
    return action(args)


def _list(args: argparse.Namespace) -> int:
    source = _native(args)
    try:
        found = rules.list_rules(source.store)
    finally:
        source.close()
    if args.json:
        say(_dumps([rule_json(r) for r in found]))
    elif found:
        say(out.table(RULE_HEADERS, [rule_cells(r) for r in found]))
    else:
        say("No rules.")
    return EXIT_OK


MAX_EXPIRES_IN = 100 * 365.25 * 86_400


def _expires_in(value: float | None) -> float | None:
    """`--expires-in`, checked before the store is opened: inf, nan, 1e308 or ≤ 0 write nothing."""
    if value is None:
        return None
    if not math.isfinite(value) or not 0 < value <= MAX_EXPIRES_IN:
        raise InvalidInput(f"--expires-in must be a number of seconds above 0 and at most {MAX_EXPIRES_IN:,.0f} "
                           f"(100 years), not {value}.")
    return value


def _add(args: argparse.Namespace) -> int:
    expires_in = _expires_in(args.expires_in)
    source = _native(args, write=True)
    matcher: dict[str, Any] | str
    try:
        if args.from_approval:
            draft = propose_rule(source.approval(args.from_approval), Effect(args.effect) if args.effect else None)
            tool, matcher = draft.tool, draft.matcher
            scope = {"project_id": draft.project_id, "agent_id": draft.agent_id, "session_id": draft.session_id}
            note = args.note or draft.note
            effect = str(draft.effect)
        else:
            if not args.tool:
                raise InvalidInput("A rule needs --tool (or --from-approval).")
            tool, matcher, note = args.tool, _matcher(args), args.note
            scope, effect = {}, args.effect or "allow"
        scope = {"project_id": args.project or scope.get("project_id"),
                 "agent_id": args.agent or scope.get("agent_id"),
                 "session_id": args.session or scope.get("session_id")}
        for key, kind in (("project_id", EntityKind.PROJECT), ("agent_id", EntityKind.AGENT),
                          ("session_id", EntityKind.SESSION)):
            if (scoped := scope[key]) is not None:
                source.locate(kind, scoped)  # NotFound (exit 4) names a scope that is not in the store
        expires = None if expires_in is None else datetime.now(UTC).timestamp() + expires_in
        _confirm_every_call(args, effect, tool, matcher)
        rule = rules.add_rule(source.store, effect, tool, matcher, args.actor, expires_at=expires, note=note,
                              enabled=not args.disabled, **scope)
    finally:
        source.close()
    if args.json:
        say(_dumps(rule_json(rule)))
    else:
        say(f"Saved rule {rule.id}: {out.clean(rule.describe())}.")
        if covers_every_call(rule.matcher):
            say(every_call_warning(str(rule.effect), out.clean(rule.tool)).replace("would ", "will "))
    return EXIT_OK


def _confirm_every_call(args: argparse.Namespace, effect: str, tool: str, matcher: dict[str, Any] | str) -> None:
    """A rule with no matcher decides every call of its tool: only with --any-arguments (else exit 2)."""
    try:
        normal = parse_matcher(tool, matcher)
    except InvalidInput:
        return  # the store says what is wrong with it
    if covers_every_call(normal) and not args.any_arguments:
        raise InvalidInput(f"{every_call_warning(effect, tool)} Add --any-arguments if you mean that, or say "
                           "what it covers with --command, --field or --matcher.")


def _matcher(args: argparse.Namespace) -> dict[str, Any] | str:
    if args.matcher is not None:
        try:  # refused here, before the store parses it recursively
            loads_limited(str(args.matcher), MAX_ARGUMENTS_DEPTH, unique_keys=True)
        except TooDeep as exc:
            raise InvalidInput(f"The --matcher JSON is too deep: {exc}.") from exc
        except DuplicateKey as exc:
            raise InvalidInput(f"The --matcher JSON is ambiguous: {exc}.") from exc
        except ValueError:
            pass  # not JSON: the store says so in its own words
        return str(args.matcher)
    if not args.command:
        if args.field:
            raise InvalidInput("--field needs --command.")
        return {"kind": "any"}
    try:
        commands = [shlex.split(c) for c in args.command]
    except ValueError as exc:
        raise InvalidInput(f"A --command could not be split into words: {exc}.") from exc
    fields: dict[str, Any] = {}
    for item in args.field:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InvalidInput(f"--field takes NAME=JSON (or NAME=*), not {item!r}.")
        if value == "*":
            fields[name] = {"any": True}
            continue
        try:
            fields[name] = {"equals": loads_limited(value, MAX_ARGUMENTS_DEPTH, unique_keys=True)}
        except TooDeep as exc:
            raise InvalidInput(f"The value of --field {name} is too deep: {exc}.") from exc
        except DuplicateKey as exc:
            raise InvalidInput(f"The value of --field {name} is ambiguous: {exc}.") from exc
        except ValueError:
            fields[name] = {"equals": value}
    return {"kind": "shell", "field": "command", "commands": commands, "fields": fields}


def _remove(args: argparse.Namespace) -> int:
    source = _native(args, write=True)
    try:
        rules.remove_rule(source.store, args.id, args.actor, args.revision)
    finally:
        source.close()
    say(f"Removed rule {args.id}.")
    return EXIT_OK


def _test(args: argparse.Namespace) -> int:
    if args.limit <= 0:
        raise InvalidInput("--limit must be a positive number.")
    source = _native(args)
    try:
        rule = rules.get_rule(source.store, args.id)
        result = dry_run(source.store, rule, args.limit)
    finally:
        source.close()
    if args.json:
        say(_dumps({"rule": rule_json(rule), "summary": result.summary(),
                    "history": [dry_json(r) for r in result.rows], "pending": [dry_json(r) for r in result.pending]}))
        return EXIT_OK
    say(f"Rule {rule.id}: {out.clean(rule.describe())}")
    say(dry_summary(result))
    rows = result.pending + result.rows
    if rows:
        say(out.table(DRY_HEADERS, [dry_cells(r) for r in rows]))
    return EXIT_OK


def dry_summary(result: DryRun) -> str:
    s = result.summary()
    more = " (more history exists; raise --limit)" if s["truncated"] else ""
    return (f"Replayed {s['examined']:,} past approvals{more}: {s['matched']:,} matched — "
            f"{s['would_allow']:,} would be allowed, {s['would_deny']:,} denied, {s['would_ask']:,} asked; "
            f"{s['differs']:,} differ from what happened. {s['pending_matched']:,} pending approvals match.")


def rule_json(rule: Rule) -> dict[str, Any]:
    return {"id": rule.id, "effect": str(rule.effect), "tool": rule.tool, "matcher": rule.matcher,
            "project_id": rule.project_id, "agent_id": rule.agent_id, "session_id": rule.session_id,
            "expires_at": out.iso(rule.expires_at), "note": rule.note, "enabled": rule.enabled,
            "revision": rule.revision, "created_by": rule.created_by, "created_at": out.iso(rule.created_at),
            "hit_count": rule.hit_count, "last_hit_at": out.iso(rule.last_hit_at)}


def rule_cells(rule: Rule) -> list[str]:
    scope = ", ".join(f"{k} {v}" for k, v in (("project", rule.project_id), ("agent", rule.agent_id),
                                               ("session", rule.session_id)) if v) or "everywhere"
    expires = out.iso(rule.expires_at) or "never"
    return [rule.id, str(rule.effect), out.clean(rule.tool, 20), out.clean(rule.describe().split(" ", 2)[2], 40),
            out.clean(scope, 40), "yes" if rule.enabled else "no", expires[:19], str(rule.hit_count),
            (out.iso(rule.last_hit_at) or "-")[:19], out.clean(rule.note, 30)]


def dry_json(row: DryRunRow) -> dict[str, Any]:
    return {"approval_id": row.approval_id, "tool": row.tool, "arguments": out.parsed(row.arguments),
            "created_at": out.iso(row.created_at), "agent_id": row.agent_id, "would": row.outcome,
            "actual": row.actual, "decided_by": row.decided_by, "differs": row.differs}


def dry_cells(row: DryRunRow) -> list[str]:
    return [row.approval_id, (out.iso(row.created_at) or "")[:19], out.clean(row.tool, 20), row.outcome,
            row.actual, out.clean(row.decided_by or "-", 20), "DIFFERS" if row.differs else "",
            out.clean(row.arguments, 60)]


def _dumps(value: Any) -> str:
    """JSON as the rest of the CLI prints it: agent text through `visible`, the same marks as the terminal."""
    return out.json_text(value, indent=2)
