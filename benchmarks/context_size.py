"""Context size (chunks, tokens) of retrieval policies over unlabelled questions.

No gold spans, so no recall and no faithfulness: this only measures how much text each
policy hands to the model, e.g. scar against a static window on Microsoft's 10-K
(the SCAR paper's "−27.1% context tokens" setting).

    suture index ../shared/data/corpora/msft_10k/MICROSOFT_2023_10K.md \\
        --index out/idx-msft10k-minilm
    python benchmarks/context_size.py --index out/idx-msft10k-minilm \\
        --questions benchmarks/msft_10k_questions.json --k 5 \\
        --scar main=0.5,0.1 --scar transfer=0.1,0.8 --scar default
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from suture.evaluation.stats import paired_bootstrap
from suture.index import Index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--scar", action="append", default=None,
                        help="'default' or label=lam,tau (repeatable)")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    questions = json.loads(args.questions.read_text(encoding="utf-8"))["questions"]
    index = Index.open(args.index)
    policies: dict[str, tuple[str, dict[str, Any]]] = {
        "topk": ("topk", {}), "window": ("window", {}), "window2": ("window2", {}),
        "parent": ("parent", {}),
    }
    for text in args.scar or ["default"]:
        if text == "default":
            policies["scar"] = ("scar", {})
        else:
            label, _, values = text.partition("=")
            lam, tau = (float(v) for v in values.split(","))
            policies[f"scar:{label}"] = ("scar", {"lam": lam, "tau": tau})
    vectors = index.embed_queries(questions)
    sizes: dict[str, dict[str, list[float]]] = {p: {"chunks": [], "tokens": []} for p in policies}
    for question, vector in zip(questions, vectors, strict=True):
        for label, (name, params) in policies.items():
            context = index.retrieve(question, name, args.k, query_vector=vector, **params)
            sizes[label]["chunks"].append(context.chunks)
            sizes[label]["tokens"].append(context.tokens)
    print(f"{len(questions)} questions, k = {args.k}\n")
    print("| policy | chunks / query | tokens / query | tokens vs window |")
    print("|---|---:|---:|---:|")
    window_tokens = sum(sizes["window"]["tokens"]) / len(questions)
    for label, values in sizes.items():
        tokens = sum(values["tokens"]) / len(questions)
        print(f"| {label} | {sum(values['chunks']) / len(questions):.2f} | {tokens:.0f} | "
              f"{(tokens / window_tokens - 1) * 100:+.1f}% |")
    print()
    lines = []
    for label in sizes:
        if label.startswith("scar"):
            for metric in ("chunks", "tokens"):
                lines.append(paired_bootstrap(sizes[label][metric], sizes["window"][metric],
                                              metric=metric, policy_a=label, policy_b="window",
                                              resamples=args.resamples).summary())
    for line in lines:
        print(f"- {line}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"k": args.k, "sizes": sizes, "comparisons": lines},
                                       indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
