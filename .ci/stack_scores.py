"""Scores of two dependency stacks compared: .ci/run scores the committed fixture pairs with every metric under
the newest stack and under the lowest declared versions (tests/constraints-lowest.txt), each with
tests/support/distributed_worker.py in one process, then runs

    python .ci/stack_scores.py NEWEST.json LOWEST.json

which fails unless every corpus score and every segment score agree to ``movers.REGROUPING_ATOL`` (1e-5) and the
signatures name the same settings (their version fields differ by design)."""
from __future__ import annotations

import json
import sys


def compare(newest: dict, lowest: dict, atol: float) -> list[str]:
    problems = []
    if set(newest) != set(lowest):
        problems.append(f"different metrics: {sorted(set(newest) ^ set(lowest))}")
    for key in sorted(set(newest) & set(lowest)):
        a, b = newest[key], lowest[key]
        if a["settings"] != b["settings"]:
            problems.append(f"{key}: signatures differ beyond versions:\n  {a['signature']}\n  {b['signature']}")
        if len(a["scores"]) != len(b["scores"]):
            problems.append(f"{key}: {len(a['scores'])} and {len(b['scores'])} segment scores")
            continue
        pairs = zip([a["score"], *a["scores"]], [b["score"], *b["scores"]], strict=True)
        worst = max(abs(x - y) for x, y in pairs)
        if not worst <= atol:
            problems.append(f"{key}: max |Δ| {worst:.3g} > {atol}")
        else:
            print(f"{key}: max |Δ| {worst:.1e}")
    return problems


def main(argv: list[str]) -> int:
    from movers.core.result import REGROUPING_ATOL

    newest, lowest = (json.loads(open(path, encoding="utf-8").read()) for path in argv)
    problems = compare(newest, lowest, REGROUPING_ATOL)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
