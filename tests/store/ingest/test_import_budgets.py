"""What one imported file may cost, and the decoding rules import shares with the receiver.

- one string longer than the limit is kept cut, with a marker, and the summary says how many were;
- a compressed file that decompresses past its limit, or whose tail is nothing but blank space, stops
  with one sentence instead of reading gigabytes;
- raw bytes that are not UTF-8 and lone UTF-16 surrogate escapes are refused (exit 2, one sentence), as
  the receiver refuses them (400), instead of being imported as U+FFFD or failing later.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentdesk.cli.main import main
from agentdesk.store.ingest.formats import ImportLimits
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.receiver_decode import BodyRefused, parse_json
from agentdesk.store.persistence.database import Store, open_store

TRACE = "5b8efff798038103d269b633813fc60c"


def document(name: str = "step", attributes: list[dict[str, Any]] | None = None,
             status: dict[str, Any] | None = None) -> dict[str, Any]:
    span = {"traceId": TRACE, "spanId": "eee19b7ec3c1b174", "name": name, "kind": 1,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": attributes or [], "status": status or {}}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
                                                            "value": {"stringValue": "svc"}}]},
                               "scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}]}]}


def span_names(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM spans")]
    finally:
        conn.close()


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    path = tmp_path / "agentdesk.sqlite"
    open_store(str(path)).close()
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    said = capsys.readouterr()
    return code, said.out, said.err


def test_a_long_string_is_kept_cut_and_the_summary_says_so(store_file: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "long.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document("n" * 3_000_000)).encode()))
    code, out, err = run(capsys, "--store", str(store_file), "import", "--quiet", "--max-string-mb", "1",
                         str(path))
    assert code == 0, err
    assert "1 string was longer than 1 MB (--max-string-mb)" in out
    (name,) = span_names(store_file)
    assert len(name) < 1_100_000 and name.startswith("n" * 1000) and "3,000,000 characters" in name


def test_the_limit_is_configurable_and_cuts_attributes_too(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "attr.json"
    attrs = [{"key": "big", "value": {"stringValue": "v" * 5000}}, {"key": "small", "value": {"stringValue": "v"}}]
    path.write_text(json.dumps(document(attributes=attrs)))
    result = import_files(store, [path], limits=ImportLimits(max_string_chars=1000), helper=False)
    assert result.error is None and result.strings_cut == 1


def test_a_decompression_past_the_limit_stops_with_one_sentence(store_file: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.json.gz"
    doc = json.dumps(document()).encode()
    path.write_bytes(gzip.compress(doc[:-1] + b" " * 3 * 2**20 + doc[-1:]))
    code, _, err = run(capsys, "--store", str(store_file), "import", "--quiet", "--max-decompressed-mb", "1",
                       str(path))
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "decompresses to more than 1 MiB" in err and "--max-decompressed-mb" in err


def test_a_tail_of_blank_space_stops_the_parser_early(store: Store, tmp_path: Path) -> None:
    """A whole document, then 80 MiB of spaces (a few KB gzipped): refused at the limit, traces before kept."""
    path = tmp_path / "spaces.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(json.dumps(document()).encode() + b"\n")
        block = b" " * 2**20
        for _ in range(80):
            handle.write(block)
    result = import_files(store, [path], helper=False)
    assert result.error is not None and "blank space" in str(result.error)
    assert result.report.spans_written == 1


@pytest.mark.parametrize("case", ["raw 0xff", "surrogate name", "surrogate attribute", "surrogate status"])
def test_bytes_that_are_no_text_are_refused_as_the_receiver_refuses_them(
        case: str, store_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if case == "raw 0xff":
        body = json.dumps(document("NAME")).encode().replace(b"NAME", b"bad \xff name")
    elif case == "surrogate name":
        body = json.dumps(document("\ud800 lone")).encode()
    elif case == "surrogate attribute":
        body = json.dumps(document(attributes=[{"key": "k", "value": {"stringValue": "\udfff"}}])).encode()
    else:
        body = json.dumps(document(status={"code": 2, "message": "x\udbff"})).encode()
    with pytest.raises(BodyRefused) as refused:
        parse_json(body)
    assert refused.value.status == 400
    path = tmp_path / "bad.json"
    path.write_bytes(body)
    code, _, err = run(capsys, "--store", str(store_file), "import", "--quiet", str(path))
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "UTF-8" in err or "surrogate" in err
    assert span_names(store_file) == []


def test_a_surrogate_pair_is_a_character_and_imports(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "emoji.json"
    path.write_text(json.dumps(document("rocket \U0001F680")))  # written as the escapes \ud83d\ude80
    assert "\\ud83d" in path.read_text()
    result = import_files(store, [path], helper=False)
    assert result.error is None and result.report.spans_written == 1


def test_a_fifo_handed_to_the_importer_is_refused_not_waited_on(store: Store, tmp_path: Path) -> None:
    """The window's File → Import calls the importer directly, past the command line's own check."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = import_files(store, [fifo], helper=False)
    assert result.error is not None and "named pipe" in str(result.error)
