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
from agentdesk.store.audit import ChainReport, Verdict, keys, transfer, verify_store
from agentdesk.store.audit.export import export_audit
from agentdesk.store.audit.verify import ranges_text
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import native_store
from agentdesk.store.validation import require_regular_file

EXIT_CANNOT_CHECK = 7


def verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object: verdict, first failure, notes")
    p.add_argument("--anchor", metavar="FILE", type=Path,
                   help="check against this anchor (an `audit export` file or a copied anchor) instead of "
                        "this machine's")


def audit_options(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """`common`: the options every command takes (--store …), also after `audit export` and `audit key …`."""
    sub = p.add_subparsers(dest="audit_command", required=True, metavar="SUBCOMMAND")
    export = sub.add_parser("export", parents=[common],
                            help="the audit log with its anchor, as JSON Lines, for an auditor")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    key = sub.add_parser("key", help="move the store's audit key to another machine or account")
    key_sub = key.add_subparsers(dest="key_command", required=True, metavar="SUBCOMMAND")
    key_export = key_sub.add_parser("export", parents=[common],
                                    help="the store's audit key(s) as a file (0600) for another machine")
    key_export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    key_import = key_sub.add_parser(
        "import", parents=[common], help="add an exported audit key beside the ones this machine holds for the store")
    key_import.add_argument("file", metavar="FILE", type=Path, help="a file `audit key export` wrote, or a key file")
    key_import.add_argument("--sign", action="store_true",
                            help="sign this store's new records with the imported key from now on (the key "
                                 "signing so far is kept, to verify its records)")


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
    source = open_any(args, older_schema=True)  # a store not yet upgraded is verified as it is
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
            for sentence in report.restored:  # a legitimate restore, said once per restore, until rebase-anchors
                say(out.clean(sentence[0].upper() + sentence[1:]) + ".")
            say(intact_sentence(report, anchor))
            for note in report.notes:
                say(f"note: {out.clean(note)}.")
    return EXIT_OK


def intact_sentence(report: ChainReport, anchor: Path | None) -> str:
    signed = "" if report.keyed_from is None else f", signed from record {report.keyed_from}"
    if len(report.signers) > 1:
        signed = f", signed by {signers_text(report)}"
    where = f" in {anchor}" if anchor else ""
    anchored = "" if report.anchored_seq is None else f", anchored{where} up to record {report.anchored_seq:,}"
    return (f"Audit chain intact: {report.records:,} records verified{signed}{anchored}; approvals, tool calls, "
            "rules and context agree with it.")


NUMBERS = {2: "two", 3: "three", 4: "four"}


def signers_text(report: ChainReport) -> str:
    """"two keys: 3f2a1c9e (records 1-21), 8b7d0e44 (22-)" (en dashes): each key and the records it signed."""
    parts = []
    for n, (fingerprint, runs) in enumerate(report.signers):
        named = ranges_text(runs, report.last_seq)
        parts.append(f"{fingerprint} ({'records ' if n == 0 else ''}{named})")
    count = len(report.signers)
    return f"{NUMBERS.get(count, str(count))} keys: {', '.join(parts)}"


def report_json(report: ChainReport) -> dict[str, object]:
    return {"ok": report.ok, "verdict": str(report.verdict), "records": report.records,
            "broken_seq": report.broken_seq, "failure": None if report.failure is None else str(report.failure),
            "reason": report.reason, "row": report.row, "notes": list(report.notes),
            "keyed_from": report.keyed_from, "anchored_seq": report.anchored_seq,
            "keys": [{"fingerprint": fp, "records": [list(run) for run in runs]} for fp, runs in report.signers],
            "anchor_format": None if report.anchored_seq is None else
            "older anchor format" if report.older_anchor_lines else "current",
            "older_anchor_lines": report.older_anchor_lines, "restored": list(report.restored)}


def cmd_audit(args: argparse.Namespace) -> int:
    if args.audit_command == "key":
        return cmd_audit_key(args)
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


def cmd_audit_key(args: argparse.Namespace) -> int:
    """`audit key export [-o FILE]` and `audit key import FILE [--sign]` (store/audit/transfer.py)."""
    source = open_any(args)
    try:
        store = native_store(source, "move its audit key")
        with store.reading() as session:
            if args.key_command == "import":
                done = transfer.import_keys(session, args.file, sign=args.sign)
                say(_imported_sentence(done, args.file))
                return EXIT_OK
            text, key = transfer.export_text(session)
            if args.output is None:
                sys.stdout.write(text)
                sys.stdout.flush()
                return EXIT_OK
            with output_file(Path(args.output), protect=store.path, private=True) as handle:
                handle.write(text)
    finally:
        source.close()
    held = ", ".join(k.fingerprint for k in key.known)
    say(f"The audit key of store {key.store_id} ({held}) was exported to {args.output}; on the other machine run "
        "`agentdesk --store STORE audit key import FILE`, and keep the file as private as the key itself.")
    return EXIT_OK


def _imported_sentence(done: transfer.Imported, path: Path) -> str:
    key = done.key
    if not done.added and not done.signing_changed:
        return (f"This machine already holds the key{'s' if len(key.known) > 1 else ''} in {path} for store "
                f"{key.store_id} ({', '.join(k.fingerprint for k in key.known)}); nothing changed.")
    added = ", ".join(done.added) if done.added else "no new key"
    others = [k.fingerprint for k in key.also]
    beside = f", beside {', '.join(others)}" if others else ""
    return (f"Imported {added} for store {key.store_id} into {key.where}: this machine holds "
            f"{key.fingerprint} (signing){beside}, and `agentdesk verify` checks records signed by any of them.")
