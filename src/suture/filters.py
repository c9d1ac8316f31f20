"""`Filter`: which documents a query may draw from (document ids, id prefixes, metadata).

A filter is a conjunction: a document passes when its id is one of `doc_ids` (when
given), starts with one of `doc_id_prefixes` (when given) and its metadata meets every
`Condition`. Its JSON form, read by `Filter.parse` for the library, `suture query
--filter`, the HTTP API and the client alike::

    {"doc_id": ["a.txt", "b.txt"],          # or one string
     "doc_id_prefix": ["acme/"],            # or one string
     "metadata": {"tenant": "acme",         # equality
                  "year": {"gte": 2020, "lt": 2024},
                  "lang": {"in": ["en", "de"]}}}

Values are compared by JSON type: a number matches numbers only (`true` is not 1), a
string strings only, in code point order; a document without the key, or with a value
of another type, fails the condition. Each backend resolves a filter to the documents
it allows inside the backend (`Store.filter_documents`); the first stage then searches
only their chunks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from suture.exceptions import ConfigurationError

#: a metadata value a condition compares with
Scalar = str | int | float | bool | None
#: the comparisons a metadata condition may make
OPERATORS = ("eq", "in", "gt", "gte", "lt", "lte")
#: the operators that order values (numbers or strings)
RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
#: the keys of a filter's JSON form
FILTER_KEYS = ("doc_id", "doc_id_prefix", "metadata")

_EXAMPLE = ('{"doc_id_prefix": "acme/", "metadata": {"tenant": "acme", '
            '"year": {"gte": 2020}}}')


def value_kind(value: Any) -> str:
    """The JSON type a value is compared as: number, string, bool, null or other."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "other"


@dataclass(frozen=True, slots=True)
class Condition:
    """One metadata test: `metadata[key] <op> value` (`in`: `value` is a tuple)."""

    key: str
    op: str
    value: Scalar | tuple[Scalar, ...]

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        """Whether a document with this metadata passes (the reference every backend's
        own query is tested against)."""
        if self.key not in metadata:
            return False
        found = metadata[self.key]
        if self.op in ("in", "eq"):
            return any(_equal(found, v) for v in self.values())
        kind = value_kind(self.value)
        if value_kind(found) != kind:
            return False
        if self.op == "gt":
            return bool(found > self.value)
        if self.op == "gte":
            return bool(found >= self.value)
        if self.op == "lt":
            return bool(found < self.value)
        return bool(found <= self.value)

    def values(self) -> tuple[Scalar, ...]:
        """The values compared with (one, or the members of `in`)."""
        return self.value if isinstance(self.value, tuple) else (self.value,)


def _equal(found: Any, wanted: Scalar) -> bool:
    kind = value_kind(wanted)
    return value_kind(found) == kind and (kind == "null" or bool(found == wanted))


