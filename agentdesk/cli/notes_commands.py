"""`agentdesk note add|edit|remove|show`, `agentdesk label add|remove`, `agentdesk notes --since 8h`.

What an operator leaves for the next shift on a span, a run or an approval (store/notes). A target is a bare id
(a span's, a run's or an approval's) or `span:ID`, `run:ID`, `approval:ID` when an id could name two. Writing
needs an operator on PostgreSQL. Exit codes: 0 done; 2 bad input (an empty or oversize note, a label with
hidden characters, a duration that is not one) or a login that may not write; 3 a conflict (the label is
already there or not, the note was edited since the revision you give, with who and when); 4 no such target
or note; 5 the store cannot be used.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_for, say
from agentdesk.store.errors import InvalidInput
from agentdesk.store.notes import commands, reads
from agentdesk.store.notes.marks import Entry, utc_text
from agentdesk.store.notes.since import DEFAULT_SINCE, since_time
from agentdesk.store.persistence.database import Store

TARGET_HELP = "a span, run or approval id (or span:ID, run:ID, approval:ID)"


def add_notes_parsers(command: argparse.ArgumentParser, label: argparse.ArgumentParser,
                      listing: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = command.add_subparsers(dest="note_command", required=True, metavar="ACTION")
    add = sub.add_parser("add", parents=[common], help="attach a note to a span, run or approval")
    add.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    add.add_argument("text", help="the note (plain text, at most 1 MB); - reads it from standard input")
    edit = sub.add_parser("edit", parents=[common], help="replace a note's text, if nobody changed it since")
    edit.add_argument("note", metavar="NOTE_ID", help="the note's id (`note show TARGET` lists them)")
    edit.add_argument("text", help="the new text; - reads it from standard input")
    edit.add_argument("--revision", type=int, required=True, help="the revision you read (`note show`)")
    remove = sub.add_parser("remove", parents=[common], help="remove a note, if nobody changed it since")
    remove.add_argument("note", metavar="NOTE_ID", help="the note's id (`note show TARGET` lists them)")
    remove.add_argument("--revision", type=int, required=True, help="the revision you read (`note show`)")
    show = sub.add_parser("show", parents=[common], help="the notes and labels on one target")
    show.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    show.add_argument("--json", action="store_true", help="one JSON object with stable keys")
    for p in (add, edit, remove):
        p.add_argument("--actor", help="your name, recorded with the note (default: your login)")
    lsub = label.add_subparsers(dest="label_command", required=True, metavar="ACTION")
    for action, text in (("add", "put a label on a span, run or approval"), ("remove", "take a label off")):
        p = lsub.add_parser(action, parents=[common], help=text)
        p.add_argument("target", metavar="TARGET", help=TARGET_HELP)
        p.add_argument("label", help="needs-review, bad-tool-choice, regression or your own (at most 64 "
                                     "characters, no hidden ones)")
        p.add_argument("--actor", help="your name, recorded with the label (default: your login)")
    listing.add_argument("--since", default=DEFAULT_SINCE, metavar="WHEN",
                         help=f"how far back: 8h, 30m, 2d, 1w or a UTC time (default {DEFAULT_SINCE})")
    listing.add_argument("--label", help="only this label, and the notes on what carries it")
    listing.add_argument("--json", action="store_true", help="one JSON array with stable keys")


def actor_of(args: argparse.Namespace, store: Store) -> str:
    """`--actor`, else the database login on PostgreSQL, else the OS user."""
    if getattr(args, "actor", None):
        return str(args.actor)
    login = store.login
    if login is not None and login.name:
        return str(login.name)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def body_of(text: str) -> str:
    if text != "-":
        return text
    data = sys.stdin.buffer.read(commands.MAX_READ)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"The note on standard input is not UTF-8 text (byte {exc.start}).") from exc


def cmd_note(args: argparse.Namespace) -> int:
    action = args.note_command
    store = open_for(args, "hold notes", write=action != "show")
    try:
        if action == "add":
            target = reads.resolve(store, args.target)
            note = commands.add_note(store, target.kind, target.id, body_of(args.text), actor_of(args, store))
            say(f"Noted {note.target.kind} {out.clean(note.target.id)}: note {note.id}, revision 1.")
        elif action == "edit":
            note = commands.edit_note(store, args.note, body_of(args.text), args.revision, actor_of(args, store))
            say(f"Edited note {note.id}: now revision {note.revision}.")
        elif action == "remove":
            commands.remove_note(store, args.note, args.revision, actor_of(args, store))
            say(f"Removed note {out.clean(args.note)}.")
        else:
            _show(store, args)
        return EXIT_OK
    finally:
        store.close()


def _show(store: Store, args: argparse.Namespace) -> None:
    target = reads.resolve(store, args.target)
    marks = reads.marks_for(store, target.kind, target.id)
    if args.json:
        say(out.json_text({"target": target.kind, "target_id": target.id, "run_id": target.run_id,
                           "labels": [{"label": x.label, "author": x.author, "login": x.author_login,
                                       "at": x.created_at} for x in marks.labels],
                           "notes": [{"id": n.id, "text": n.text, "author": n.author, "login": n.author_login,
                                      "created_at": n.created_at, "updated_at": n.updated_at,
                                      "updated_by": n.updated_by, "revision": n.revision} for n in marks.notes]},
                          indent=2))
        return
    say(f"{target.kind} {out.clean(target.id)} (run {out.clean(target.run_id)})")
    say("labels: " + (", ".join(out.clean(x.label) for x in marks.labels) or "none"))
    for n in marks.notes:
        say(f"\nnote {n.id} · revision {n.revision} · {out.clean(n.author, 40)} · {utc_text(n.created_at)}")
        for line in n.text.splitlines() or [""]:
            say("  " + out.clean(line))


def cmd_label(args: argparse.Namespace) -> int:
    store = open_for(args, "hold labels", write=True)
    try:
        target = reads.resolve(store, args.target)
        if args.label_command == "add":
            commands.add_label(store, target.kind, target.id, args.label, actor_of(args, store))
            say(f"Labelled {target.kind} {out.clean(target.id)} {out.clean(args.label)!r}.")
        else:
            commands.remove_label(store, target.kind, target.id, args.label, actor_of(args, store))
            say(f"Removed the label {out.clean(args.label)!r} from {target.kind} {out.clean(target.id)}.")
        return EXIT_OK
    finally:
        store.close()


def cmd_notes(args: argparse.Namespace) -> int:
    at = since_time(args.since, time.time())
    store = open_for(args, "hold notes")
    try:
        entries = reads.since(store, at, args.label.strip().casefold() if args.label else None)
    finally:
        store.close()
    if args.json:
        say(out.json_text([entry_json(e) for e in entries], indent=2))
    elif not entries:
        say(f"Nothing noted or labelled since {utc_text(at)}.")
    else:
        say(out.table(["WHEN (UTC)", "WHO", "WHAT", "ON", "LABELS", "TEXT"],
                      [[utc_text(e.at)[:-4], out.clean(e.author, 20), e.what,
                        f"{e.target.kind} {out.clean(e.target.id, 52)}", out.clean(", ".join(e.labels), 30),
                        out.clean(e.text, 60)] for e in entries]))
    return EXIT_OK


def entry_json(e: Entry) -> dict[str, object]:
    return {"what": e.what, "target": e.target.kind, "target_id": e.target.id, "run_id": e.target.run_id,
            "author": e.author, "login": e.author_login, "at": e.at, "text": e.text, "note_id": e.note_id,
            "labels": list(e.labels)}
