"""Field-level decoding shared by the JSON and protobuf readers: ids, integers, enums, values.

OTLP/JSON differs from plain proto3 JSON (hex ids, integer enums, int64 as
strings) and real exporters differ from the spec (base64 ids, enum names), so
every field is accepted in each of the shapes seen in the wild and refused with
one sentence otherwise. Nesting of attribute values is bounded: a hostile file
cannot make the importer recurse without limit.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

MAX_VALUE_DEPTH = 32
MIN_TIME_NS = 0
MAX_TIME_NS = 7_258_118_400 * 10**9
"""2200-01-01: a later timestamp is a broken clock or a hostile file, not a trace."""

SPAN_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
              "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
KIND_NAMES = {v: k for k, v in SPAN_KINDS.items()}
_VALID = {id(SPAN_KINDS): frozenset(SPAN_KINDS.values()), id(STATUS_CODES): frozenset(STATUS_CODES.values())}
"""Each enum's numbers as a set: `in dict.values()` was a visible share of decoding."""


_ANY_KEYS = {"stringValue": "string", "string_value": "string", "intValue": "int", "int_value": "int",
             "doubleValue": "double", "double_value": "double", "boolValue": "bool", "bool_value": "bool",
             "arrayValue": "array", "array_value": "array", "kvlistValue": "kvlist", "kvlist_value": "kvlist",
             "bytesValue": "bytes", "bytes_value": "bytes"}
"""An AnyValue's type, named as OTLP/JSON writes it (camelCase) or as the proto field (snake_case, Phoenix's export):
both are valid proto3 JSON, and dropping the second silently lost every attribute."""


class FieldError(ValueError):
    """A field has the wrong type or value; the reader adds where it is.

    `reason` is the short phrase an import summary counts skipped spans by ("without a traceId")."""

    def __init__(self, message: str, reason: str = "with an unreadable field") -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type[FieldError], tuple[str, str]]:  # it may cross from a helper process
        return (FieldError, (str(self), self.reason))


def hex_id(value: Any, size: int, what: str, *, optional: bool = False) -> str | None:
    """A trace id (16 bytes) or span id (8 bytes) given as hex or base64, as lower-case hex."""
    if value is None or value == "" or value == b"":
        if optional:
            return None
        raise FieldError(f"the {what} is missing", f"without a {what}")
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        if len(value) == size * 2:
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raw = _b64(value, what)
        else:
            raw = _b64(value, what)
    else:
        raise FieldError(f"the {what} must be a string, not {type(value).__name__}", f"with an invalid {what}")
    if len(raw) != size:
        raise FieldError(f"the {what} must be {size} bytes ({size * 2} hex digits), not {len(raw)}",
                         f"with an invalid {what}")
    if raw == bytes(size):
        if optional:
            return None
        raise FieldError(f"the {what} is all zeros, which OTLP defines as invalid", f"with an all-zero {what}")
    return raw.hex()


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        try:
            return base64.urlsafe_b64decode(value)
        except (binascii.Error, ValueError):
            raise FieldError(f"the {what} {value[:40]!r} is neither hex nor base64",
                             f"with an invalid {what}") from None


