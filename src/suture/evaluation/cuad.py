"""Rebuild span-labelled queries from CUAD v1's `master_clauses.csv`.

CUAD lists, per contract and clause category, the exact clause quotes (a Python
list-of-strings rendering) but not their offsets. Each quote is found in the
contract's text — an exact search first, then a whitespace-insensitive search through
an offset map — and every (contract, category) whose quotes are all found becomes one
query in the LegalBench-RAG layout:

    "Consider the <agreement title> between <parties>; <question for the category>"

Queries are drawn (seeded) from contracts that are not in a given exclusion set
(CUAD-mini's), so the output can serve as a dev or training set without leakage.
"""

from __future__ import annotations

import ast
import csv
import random
import re
import sys
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

#: one question per category, worded as in LegalBench-RAG's CUAD queries (metadata
#: categories — document name, parties, dates of signing — are not asked about)
QUESTIONS: dict[str, str] = {
    "Expiration Date": "What is the expiration date of this contract?",
    "Renewal Term": "What is the renewal term for this contract?",
    "Notice Period To Terminate Renewal": "What is the notice period required to terminate "
    "the renewal?",
    "Governing Law": "What is the governing law for this contract?",
    "Most Favored Nation": "Is there a most favored nation clause in this contract?",
    "Competitive Restriction Exception": "Are there any exceptions to competitive "
    "restrictions in this contract?",
    "Non-Compete": "Is there a non-compete clause in this contract?",
    "Exclusivity": "Does this contract include an exclusivity agreement?",
    "No-Solicit Of Customers": "Is there a clause preventing the solicitation of customers "
    "in this contract?",
    "No-Solicit Of Employees": "Is there a clause preventing the solicitation of employees "
    "in this contract?",
    "Non-Disparagement": "Is there a non-disparagement clause in this contract?",
    "Termination For Convenience": "Can this contract be terminated for convenience, and "
    "under what conditions?",
    "Rofr/Rofo/Rofn": "Does this contract include any right of first refusal, right of "
    "first offer, or right of first negotiation?",
    "Change Of Control": "What happens in the event of a change of control of one of the "
    "parties in this contract?",
    "Anti-Assignment": "Is there an anti-assignment clause in this contract?",
    "Revenue/Profit Sharing": "Does this contract include any revenue or profit-sharing "
    "arrangements?",
    "Price Restrictions": "Are there any restrictions on changing prices under this contract?",
    "Minimum Commitment": "Is there a minimum commitment required under this contract?",
    "Volume Restriction": "Does this contract include any volume restrictions?",
    "Ip Ownership Assignment": "How is intellectual property ownership assigned in this "
    "contract?",
    "Joint Ip Ownership": "Does this contract provide for joint intellectual property "
    "ownership?",
    "License Grant": "What licenses are granted under this contract?",
    "Non-Transferable License": "Are the licenses granted under this contract "
    "non-transferable?",
    "Affiliate License-Licensor": "Does the licensor's affiliates have any licensing rights "
    "under this contract?",
    "Affiliate License-Licensee": "Does the licensee's affiliates have any licensing rights "
    "under this contract?",
    "Unlimited/All-You-Can-Eat-License": "Is there an unlimited or all-you-can-eat license "
    "in this contract?",
    "Irrevocable Or Perpetual License": "Are any of the licenses granted under this contract "
    "irrevocable or perpetual?",
    "Source Code Escrow": "Is there a source code escrow arrangement in this contract?",
    "Post-Termination Services": "Are there any services to be provided after the "
    "termination of this contract?",
    "Audit Rights": "What are the audit rights under this contract?",
    "Uncapped Liability": "Is there uncapped liability under this contract?",
    "Cap On Liability": "Is there a cap on liability under this contract?",
    "Liquidated Damages": "Does this contract provide for liquidated damages?",
    "Warranty Duration": "What is the duration of any warranties provided in this contract?",
    "Insurance": "What are the insurance requirements under this contract?",
    "Covenant Not To Sue": "Is there a covenant not to sue included in this contract?",
    "Third Party Beneficiary": "Are there any third-party beneficiaries designated in this "
    "contract?",
}

