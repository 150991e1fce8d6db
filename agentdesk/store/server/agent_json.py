"""Strict JSON bodies for the agent API: an object, known fields of the right types, no duplicate keys.

A duplicate key is refused rather than resolved: `{"command": "rm -rf ~", "command": "git status"}`
would be read as its last value here and perhaps as its first by whoever runs it. NaN and
Infinity are refused (they are not JSON), as is nesting beyond what arguments may have.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentdesk.store.errors import InvalidInput
from agentdesk.store.text.jsonsafe import depth_of
from agentdesk.store.validation import MAX_ARGUMENTS_DEPTH

MAX_BODY_BYTES = 5 * 1024 * 1024
"""A context item or a span's text may be 4 MB (store/validation.py); a body carries one."""


@dataclass(frozen=True, slots=True)
class Field:
    types: tuple[type, ...]
    required: bool = False
    nullable: bool = True


def field(*types: type, required: bool = False, nullable: bool = True) -> Field:
    return Field(types, required, nullable and not required)


TEXT, NEEDED_TEXT = field(str), field(str, required=True)
NUMBER = field(int, float)
WHOLE = field(int)
FLAG = field(bool)
OBJECT = field(dict)
Spec = Mapping[str, Field]


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Duplicate(f"The key {json.dumps(key)[:80]} appears twice in one object; send it once.")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_body(data: bytes, spec: Spec) -> dict[str, Any]:
    """The body as a dict holding only `spec`'s fields, each checked; `InvalidInput` says what is wrong."""
    if len(data) > MAX_BODY_BYTES:
        raise InvalidInput(f"The body is {len(data):,} bytes; the limit is {MAX_BODY_BYTES:,}.")
    if not data.strip():
        value: Any = {}
    else:
        try:
            value = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except _Duplicate as exc:
            raise InvalidInput(str(exc)) from None
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"The body is not UTF-8 (byte {exc.start}).") from None
        except RecursionError:
            raise InvalidInput(f"The body is nested too deeply; the limit is {MAX_ARGUMENTS_DEPTH} levels.") from None
        except ValueError as exc:
            raise InvalidInput(f"The body is not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise InvalidInput("The body must be a JSON object.")
    depth = depth_of(value)
    if depth > MAX_ARGUMENTS_DEPTH + 2:
        raise InvalidInput(f"The body is nested {depth} levels deep; the limit is {MAX_ARGUMENTS_DEPTH} levels.")
    unknown = sorted(set(value) - set(spec))
    if unknown:
        raise InvalidInput(f"Unknown field {json.dumps(unknown[0])[:80]}; this endpoint takes "
                           f"{', '.join(sorted(spec)) or 'no fields'}.")
    for name, rule in spec.items():
        if name not in value:
            if rule.required:
                raise InvalidInput(f"The field {name} is required.")
            continue
        item = value[name]
        if item is None:
            if not rule.nullable:
                raise InvalidInput(f"The field {name} cannot be null.")
            continue
        if isinstance(item, bool) and bool not in rule.types:
            raise InvalidInput(f"The field {name} must be {_kinds(rule)}, not true/false.")
        if not isinstance(item, rule.types):
            raise InvalidInput(f"The field {name} must be {_kinds(rule)}.")
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"The field {name} must be a finite number.")
    return value


def _kinds(rule: Field) -> str:
    names = {str: "text", int: "a number", float: "a number", bool: "true or false", dict: "an object"}
    return " or ".join(dict.fromkeys(names[t] for t in rule.types))