@dataclass(frozen=True, slots=True)
class Filter:
    """Which documents a query may draw from (see the module docstring)."""

    #: the only documents allowed (sorted, no repeats); None: any id
    doc_ids: tuple[str, ...] | None = None
    #: a document's id must start with one of these; empty: any id
    doc_id_prefixes: tuple[str, ...] = ()
    #: every condition must hold on the document's metadata
    metadata: tuple[Condition, ...] = ()

    @classmethod
    def parse(cls, data: Filter | Mapping[str, Any] | str | None) -> Filter | None:
        """A filter from its JSON form (a mapping or a JSON string); None stays None, a
        `Filter` is returned as it is. Raises `ConfigurationError` naming the bad key and
        the fix."""
        if data is None or isinstance(data, Filter):
            return data
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ConfigurationError(
                    f"the filter {data!r} is not JSON ({exc.msg}); write an object such as "
                    f"{_EXAMPLE}") from None
        if not isinstance(data, Mapping):
            raise ConfigurationError(
                f"a filter is a JSON object, got {data!r}; e.g. {_EXAMPLE}")
        unknown = sorted(set(data) - set(FILTER_KEYS))
        if unknown:
            raise ConfigurationError(
                f"unknown filter key {unknown[0]!r}; a filter has the keys "
                f"{', '.join(FILTER_KEYS)} (a metadata field goes under \"metadata\": "
                f'{{"metadata": {{{json.dumps(str(unknown[0]))}: ...}}}})')
        doc_ids = (None if data.get("doc_id") is None
                   else tuple(sorted(set(_strings(data["doc_id"], "doc_id")))))
        prefixes = (() if data.get("doc_id_prefix") is None
                    else tuple(sorted(set(_strings(data["doc_id_prefix"], "doc_id_prefix")))))
        if data.get("doc_id_prefix") is not None and not prefixes:
            raise ConfigurationError(
                'filter key "doc_id_prefix" names no prefix; give one or more, or leave it out')
        raw = data.get("metadata") or {}
        if not isinstance(raw, Mapping):
            raise ConfigurationError(
                f'filter key "metadata" must be an object of field conditions, got {raw!r}; '
                'e.g. {"metadata": {"tenant": "acme", "year": {"gte": 2020}}}')
        conditions: list[Condition] = []
        for key in sorted(raw):
            conditions.extend(_conditions(key, raw[key]))
        return cls(doc_ids, prefixes, tuple(conditions))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `parse` reads (a filter round-trips through it)."""
        data: dict[str, Any] = {}
        if self.doc_ids is not None:
            data["doc_id"] = list(self.doc_ids)
        if self.doc_id_prefixes:
            data["doc_id_prefix"] = list(self.doc_id_prefixes)
        if self.metadata:
            fields: dict[str, dict[str, Any]] = {}
            for c in self.metadata:
                fields.setdefault(c.key, {})[c.op] = (
                    list(c.value) if isinstance(c.value, tuple) else c.value)
            data["metadata"] = fields
        return data

    def allows_id(self, doc_id: str) -> bool:
        """Whether the id conditions let `doc_id` through (metadata aside)."""
        if self.doc_ids is not None and doc_id not in self.doc_ids:
            return False
        return not self.doc_id_prefixes or doc_id.startswith(self.doc_id_prefixes)

    def allows(self, doc_id: str, metadata: Mapping[str, Any]) -> bool:
        """Whether a document with this id and metadata passes."""
        return self.allows_id(doc_id) and all(c.matches(metadata) for c in self.metadata)

    def describe(self) -> str:
        """The filter as compact JSON, for messages and traces."""
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)


def _strings(value: Any, key: str) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, Sequence) or not all(isinstance(v, str) for v in values):
        raise ConfigurationError(
            f"filter key {key!r} takes a string or a list of strings, got {value!r}")
    return list(values)


def _scalar(key: str, op: str, value: Any) -> Scalar:
    kind = value_kind(value)
    if kind == "other":
        raise ConfigurationError(
            f"metadata filter on {key!r}: {op} compares with a string, number, true, false "
            f"or null, got {value!r}"
            + ('; to match any of several values write {"in": [...]}'
               if isinstance(value, list) else ""))
    if kind == "number" and not math.isfinite(value):
        raise ConfigurationError(f"metadata filter on {key!r}: {op} {value!r} is not a "
                                 "finite number")
    if op in RANGE_OPERATORS and kind not in ("number", "string"):
        raise ConfigurationError(
            f"metadata filter on {key!r}: {op} orders numbers or strings, got {value!r}; "
            'use {"eq": ...} for true, false or null')
    return value  # type: ignore[no-any-return]


def _conditions(key: Any, spec: Any) -> list[Condition]:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"metadata filter field names are non-empty strings, got "
                                 f"{key!r}")
    if not isinstance(spec, Mapping):
        return [Condition(key, "eq", _scalar(key, "eq", spec))]
    if not spec:
        raise ConfigurationError(
            f"metadata filter on {key!r} has no condition; give one of {', '.join(OPERATORS)}"
            ', e.g. {"gte": 2020}')
    conditions = []
    for op in sorted(spec):
        value = spec[op]
        if op not in OPERATORS:
            raise ConfigurationError(
                f"metadata filter on {key!r}: unknown operator {op!r}; choose one of "
                f"{', '.join(OPERATORS)} (e.g. {{{json.dumps(key)}: {{\"gte\": 2020}}}})")
        if op == "in":
            if not isinstance(value, Sequence) or isinstance(value, str) or not value:
                raise ConfigurationError(
                    f"metadata filter on {key!r}: \"in\" takes a non-empty list of values, "
                    f"got {value!r}")
            conditions.append(Condition(key, op, tuple(_scalar(key, op, v) for v in value)))
        else:
            conditions.append(Condition(key, op, _scalar(key, op, value)))
    return conditions


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix` (code point order),
    so `prefix <= s < prefix_end(prefix)` is `s.startswith(prefix)` as a range an index
    can serve; None when there is none (a prefix of U+10FFFF only)."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            following = last + 1 if last + 1 != 0xD800 else 0xE000  # skip surrogates
            return "".join(chars) + chr(following)
    return None
