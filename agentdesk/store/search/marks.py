"""`label:` and `note:` terms: which spans, runs and approvals operators marked (store/notes).

Notes and labels are few next to spans (people write them), so the marked targets are found first, in full,
and the other terms then narrow those: a run's search intersects with its marked spans, the store-wide search
adds `s.id IN (...)` to its SQL. Only agentdesk's own store keeps notes: a foreign runtime's database has none,
and a query asking for them there is refused in one sentence rather than answered with nothing.
"""

from __future__ import annotations

from collections import defaultdict

from agentdesk.store.notes import reads
from agentdesk.store.persistence.database import own_store
from agentdesk.store.search.query import Query, QueryError, matches_text
from agentdesk.store.source import Source

Marked = dict[str, dict[str, str]]
"""kind (span, run, approval) -> target id -> its run."""


def marked_targets(source: Source, q: Query) -> Marked:
    """The targets that carry every `label:` and whose notes hold every `note:` term."""
    store = own_store(source)
    if store is None:
        raise QueryError("Notes and labels are kept only in agentdesk's own store; this source has none "
                         "(drop the label: and note: terms).")
    if not reads.readable(store):
        raise QueryError("This login may not read notes and labels (an agent's); drop the label: and note: terms.")
    candidates: dict[tuple[str, str], str] | None = reads.labelled(store, q.labels) if q.labels else None
    if q.notes:
        texts = reads.note_texts(store)
        keep = {key: run for key, (run, bodies) in texts.items()
                if all(any(matches_text(words, body) for body in bodies) for words in q.notes)}
        candidates = keep if candidates is None else {k: r for k, r in candidates.items() if k in keep}
    found: Marked = defaultdict(dict)
    for (kind, target), run in (candidates or {}).items():
        found[kind][target] = run
    return found
