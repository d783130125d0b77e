"""``python -m shared.bench baselines``: the rescaling baselines the package ships (``movers/data/baselines.json``),
from a public corpus.

    python -m shared.bench baselines [--data wmt15_16_da_seg_toen] [--pairs 1000] [--seed 0] [--out FILE]

The corpus: the English reference translations of the WMT15/16 segment-level DA development set
(../shared/data/wmt15_16_da_seg_toen, cs/de/fi/ru-en news, 3,420 unique sentences). Each baseline is
the mean score, at the metric's default settings with the bundled encoder (GloVe for SMS/S+WMS), of
`--pairs` random pairs of *different* unique references (numpy ``default_rng(seed)``: two indices
drawn uniformly, redrawn while equal). Only these means are shipped, not the texts.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from .data import load_dataset

CORPUS_ID = "wmt15-16-refs"


def compute(data: str = "wmt15_16_da_seg_toen", pairs: int = 1000, seed: int = 0,
            metrics: tuple[str, ...] | None = None) -> dict:
    from movers import metrics as registry
    from movers.pipeline.call import settings_of

    records = load_dataset(data).records
    texts = list(dict.fromkeys(r["references"][0] for r in records))
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(texts), size=pairs)
    b = rng.integers(0, len(texts), size=pairs)
    while (same := a == b).any():
        b[same] = rng.integers(0, len(texts), size=int(same.sum()))
    out = {}
    for metric in metrics or [s.slug for s in registry.specs() if s.rescalable]:
        t0 = time.perf_counter()
        result = registry.function(metric)([texts[i] for i in a], [texts[j] for j in b])
        scores = np.asarray(result.scores)
        out[metric] = {"baseline": float(scores.mean()), "std": float(scores.std()), "pairs": pairs, "seed": seed,
                       "corpus_id": CORPUS_ID, "corpus": f"{data}: unique first references ({len(texts)})",
                       "settings": settings_of(result.signature),
                       "signature": str(result.signature.without("empty", "baseline"))}
        print(f"{metric}: b = {scores.mean():.6f} (std {scores.std():.4f}, {time.perf_counter() - t0:.1f} s)",
              file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench baselines", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="wmt15_16_da_seg_toen")
    p.add_argument("--pairs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the JSON here (default: stdout)")
    args = p.parse_args(argv)
    payload = {"about": "Rescaling baselines for baseline='bundled'; made by `python -m shared.bench baselines` "
                        f"--data {args.data} --pairs {args.pairs} --seed {args.seed}. See shared/bench/baselines.py.",
               "baselines": compute(args.data, args.pairs, args.seed)}
    text = json.dumps(payload, indent=1, ensure_ascii=False) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0