_WS = re.compile(r"\s+")
#: how master_clauses.csv marks text left out of a quote
OMITTED = "<omitted>"


def find_quote(text: str, quote: str, start: int = 0) -> tuple[int, int] | None:
    """Half-open offsets of `quote` in `text`: exact first, then whitespace-insensitive.

    The fallback collapses every whitespace run (in both strings) to one space, searches
    the collapsed text and maps the hit back through an offset map, so the returned
    range covers the original characters, line breaks included.
    """
    quote = quote.strip()
    if not quote:
        return None
    pos = text.find(quote, start)
    if pos >= 0:
        return pos, pos + len(quote)
    collapsed, offsets = collapse_whitespace(text)
    needle = _WS.sub(" ", quote)
    # the collapsed position of `start`: first collapsed char at or after it
    pos = collapsed.find(needle, bisect_left(offsets, start))
    if pos < 0:
        return None
    last = pos + len(needle) - 1
    return offsets[pos], offsets[last] + 1


@lru_cache(maxsize=4)  # the quotes of one contract are searched one after another
def collapse_whitespace(text: str) -> tuple[str, list[int]]:
    """`text` with whitespace runs as one space, and each kept char's original offset."""
    chars: list[str] = []
    offsets: list[int] = []
    for match in re.finditer(r"\s+|\S+", text):
        if match.group().isspace():
            chars.append(" ")
            offsets.append(match.start())
        else:
            chars.extend(match.group())
            offsets.extend(range(match.start(), match.end()))
    return "".join(chars), offsets


def parse_quotes(cell: str) -> list[str]:
    """The list-of-strings rendering in a category column -> the quotes."""
    cell = cell.strip()
    if not cell or cell == "[]":
        return []
    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError):
        return [cell]
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if str(v).strip()]


def contract_file(filename: str, available: Mapping[str, str]) -> str | None:
    """The .txt file of a CSV `Filename` (the PDF name; a few carry stray characters)."""
    stem = re.sub(r"\.pdf'?$", "", filename.strip(), flags=re.IGNORECASE)
    for candidate in (stem + ".txt", stem.strip() + ".txt"):
        if candidate in available.values():
            return candidate
    return available.get(_name_key(stem))


def _name_key(name: str) -> str:
    # NFKD + ASCII: "LECLANCHÉ" is composed in the CSV and decomposed on disk
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", plain.lower().removesuffix(".txt"))


def parties_text(answer: str) -> str:
    """'A ("Company"); B ("MA")' -> 'A and B' (defined-term parentheses dropped)."""
    names = []
    for part in answer.split(";"):
        name = re.sub(r"\s*\(.*?\)\s*", " ", part)
        name = re.sub(r"\s+", " ", name).strip(" ,;")
        if name and name not in names:
            names.append(name)
    if len(names) <= 1:
        return names[0] if names else "the parties"
    return ", ".join(names[:-1]) + " and " + names[-1]


def title_text(answer: str) -> str:
    title = re.sub(r"\s+", " ", answer).strip() or "agreement"
    return title.title() if title.isupper() else title


@dataclass
class BuildStats:
    contracts: int = 0
    excluded_contracts: int = 0
    missing_files: list[str] = field(default_factory=list)
    candidates: int = 0
    quotes_found_exact: int = 0
    quotes_found_whitespace: int = 0
    skipped_unfound: int = 0
    drawn_contracts: int = 0
    selected: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: (len(v) if isinstance(v, list) else v) for k, v in vars(self).items()}


