"""`agentdesk verify` and `agentdesk audit export`: checking the audit log and handing it to an auditor.

Exit codes (README): 0 intact (notes, such as an anchor behind, are printed but are
not failures), 6 tampered (one sentence naming the first record or row and how),
7 cannot check (signed records but no key on this machine, or no audit table and
no anchor to compare with). docs/audit.md says what each check can and cannot see.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_BROKEN_CHAIN, EXIT_OK, CommandFailed, open_any, say
from agentdesk.cli.outfile import output_file
from agentdesk.store.audit import ChainReport, Verdict, keys, verify_store
from agentdesk.store.audit.export import export_audit
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import native_store
from agentdesk.store.validation import require_regular_file

EXIT_CANNOT_CHECK = 7


def verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object: verdict, first failure, notes")
    p.add_argument("--anchor", metavar="FILE", type=Path,
                   help="check against this anchor (an `audit export` file or a copied anchor) instead of "
                        "this machine's")


def audit_options(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="audit_command", required=True, metavar="SUBCOMMAND")
    export = sub.add_parser("export", help="the audit log with its anchor, as JSON Lines, for an auditor")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


def _anchor_file(path: Path | None) -> Path | None:
    """The `--anchor` file, refused in one sentence when it is missing or holds no anchor line."""
    if path is None:
        return None
    require_regular_file(path, "The anchor file")  # a FIFO would block the open, /dev/zero never end
    try:
        anchor = keys.read_anchor(path)
    except OSError as exc:
        raise InvalidInput(f"Cannot read the anchor file {path}: {exc.strerror or exc}.") from exc
    if anchor is None:
        raise InvalidInput(f"There is no anchor file at {path}.")
    if not anchor.heads:
        raise InvalidInput(f"{path} holds no anchor line (an `agentdesk audit export` file or an anchor "
                           "file is expected).")
    return path


def cmd_verify(args: argparse.Namespace) -> int:
    anchor = _anchor_file(args.anchor)
    source = open_any(args)
    try:
        kind = source.descriptor.kind
        if kind != "agentdesk":
            report = source.verify()
        else:
            store = native_store(source, "be verified")
            with store.reading() as session:
                report = verify_store(session, anchor_file=anchor)
    finally:
        source.close()
    if args.json:
        say(json.dumps(report_json(report), ensure_ascii=True))
    if report.verdict == Verdict.TAMPERED:
        raise CommandFailed(report.reason or "The audit log was tampered with.", EXIT_BROKEN_CHAIN)
    if report.verdict == Verdict.CANNOT_CHECK:
        raise CommandFailed(report.reason or "The audit log cannot be checked.", EXIT_CANNOT_CHECK)
    if not args.json:
        if kind != "agentdesk":
            say(f"This {kind} database has no agentdesk audit chain; nothing to verify.")
        else:
            say(intact_sentence(report, anchor))
            for note in report.notes:
                say(f"note: {out.clean(note)}.")
    return EXIT_OK


def intact_sentence(report: ChainReport, anchor: Path | None) -> str:
    signed = "" if report.keyed_from is None else f", signed from record {report.keyed_from}"
    where = f" in {anchor}" if anchor else ""
    anchored = "" if report.anchored_seq is None else f", anchored{where} up to record {report.anchored_seq:,}"
    return (f"Audit chain intact: {report.records:,} records verified{signed}{anchored}; approvals, tool calls, "
            "rules and context agree with it.")


def report_json(report: ChainReport) -> dict[str, object]:
    return {"ok": report.ok, "verdict": str(report.verdict), "records": report.records,
            "broken_seq": report.broken_seq, "failure": None if report.failure is None else str(report.failure),
            "reason": report.reason, "row": report.row, "notes": list(report.notes),
            "keyed_from": report.keyed_from, "anchored_seq": report.anchored_seq}


def cmd_audit(args: argparse.Namespace) -> int:
    source = open_any(args)
    try:
        store = native_store(source, "export an audit log")
        with store.reading() as session:
            if args.output is None:
                result = export_audit(session, sys.stdout)
            else:
                with output_file(Path(args.output), protect=store.path) as handle:
                    result = export_audit(session, handle)
    finally:
        source.close()
    report, count = result
    if args.output is not None:
        verdict = out.clean(report.reason) if report.reason else f"verify: {report.verdict}."
        say(f"Audit log exported to {args.output} ({count:,} records). {verdict}")
    return EXIT_OK