def int64(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise FieldError(f"{what} must be an integer, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 21:
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise FieldError(f"{what} must be an integer (a number or a decimal string), not {value!r:.40}")


def time_ns(value: Any, what: str, *, optional: bool = False) -> int:
    if value is None or value == "" or value == 0 or value == "0":
        if optional:
            return 0
        raise FieldError(f"the {what} is missing", f"without a {what}")
    try:
        ns = int64(value, f"the {what}")
    except FieldError as exc:
        raise FieldError(str(exc), f"with an unreadable {what}") from None
    if not MIN_TIME_NS < ns < MAX_TIME_NS:
        raise FieldError(f"the {what} {ns} is not a plausible time (before 1970 or after 2200)",
                         f"with an implausible {what}")
    return ns


def enum(value: Any, names: dict[str, int], what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise FieldError(f"{what} must be a number or a name")
    if isinstance(value, int):
        if value not in _VALID.get(id(names), ()):
            raise FieldError(f"{what} {value} is not one OTLP defines")
        return value
    if isinstance(value, str):
        if value in names:
            return names[value]
        short = {k.rsplit("_", 1)[-1]: v for k, v in names.items()}
        if value.upper() in short:
            return short[value.upper()]
        if value.isdigit():
            return enum(int(value), names, what)
    raise FieldError(f"{what} {value!r:.40} is not one OTLP defines")


def text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(f"{what} must be a string, not {type(value).__name__}")
    return value


def json_any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP/JSON AnyValue as a plain JSON value (kvlists become objects, bytes stay base64)."""
    if depth > MAX_VALUE_DEPTH:
        raise FieldError(f"an attribute value is nested deeper than {MAX_VALUE_DEPTH} levels")
    if not isinstance(value, dict):
        raise FieldError(f"an attribute value must be an object like {{\"stringValue\": ...}}, not {value!r:.40}")
    if not value:
        return None
    if len(value) == 1:
        ((key, inner),) = value.items()
    else:  # one key is the rule; take the first known one (a writer may add others)
        key = next((k for k in value if k in _ANY_KEYS), "")
        inner = value.get(key)
    kind = _ANY_KEYS.get(key)
    if kind is None:
        return None  # an unknown value type: ignored, as the spec asks of unknown fields
    if kind == "string":
        return text(inner, "a stringValue")
    if kind == "int":
        return int64(inner, "an intValue")
    if kind == "double":
        return _double(inner)
    if kind == "bool":
        if not isinstance(inner, bool):
            raise FieldError(f"a boolValue must be true or false, not {inner!r:.40}")
        return inner
    if kind == "array":
        items = _dict_or_empty(inner, "an arrayValue").get("values") or []
        if not isinstance(items, list):
            raise FieldError("an arrayValue's values must be a list")
        return [json_any_value(v, depth + 1) for v in items]
    if kind == "kvlist":
        return json_attributes(_dict_or_empty(inner, "a kvlistValue").get("values") or [], depth + 1)
    return text(inner, "a bytesValue")


def _dict_or_empty(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FieldError(f"{what} must be an object with values")
    return value


def _double(value: Any) -> float:
    if isinstance(value, bool):
        raise FieldError("a doubleValue must be a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise FieldError(f"a doubleValue {value!r:.40} is not a number") from None
        return number
    raise FieldError(f"a doubleValue must be a number, not {value!r:.40}")


def json_attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise FieldError("attributes must be a list of {key, value} objects")
    out: dict[str, Any] = {}
    for item in items:
        try:
            key, value = item["key"], item.get("value") or {}
        except (TypeError, KeyError, AttributeError):
            raise FieldError("each attribute must be an object with a string key") from None
        if not isinstance(key, str):
            raise FieldError("each attribute must be an object with a string key")
        if type(value) is dict and len(value) == 1 and type(text := value.get("stringValue")) is str:
            out[key] = text  # the common case, without the general walk
            continue
        out[key] = json_any_value(value, depth)
    return out


def proto_any_value(value: Any, depth: int = 0) -> Any:
    """An opentelemetry-proto AnyValue message as a plain JSON value."""
    if depth > MAX_VALUE_DEPTH:
        raise FieldError(f"an attribute value is nested deeper than {MAX_VALUE_DEPTH} levels")
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [proto_any_value(v, depth + 1) for v in value.array_value.values]
    if which == "kvlist_value":
        return proto_attributes(value.kvlist_value.values, depth + 1)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if which == "double_value" and not math.isfinite(value.double_value):
        return str(value.double_value)
    return getattr(value, which)


def proto_attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    return {kv.key: proto_any_value(kv.value, depth) for kv in items}


def to_any_value(value: Any, depth: int = 0) -> dict[str, Any]:
    """A plain value back to an OTLP/JSON AnyValue (export)."""
    if depth > MAX_VALUE_DEPTH:
        return {"stringValue": str(value)}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value if math.isfinite(value) else str(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [to_any_value(v, depth + 1) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": to_attributes(value, depth + 1)}}
    if value is None:
        return {}
    return {"stringValue": str(value)}


def to_attributes(values: dict[str, Any], depth: int = 0) -> list[dict[str, Any]]:
    return [{"key": k, "value": to_any_value(v, depth)} for k, v in values.items()]