def build_queries(
    master_csv: str | Path,
    contracts_dir: str | Path,
    *,
    n: int = 400,
    seed: int = 0,
    exclude_files: Iterable[str] = (),
    prefix: str = "cuad",
    contracts: int | None = None,
) -> tuple[dict[str, Any], BuildStats]:
    """Build `n` LegalBench-RAG style queries (or all, when fewer) and what happened.

    With `contracts=N`, N contracts (among those with at least one usable query) are
    drawn with the seed first and the queries are drawn only from them, which keeps the
    corpus to index small; fewer than `n` queries come back when those contracts hold
    fewer.
    """
    if contracts is not None and contracts < 1:
        raise ValueError(f"contracts must be >= 1, got {contracts}")
    csv.field_size_limit(sys.maxsize)
    contracts_dir = Path(contracts_dir)
    available = {_name_key(p.name): p.name for p in contracts_dir.glob("*.txt")}
    excluded = set(exclude_files)
    stats = BuildStats()
    candidates: list[dict[str, Any]] = []
    with Path(master_csv).open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            stats.contracts += 1
            name = contract_file(row["Filename"], available)
            if name is None:
                stats.missing_files.append(row["Filename"])
                continue
            if name in excluded:
                stats.excluded_contracts += 1
                continue
            text = (contracts_dir / name).read_text(encoding="utf-8")
            intro = (f"Consider the {title_text(row.get('Document Name-Answer', ''))} "
                     f"between {parties_text(row.get('Parties-Answer', ''))}")
            for category, question in QUESTIONS.items():
                quotes = parse_quotes(row.get(category, ""))
                if not quotes:
                    continue
                stats.candidates += 1
                spans = _locate_all(text, quotes, stats)
                if spans is None:
                    stats.skipped_unfound += 1
                    continue
                candidates.append({
                    "file": name,
                    "category": category,
                    "query": f"{intro}; {question}",
                    "snippets": [{"file_path": f"{prefix}/{name}", "span": [s, e]}
                                 for s, e in spans],
                })
    candidates.sort(key=lambda c: (c["file"], c["category"]))
    rng = random.Random(seed)
    if contracts is not None:
        files = sorted({c["file"] for c in candidates})
        if contracts < len(files):
            kept = set(rng.sample(files, contracts))
            candidates = [c for c in candidates if c["file"] in kept]
    stats.drawn_contracts = len({c["file"] for c in candidates})
    chosen = (rng.sample(candidates, n) if n < len(candidates)
              else list(candidates))
    chosen.sort(key=lambda c: (c["file"], c["category"]))
    stats.selected = len(chosen)
    tests = [
        {"query_id": f"cuad-derived-{i:04d}", "query": c["query"], "snippets": c["snippets"],
         "category": c["category"]}
        for i, c in enumerate(chosen)
    ]
    data = {
        "tests": tests,
        "source": {
            "built_by": "scripts/build_cuad_queries.py",
            "seed": seed,
            "requested": n,
            "contracts": contracts,
            "excluded_contracts": sorted(excluded),
            "stats": stats.to_dict(),
        },
    }
    return data, stats


def locate_quote(text: str, quote: str) -> list[tuple[int, int]] | None:
    """Spans of one CSV quote; CUAD elides text inside a quote as "<omitted>", so each
    part is found in order after the previous one and becomes its own span."""
    parts = [p.strip() for p in quote.split(OMITTED) if p.strip()]
    spans: list[tuple[int, int]] = []
    cursor = 0
    for number, part in enumerate(parts):
        found = find_quote(text, part, cursor if number else 0)
        if found is None:
            return None
        spans.append(found)
        cursor = found[1]
    return spans or None


def _locate_all(text: str, quotes: list[str], stats: BuildStats) -> list[tuple[int, int]] | None:
    spans: list[tuple[int, int]] = []
    for quote in quotes:
        found = locate_quote(text, quote)
        if found is None:
            return None
        exact = all(text[s:e] in quote for s, e in found)
        if exact:
            stats.quotes_found_exact += 1
        else:
            stats.quotes_found_whitespace += 1
        spans.extend(found)
    return sorted(set(spans))


def benchmark_files(path: str | Path) -> set[str]:
    """File names (last path component) a LegalBench-RAG benchmark points into."""
    import json

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {s["file_path"].rsplit("/", 1)[-1] for t in data["tests"] for s in t["snippets"]}


__all__ = [
    "QUESTIONS",
    "BuildStats",
    "benchmark_files",
    "build_queries",
    "collapse_whitespace",
    "contract_file",
    "find_quote",
    "locate_quote",
    "parse_quotes",
    "parties_text",
    "title_text",
]
