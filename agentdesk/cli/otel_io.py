"""`agentdesk import FILE...` and `agentdesk export`: OpenTelemetry traces in and out.

Import prints a tqdm progress bar on stderr (bytes while reading, then spans/s and
an ETA while writing) and a one-line summary. A bad file is one sentence naming
the line or record and exit code 2; the traces read whole before it are kept.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TypeVar

from tqdm import tqdm

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, CommandFailed, open_for, positive, say
from agentdesk.cli.outfile import output_file
from agentdesk.store.ingest.export import FORMATS, export
from agentdesk.store.ingest.formats import MAX_DECOMPRESSED_BYTES, MAX_STRING_CHARS, ImportLimits
from agentdesk.store.ingest.importer import ImportProgress, check_paths, import_files
from agentdesk.store.ingest.spans import NotOtlp
from agentdesk.store.text.visible import plural

EXIT_INVALID = 2
T = TypeVar("T")


def import_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", type=Path,
                   help="OTLP/JSON, OTLP JSON Lines or OTLP protobuf files (detected by content; gzip ok)")
    p.add_argument("--project", metavar="NAME",
                   help="project for traces whose resource names none (no openinference.project.name or "
                        "service.name)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--max-string-mb", type=positive(float, most=64), default=MAX_STRING_CHARS / 1e6, metavar="MB",
                   help="cut any one string (a name, an attribute) longer than this, keeping a marker with its "
                        "length (default 1)")
    p.add_argument("--max-decompressed-mb", type=positive(float, most=2**30), metavar="MB",
                   default=MAX_DECOMPRESSED_BYTES / 2**20,
                   help=f"refuse a compressed file that decompresses to more than this (default "
                        f"{MAX_DECOMPRESSED_BYTES // 2**20:,})")


def export_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN_ID", help="the run to export")
    p.add_argument("--project", metavar="NAME_OR_ID", help="export every run of this project instead")
    p.add_argument("--format", choices=FORMATS, default="otlp-json",
                   help="otlp-json (one document, default), otlp-jsonl (one line per resource) or otlp-proto (a "
                        "binary ExportTraceServiceRequest, for Phoenix, Jaeger, Tempo)")
    p.add_argument("-o", "--output", metavar="FILE", type=Path,
                   help="write here (default: stdout); a device or named pipe is written to as a stream, a "
                        "regular file is replaced whole, a folder or a link to a file is refused")
    p.add_argument("--raw", action="store_true",
                   help="on a terminal, write hidden characters (bidi, zero-width, C1…) as they are instead of "
                        "as JSON escapes")


class _Bars:
    """Two tqdm bars: bytes read (with spans/s in the postfix), then spans written with an ETA."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.reading: tqdm[None] | None = None
        self.writing: tqdm[None] | None = None

    def __call__(self, p: ImportProgress) -> None:
        if not self.enabled:
            return
        if p.phase == "reading":
            if self.reading is None:
                self.reading = tqdm(total=p.bytes_total, unit="B", unit_scale=True, desc="reading",
                                    file=sys.stderr, dynamic_ncols=True)
            self.reading.update(p.bytes_read - self.reading.n)
            self.reading.set_postfix(spans=p.spans_read, refresh=False)
        else:
            if self.reading is not None:
                self.reading.update(self.reading.total - self.reading.n)
                self.reading.close()
                self.reading = None
            if self.writing is None:
                self.writing = tqdm(total=p.spans_total, unit=" spans", unit_scale=True, desc="writing",
                                    file=sys.stderr, dynamic_ncols=True)
            self.writing.update(p.spans_done - self.writing.n)

    def close(self) -> None:
        for bar in (self.reading, self.writing):
            if bar is not None:
                bar.close()


def cmd_import(args: argparse.Namespace) -> int:
    check_paths(args.files)
    store = open_for(args, "import traces", write=True, create=True)
    bars = _Bars(enabled=not args.quiet)
    try:
        limits = ImportLimits(max_string_chars=max(1, int(args.max_string_mb * 1e6)),
                              max_decompressed_bytes=int(args.max_decompressed_mb * 2**20))
        result = import_files(store, args.files, default_project=args.project, progress=bars,
                              cancel=threading.Event(), limits=limits)
    finally:
        bars.close()
        store.close()
    r = result.report
    if isinstance(result.error, NotOtlp) and not r.traces and not r.events_joined:
        raise CommandFailed(f"{result.error}.", EXIT_INVALID)
    rate = result.spans_read / result.seconds if result.seconds > 0 else 0.0
    say(out.clean(f"Imported {plural(r.spans_written, 'span')} in {plural(r.traces, 'trace')} "
                  f"({r.duplicates:,} already there, "
                  f"{r.completed:,} completed, {r.orphans_pending:,} waiting for a parent) in "
                  f"{result.seconds:.1f} s ({rate:,.0f} spans/s)."))
    if r.events_joined or r.events_waiting or r.logs_unplaced:
        say(f"Log records: {r.events_joined:,} joined to their span, {r.events_waiting:,} kept for a span not yet "
            f"stored, {r.logs_unplaced:,} without a trace or span id (skipped).")
    if result.skipped and result.error is None:
        if not (r.spans_written or r.duplicates or r.orphans_pending):  # every span was unmappable: a wrong file
            raise CommandFailed(f"Nothing was imported: {result.skipped.describe()}.", EXIT_INVALID)
        say(f"{result.skipped.describe()} (they cannot be placed in a trace; the rest was imported).")
    marks = result.marks
    if marks.notes or marks.labels or marks.skipped:
        say(f"Operators' notes and labels: {marks.notes:,} notes and {marks.labels:,} labels restored, "
            f"{marks.skipped:,} already there or not writable" + (f" ({out.clean(marks.refused)})" if marks.refused
                                                                 else "") + ".")
    if result.strings_cut:
        say(f"{result.strings_cut:,} string{' was' if result.strings_cut == 1 else 's were'} longer than "
            f"{args.max_string_mb:g} MB (--max-string-mb) and kept cut, with a marker giving the whole length.")
    if result.error is not None:
        kept = (f"the {r.traces:,} whole traces read before it were kept" if r.traces
                else "nothing was imported")
        raise CommandFailed(f"{result.error}. Nothing from that record on was imported; {kept}.", EXIT_INVALID)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    store = open_for(args, "export runs", write=False)
    try:
        if args.output is not None:
            with output_file(args.output, protect=store.path) as handle:
                spans = export(store, handle, run_id=args.run_id, project=args.project, fmt=args.format)
            print(f"Exported {spans:,} spans to {out.clean(str(args.output))}.", file=sys.stderr)
        else:
            terminal = sys.stdout.isatty() and not args.raw
            export(store, out.TerminalJson(sys.stdout) if terminal else sys.stdout,  # type: ignore[arg-type]
                   run_id=args.run_id, project=args.project, fmt=args.format)
    finally:
        store.close()
    return EXIT_OK
