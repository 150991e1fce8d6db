"""`agentdesk admin backup FILE`, `admin restore FILE` and `admin rebase-anchors` (store/backup/).

A progress bar (tqdm, on stderr, only on a terminal) for long copies: pages on SQLite, tables on
PostgreSQL. Refusals are one sentence with the store's exit codes (2 bad input or not the owner, 5
unavailable or pg_dump missing, 6 a store that fails `verify` for another reason than a restore).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from agentdesk.cli.opening import EXIT_OK, checked_location, open_for, say
from agentdesk.store.audit.restore import when
from agentdesk.store.backup import commands


def add_backup_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                       common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("backup", parents=[common], help="copy the store into FILE while it stays live (the owner; "
                       "PostgreSQL: pg_dump, the audit key into FILE.key)")
    p.add_argument("file", metavar="FILE", type=Path, help="the new backup file (must not exist)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p = sub.add_parser("restore", parents=[common], help="put a backup back (the owner); verify then names the "
                       "restore until `admin rebase-anchors`")
    p.add_argument("file", metavar="FILE", type=Path, help="a file `agentdesk admin backup` wrote")
    p.add_argument("--force", action="store_true", help="replace the store that is there (everything written "
                   "since the backup is lost)")
    p.add_argument("--key", metavar="KEYFILE", type=Path, help="PostgreSQL: the audit key file (default FILE.key)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("rebase-anchors", parents=[common], help="after a restore: move this machine's anchor lines "
                   "of the history the restore ended aside (audited; the owner)")


class _Bar:
    def __init__(self, what: str, enabled: bool) -> None:
        self.what, self.enabled = what, enabled and sys.stderr.isatty()
        self.bar: tqdm[None] | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.what, file=sys.stderr, dynamic_ncols=True, leave=False)
        self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_backup(args: argparse.Namespace) -> int:
    store = open_for(args, "be backed up", write=True)
    bar = _Bar("backing up", not args.quiet)
    try:
        done = commands.backup(store, args.file, bar, busy_timeout_s=args.busy_timeout)
    finally:
        bar.close()
        store.close()
    say(f"Backed up to {done.file} (marker record {done.mark.seq}, {when(done.mark.taken_at)}); the file is "
        "readable by you only.")
    if done.key_file is not None:
        say(f"The audit key is in {done.key_file}: keep it apart from the backup and as private as the owner's "
            "password (whoever holds it can sign records); `admin restore` needs both.")
    else:
        say("The audit key stays in this machine's config folder; on another machine restore it with "
            "`agentdesk audit key import` (`agentdesk audit key export -o FILE` here).")
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    bar = _Bar("restoring", not args.quiet)
    try:
        done = commands.restore(checked_location(args), args.file, force=args.force, key=args.key,
                                busy_timeout_s=args.busy_timeout, progress=bar)
    finally:
        bar.close()
    if done.mark is None:
        say(f"Restored {args.file} (up to record {done.head}), but it holds no backup marker (it was not written "
            "by `agentdesk admin backup`), so `verify` on a machine that saw later records will call them missing.")
    else:
        say(f"Restored the backup taken at {when(done.mark.taken_at)} (up to record {done.head}); recorded as "
            f"record {done.record}. `agentdesk verify` names the restore on machines that saw later records until "
            "the owner runs `agentdesk admin rebase-anchors` there.")
    return EXIT_OK


def cmd_rebase(args: argparse.Namespace) -> int:
    store = open_for(args, "re-base its anchors", write=True)
    try:
        done = commands.rebase_anchors(store)
    finally:
        store.close()
    if not done.lines:
        say("Nothing to re-base: this machine's anchor holds no history a restore ended.")
        return EXIT_OK
    for sentence in done.sentences:
        say(f"Was: {sentence.split(' (the store', 1)[0]}.")
    say(f"Moved {done.lines} anchor line{'s' if done.lines != 1 else ''} to {done.archive}; `agentdesk verify` "
        "checks against the restored history from now on.")
    return EXIT_OK
