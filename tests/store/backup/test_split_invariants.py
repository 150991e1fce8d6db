"""The anchor split after a restore, as an invariant over random histories (store/audit/restore.py `split`).

Whatever lines the machines anchored before and after a restore, the split keeps every line of the shared
history, keeps every line of the restored history, and excuses exactly the ended history's lines past the
copy's last record; with no restore it excuses nothing.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentdesk.store.audit import keys
from agentdesk.store.audit.restore import Restore, split


@st.composite
def histories(draw: st.DrawFn) -> tuple[int, int, list[tuple[int, str]], dict[int, str]]:
    head = draw(st.integers(1, 30))  # the copy's last record
    ended = draw(st.integers(head, head + 30))  # how far the ended history went
    restored = draw(st.integers(head + 1, head + 30))  # how far the restored history has gone
    old = sorted(draw(st.sets(st.integers(1, ended), max_size=20)))
    new = sorted(draw(st.sets(st.integers(head + 1, restored), max_size=20)))
    lines = [(seq, f"old{seq}" if seq > head else f"shared{seq}") for seq in old]
    lines += [(seq, f"new{seq}") for seq in new]
    table = {seq: f"shared{seq}" for seq in range(1, head + 1)} | {seq: f"new{seq}" for seq in
                                                                    range(head + 1, restored + 1)}
    return head, restored, lines, table


def _anchor(lines: list[tuple[int, str]]) -> keys.Anchor:
    heads: dict[int, str] = {}
    for seq, digest in lines:
        heads.setdefault(seq, digest)
    return keys.Anchor(heads, "anchor", 0, 0, 0, tuple(lines))


@given(histories())
def test_the_split_excuses_exactly_the_ended_history(history: tuple[int, int, list[tuple[int, str]],
                                                                    dict[int, str]]) -> None:
    head, restored, lines, table = history
    anchor = _anchor(lines)
    unchanged, none = split(anchor, [], table)
    assert unchanged.heads == anchor.heads and none == []

    rebased, gone = split(anchor, [Restore(head + 1, head, "b", 0.0)], table)
    for seq, digest in rebased.heads.items():
        assert table.get(seq) == digest or seq > restored  # nothing left that disagrees with the table
    assert {seq for seq, _ in lines if seq <= head} <= set(rebased.heads)  # the shared history stays
    assert {seq for seq, d in lines if d.startswith("new")} <= set(rebased.heads)  # so does the restored one
    ended = [seq for seq, d in lines if d.startswith("old")]
    if ended:
        assert len(gone) == 1 and gone[0].count == max(ended) - head
        assert gone[0].pairs == {(seq, d) for seq, d in lines if d.startswith("old")}
    else:
        assert gone == []
