"""`agentdesk search`, `agentdesk critical-path` and `agentdesk diff`: the analyses from the command line.

Each opens the store read-only through `open_any` (any source: the analyses use
only the `Source` seam), prints agent text (span names, tools, context items)
through `out.clean` on the terminal and `out.json_text` in `--json`, and turns
a bad query into one sentence with exit 2 (`QueryError` is an `InvalidInput`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_any, positive, say
from agentdesk.store.text.durations import format_duration

if TYPE_CHECKING:  # the engines (and numpy) load only when one of these commands runs: every other
    # command, `watch` and `approve` first, starts as fast as before
    from agentdesk.store.analysis.run_diff import RunDiff
    from agentdesk.store.source import Source

Command = Callable[[str, str], argparse.ArgumentParser]
DEFAULT_LIMIT = 500
"""Hits listed per kind by `search` (the same default as `store_search.DEFAULT_LIMIT`)."""


def add_analysis_parsers(command: Command) -> None:
    """The three commands, added through the main parser's `command(name, help)`."""
    p = command("search", "find spans (and approvals, context items) by words, kind:, status:, dur>2s, key:value")
    p.add_argument("query", help='the query, e.g. "payments.py kind:tool dur>2s" (see docs/analysis.md)')
    p.add_argument("--run", metavar="RUN", help="only this run's spans")
    p.add_argument("--limit", type=positive(int), default=DEFAULT_LIMIT, help="hits listed per kind")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p = command("critical-path", "the chain of spans that determined when a run ended, with self times")
    p.add_argument("run", help="the run (any run id the store knows)")
    p.add_argument("--limit", type=positive(int), default=60, help="rows printed (--json has all)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p = command("diff", "compare two runs: spans added, removed, slower, faster; totals; context differences")
    p.add_argument("run_a", help="the first run (A)")
    p.add_argument("run_b", help="the run compared with A (B)")
    p.add_argument("--all", action="store_true", help="list unchanged spans too")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")


def _with_source(args: argparse.Namespace, work: Callable[[Source], int]) -> int:
    source = open_any(args)
    try:
        return work(source)
    finally:
        source.close()


def cmd_search(args: argparse.Namespace) -> int:
    return _with_source(args, lambda source: _search(source, args))


def _search(source: Source, args: argparse.Namespace) -> int:
    from agentdesk.store.search.run_search import search_run
    from agentdesk.store.search.store_search import HitKind, search_store

    if args.run:
        result = search_run(source, args.run, args.query)
        table = source.span_table(args.run, result.span_ids[: args.limit])
        origin = source.run(args.run).started_at.timestamp()
        rows = [{"span_id": i, "name": n, "kind": k, "status": s, "start_s": round(st - origin, 6),
                 "duration_s": None if e is None else round(e - st, 6)}
                for i, n, k, s, st, e in zip(table.ids, table.names, table.kinds, table.statuses, table.starts,
                                             table.ends, strict=True)]
        rows.sort(key=lambda r: r["start_s"])
        if args.json:
            say(out.json_text({"run_id": args.run, "total": result.total, "scanned": result.scanned,
                               "spans": rows}, indent=2))
            return EXIT_OK
        say(f"{result.total:,} matching span{'s' if result.total != 1 else ''} in run {out.clean(args.run)}"
            + (" (scanned: this source has no search index)" if result.scanned else ""))
        if rows:
            say(out.table(["START", "DURATION", "KIND", "STATUS", "SPAN", "NAME"],
                          [[format_duration(r["start_s"]), format_duration(r["duration_s"]), out.clean(r["kind"], 10),
                            out.clean(r["status"], 10), out.clean(r["span_id"]), out.clean(r["name"], 60)]
                           for r in rows]))
        return EXIT_OK
    found = search_store(source, args.query, limit=args.limit)
    if args.json:
        say(out.json_text({"totals": {k.value: v for k, v in found.totals.items()}, "scanned": found.scanned,
                           "runs": [{"run_id": g.run_id, "title": g.title, "agent": g.agent,
                                     "hits": [{"kind": h.kind.value, "id": h.id, "span_id": h.span_id,
                                               "label": h.label} for h in g.hits]}
                                    for g in found.groups]}, indent=2))
        return EXIT_OK
    nouns = {HitKind.SPAN: "span", HitKind.APPROVAL: "approval", HitKind.CONTEXT: "context item", HitKind.RUN: "run"}
    totals = ", ".join(f"{n:,} {nouns[kind]}{'s' if n != 1 else ''}" for kind, n in found.totals.items())
    say(f"{totals} in {len(found.groups):,} run{'s' if len(found.groups) != 1 else ''}")
    for group in found.groups:
        say(f"\n{out.clean(group.run_id)}  {out.clean(group.title, 50)}  ({out.clean(group.agent, 30)})")
        for hit in group.hits:
            say(f"  {hit.kind.value:<9} {out.clean(hit.id):<24} {out.clean(hit.label, 80)}")
    return EXIT_OK


def cmd_critical_path(args: argparse.Namespace) -> int:
    return _with_source(args, lambda source: _critical_path(source, args))


def _critical_path(source: Source, args: argparse.Namespace) -> int:
    from agentdesk.store.analysis.run_path import run_path

    found = run_path(source, args.run)  # NotFound (exit 4) for an unknown run; the window shows the same
    path, summary, rows = found.path, found.summary, found.rows()
    if args.json:
        say(out.json_text({"run_id": args.run, "spans": len(path), "total_s": path.total,
                           "duration_s": path.duration, "summary": summary.describe(),
                           "seconds_by_kind": summary.seconds_by_kind, "path": rows}, indent=2))
        return EXIT_OK
    say(f"{summary.describe()} (run {format_duration(path.duration)})")
    shown = rows[: args.limit]
    if shown:
        say(out.table(["START", "SELF", "% RUN", "KIND", "SPAN", "NAME"],
                      [[format_duration(r["start_s"]), format_duration(r["self_s"]), f"{r['share'] * 100:.1f}",
                        out.clean(r["kind"], 10), out.clean(r["span_id"]), out.clean(r["name"], 60)]
                       for r in shown]))
    if len(rows) > len(shown):
        say(f"… {len(rows) - len(shown):,} more on the path (--limit, or --json for all)")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from agentdesk.store.analysis.run_diff import diff_runs

    return _with_source(args, lambda source: _diff(diff_runs(source, args.run_a, args.run_b), args))


def diff_json(diff: RunDiff) -> dict[str, Any]:
    a, b = diff.spans_a, diff.spans_b

    def side(spans: Any, i: int | None, marks: dict[str, Any]) -> dict[str, Any] | None:
        if i is None:
            return None
        found = marks.get(spans.ids[i])
        return {"span_id": spans.ids[i], "name": spans.names[i], "kind": spans.kinds[i],
                "status": spans.statuses[i], "duration_s": spans.duration(i),
                "labels": list(found.label_names) if found else [],
                "notes": [{"author": n.author, "at": n.created_at, "text": n.text} for n in found.notes] if found
                else []}
    return {
        "run_a": diff.run_a.id, "run_b": diff.run_b.id,
        "counts": {c.value: n for c, n in diff.alignment.counts().items()},
        "totals": {"a": vars(diff.totals_a), "b": vars(diff.totals_b)},
        "spans": [{"change": p.change.value, "depth": p.depth, "a": side(a, p.a, diff.marks_a),
                   "b": side(b, p.b, diff.marks_b)}
                  for p in diff.alignment.pairs],
        "context": [{"a_span": d.a_span, "b_span": d.b_span, "name": d.name,
                     "only_a": [{"role": i.role, "kind": i.kind, "content": i.content} for i in d.only_a],
                     "only_b": [{"role": i.role, "kind": i.kind, "content": i.content} for i in d.only_b]}
                    for d in diff.contexts],
        "notes": list(diff.notes),
    }


MARKS = {"same": " ", "slower": "▲", "faster": "▼", "added": "+", "removed": "-"}


def _diff(diff: RunDiff, args: argparse.Namespace) -> int:
    from agentdesk.store.analysis.align import Change
    from agentdesk.store.analysis.run_diff import summary_line

    if args.json:
        say(out.json_text(diff_json(diff), indent=2))
        return EXIT_OK
    ta, tb = diff.totals_a, diff.totals_b
    say(f"A {out.clean(diff.run_a.id)}  {out.clean(diff.run_a.title, 50)}")
    say(f"B {out.clean(diff.run_b.id)}  {out.clean(diff.run_b.title, 50)}")
    say(out.table(["", "A", "B", "CHANGE"], [
        ["spans", f"{ta.spans:,}", f"{tb.spans:,}", f"{tb.spans - ta.spans:+,}"],
        ["tokens", f"{ta.tokens:,}", f"{tb.tokens:,}", f"{tb.tokens - ta.tokens:+,}"],
        ["cost", f"${ta.cost_usd:.4f}", f"${tb.cost_usd:.4f}", f"{tb.cost_usd - ta.cost_usd:+.4f}"],
        ["duration", format_duration(ta.duration_s), format_duration(tb.duration_s),
         "" if ta.duration_s is None or tb.duration_s is None
         else format_duration(tb.duration_s - ta.duration_s, signed=True)],
        ["errors", str(ta.errors), str(tb.errors), f"{tb.errors - ta.errors:+}"]]))
    say(summary_line(diff))
    for note in diff.notes:
        say(f"note: {note}")
    for p in diff.alignment.pairs:
        marked = diff.marks_line(diff.spans_a.ids[p.a] if p.a is not None else None,
                                 diff.spans_b.ids[p.b] if p.b is not None else None)
        if p.change is Change.SAME and not args.all and not marked:  # a marked span shows, changed or not
            continue
        i, spans = (p.b, diff.spans_b) if p.b is not None else (p.a, diff.spans_a)
        assert i is not None
        times = ""
        if p.a is not None and p.b is not None:
            times = f"  {format_duration(diff.spans_a.duration(p.a))} → {format_duration(diff.spans_b.duration(p.b))}"
        say(f"{MARKS[p.change.value]} {'  ' * p.depth}{out.clean(spans.kinds[i], 10)} "
            f"{out.clean(spans.names[i], 60)}{times}" + (f"  ⚑ {out.clean(marked, 80)}" if marked else ""))
    for delta in diff.contexts:
        say(f"\ncontext differs at {out.clean(delta.name, 40)} ({out.clean(delta.a_span)} / "
            f"{out.clean(delta.b_span)}):")
        for item in delta.only_a:
            say(f"  - {out.clean(item.role or item.kind, 10)}: {out.clean(item.content, 100)}")
        for item in delta.only_b:
            say(f"  + {out.clean(item.role or item.kind, 10)}: {out.clean(item.content, 100)}")
    return EXIT_OK
