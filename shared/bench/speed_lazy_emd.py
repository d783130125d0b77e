"""``python -m shared.bench speed --metric lazy_emd``: the original's procedure vs movers' batched Lazy-EMD.

The original code (GitHub Beastlyprime/lazy_emd, ``Lazy-EMD/score.py`` + ``unbalanced.py``) is not an
installable package (and ``score.py`` does not parse at HEAD), so this benchmark times a **runtime
re-enactment written for movers from the description in ../shared/notes/originals.md §5.1** (no
code of the repository is copied). :func:`original_sinkhorn` is that re-enactment's solver; the
tests check it against the original's recorded outputs (tests/reference/lazyemd_*), so the two
timed procedures compute the same numbers. Per pair the re-enactment does what the original does:

* encode the reference and the hypothesis **one sentence per forward pass** with the tokenizer
  loaded as the original loads it (``AutoTokenizer(use_fast=False)``; transformers 5 serves it from
  the same Rust WordPiece), ``[CLS]``/``[SEP]`` included, truncation at 512, the same encoder and
  layer; L2-normalise; ``C = 1 - hyp @ ref.T`` (float32 product, float64 cost);
* masses ``1/(L-2)`` on real tokens, 0 on ``[CLS]``/``[SEP]`` (rounding remainder on the last one);
* numpy plain-domain scaling ``u = (a / K v)^φc``, ``v = (b / Kᵀ u)^φr`` with ``K = exp(-C/ε)``
  from ``u = 1/n``, ``v = 1/m``, in blocks of 10 iterations, stopping when the mean relative change
  of ``u`` and ``v`` over the last iteration is <= 1e-6 or after 200,000 iterations;
* the plan masked where ``C >= 0.999``; score ``<P, C>``.

movers: ``movers.lazy_emd`` end to end (deduplicated, length-sorted, batched encoding; all pairs
solved together in a few size buckets, log-domain stabilised, float64, accelerated iterations). Both
run in one process on the same pairs after a warm-up (model loading is excluded from both); each
timing is the minimum of ``--repeat`` runs. The table also reports the two phases separately, the
floor (:func:`shared.bench.harness.floor`: the tokenizer and the bare encoder over every token of the unique
texts, batched: what any implementation must at least do), movers' solver with the original's plain iterations
(``solver="sinkhorn-plain"``: what batching alone gives), and the largest score difference between
the two procedures.

    python -m shared.bench speed --metric lazy_emd                 # 200 WMT15/16 pairs, a few minutes on 2 cores
    python -m shared.bench speed --metric lazy_emd --pairs 1000 --data bagel --threads 1
"""
from __future__ import annotations

import argparse
import platform
import time
from typing import Literal

import numpy as np
import torch

from .harness import floor, model_folder, quiet_offline

__all__ = ["main", "original_sinkhorn", "OriginalReenactment"]


def original_sinkhorn(a: np.ndarray, b: np.ndarray, cost: np.ndarray, *, reg: float, reg_c: float, reg_r: float,
                      max_iter: int = 200_000, tol: float = 1e-6) -> tuple[np.ndarray, int, float]:
    """The original's plain-domain unbalanced Sinkhorn (re-enactment; originals.md §5.1).

    Returns ``(plan, iterations, err)``; the plan is ``diag(u) K diag(v)`` before the 0.999 mask.
    ``reg_c``/``reg_r`` may be ``inf`` (exponent 1). Zero masses give ``(0 / x)^φ``: 0 for φ > 0 and
    1 for φ = 0, as numpy computes it.
    """
    kern = np.exp(-cost / reg)
    phi_c = 1.0 if reg_c == float("inf") else reg_c / (reg_c + reg)
    phi_r = 1.0 if reg_r == float("inf") else reg_r / (reg_r + reg)
    u = np.ones(len(a)) / len(a)
    v = np.ones(len(b)) / len(b)
    done, err = 0, 1.0
    with np.errstate(divide="ignore"):
        while err > tol and done < max_iter:
            for _ in range(10):
                u_prev, v_prev = u, v
                u = (a / kern.dot(v)) ** phi_c
                v = (b / kern.T.dot(u)) ** phi_r
            done += 10
            err_u = np.abs(u - u_prev).max() / max(np.abs(u).max(), np.abs(u_prev).max(), 1.0)
            err_v = np.abs(v - v_prev).max() / max(np.abs(v).max(), np.abs(v_prev).max(), 1.0)
            err = 0.5 * (err_u + err_v)
    return u[:, None] * kern * v[None, :], done, err


class OriginalReenactment:
    """One sentence per forward pass, numpy solver per pair (see the module docstring)."""

    def __init__(self, model: str | None = None, layer: int = -1) -> None:
        import transformers

        transformers.utils.logging.disable_progress_bar()

        path = model_folder(model)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, use_fast=False, local_files_only=True)
        self.model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
        self.layer = layer
        self.special = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id}

    @torch.inference_mode()
    def _encode(self, text: str) -> tuple[torch.Tensor, list[int]]:
        ids = self.tokenizer.encode(text, add_special_tokens=True, truncation=True,
                                    max_length=self.tokenizer.model_max_length)
        out = self.model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         output_hidden_states=True)
        vec = out.hidden_states[self.layer][0]
        return vec / vec.norm(dim=-1, keepdim=True), ids

    def _masses(self, ids: list[int]) -> np.ndarray:
        real = np.array([i not in self.special for i in ids])
        w = np.where(real, 1.0 / max(real.sum(), 1), 0.0)
        w[np.flatnonzero(real)[-1]] += 1.0 - w.sum()
        return w

    def score(self, hypothesis: str, reference: str, *, reg: float, reg_c: float, reg_r: float,
              timings: dict[str, float]) -> tuple[float, int]:
        start = time.perf_counter()
        ref_vec, ref_ids = self._encode(reference)
        hyp_vec, hyp_ids = self._encode(hypothesis)
        cost = 1.0 - (hyp_vec @ ref_vec.T).numpy().astype(np.float64)
        mid = time.perf_counter()
        plan, iters, _ = original_sinkhorn(self._masses(hyp_ids), self._masses(ref_ids), cost, reg=reg,
                                           reg_c=reg_c, reg_r=reg_r)
        value = float((plan * (cost < 0.999) * cost).sum())
        end = time.perf_counter()
        timings["encode"] += mid - start
        timings["transport"] += end - mid
        return value, iters


def _pairs(data: str, n: int, seed: int) -> tuple[list[str], list[str]]:
    from .data import load_dataset

    records = load_dataset(data).records
    pick = sorted(np.random.default_rng(seed).choice(len(records), min(n, len(records)), replace=False))
    return [records[i]["hypothesis"] for i in pick], [records[i]["references"][0] for i in pick]


def _movers_phases(preds: list[str], refs: list[str], *, reg: float, reg_c: float, reg_r: float,
                   layer: int, plain: bool = True) -> tuple[dict[str, float], list[float]]:
    """End-to-end time of movers.lazy_emd, and its two phases timed alone on the same inputs:
    ``Encoder.embed`` of all texts, and the batched solver on the resulting cost matrices (also with
    the plain iterations when `plain`)."""
    from movers import Encoder
    from movers import metrics as registry
    from movers.core.histogram import Histogram
    from movers.metrics import lazy_emd as core

    encoder = Encoder(layer=layer)
    start = time.perf_counter()
    out = registry.function("lazy_emd")(preds, refs, reg=reg, reg_candidate=reg_c, reg_reference=reg_r, encoder=encoder)
    total = time.perf_counter() - start
    start = time.perf_counter()
    emb = encoder.embed(preds + refs)
    encode = time.perf_counter() - start
    sides = [Histogram(emb.tokens[k], core.lazy_emd_masses(emb.ids[k], emb.special[k], None), emb.vectors[k])
             for k in range(len(emb))]
    n = len(preds)
    times = {"encode": encode, "total": total}
    solvers: tuple[tuple[str, Literal["sinkhorn", "sinkhorn-plain"]], ...] = (
        ("transport", "sinkhorn"), ("transport-plain", "sinkhorn-plain"))
    for key, solver in solvers[:2 if plain else 1]:
        start = time.perf_counter()  # the formula layer: cost matrices + batched solver + mask
        core.lazy_emd_from_embeddings(list(zip(sides[:n], sides[n:], strict=True)), reg=reg, reg_candidate=reg_c,
                                      reg_reference=reg_r,
                                      solver=solver, device=encoder.device)
        times[key] = time.perf_counter() - start
    return times, out.scores


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench speed --metric lazy_emd",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="wmt15_16_da_seg_toen", help="data set in ../shared/data (first reference)")
    p.add_argument("--pairs", type=int, default=200, help="seeded random sample of pairs (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layer", type=int, default=-1)
    p.add_argument("--reg", type=float, default=0.009)
    p.add_argument("--reg-candidate", type=float, default=0.23)
    p.add_argument("--reg-reference", type=float, default=0.31)
    p.add_argument("--repeat", type=int, default=2, help="runs per procedure; the minimum is reported")
    p.add_argument("--no-plain", action="store_true",
                   help="skip timing movers' solver with the original's plain iterations")
    p.add_argument("--threads", type=int, default=0,
                   help="torch intra-op threads for both procedures (default 0: torch's default). On a CPU "
                        "shared with other jobs, 1 avoids threads waiting for each other")
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    quiet_offline(category=RuntimeWarning)

    preds, refs = _pairs(args.data, args.pairs, args.seed)
    kw = dict(reg=args.reg, reg_c=args.reg_candidate, reg_r=args.reg_reference)
    original = OriginalReenactment(layer=args.layer)
    original.score(preds[0], refs[0], timings={"encode": 0.0, "transport": 0.0}, **kw)  # warm-up
    _movers_phases(preds[:2], refs[:2], layer=args.layer, **kw)  # warm-up (loads the model)

    best_o: dict[str, float] = {}
    best_m: dict[str, float] = {}
    for _ in range(max(1, args.repeat)):
        timings = {"encode": 0.0, "transport": 0.0}
        start = time.perf_counter()
        results = [original.score(h, r, timings=timings, **kw) for h, r in zip(preds, refs, strict=False)]
        timings["total"] = time.perf_counter() - start
        best_o = {k: min(v, best_o.get(k, float("inf"))) for k, v in timings.items()}
        phases, ours = _movers_phases(preds, refs, layer=args.layer, plain=not args.no_plain, **kw)
        phases["floor"] = floor(preds + refs)
        best_m = {k: min(v, best_m.get(k, float("inf"))) for k, v in phases.items()}
    theirs = [s for s, _ in results]
    iters = [i for _, i in results]
    diff = float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs))))

    print(f"## Lazy-EMD speed: {len(preds)} pairs of {args.data} (first reference), eps={args.reg:g}, "
          f"reg_candidate={args.reg_candidate:g}, reg_reference={args.reg_reference:g}\n")
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, CPU; minimum of {args.repeat} runs; model loading excluded.\n")
    print("| phase | original procedure (re-enacted) | movers | speed-up |")
    print("|---|---|---|---|")
    for key, label in (("encode", "encoding"), ("transport", "transport"), ("total", "total")):
        o, m = best_o[key], best_m[key]
        print(f"| {label} | {o:.2f} s | {m:.2f} s | {o / m if m > 0 else float('inf'):.1f}x |")
    if "transport-plain" in best_m:
        o, m = best_o["transport"], best_m["transport-plain"]
        print(f"| transport, plain iterations (solver='sinkhorn-plain') | {o:.2f} s | {m:.2f} s | "
              f"{o / m if m > 0 else float('inf'):.1f}x |")
    o, m = best_o["total"], best_m["floor"]
    print(f"| encoder floor (bare forward, every token of the unique texts) | | {m:.2f} s | "
          f"{o / m if m > 0 else float('inf'):.1f}x (the bound for any implementation whose transport is free) |")
    print(f"\nmovers total / floor = {best_m['total'] / best_m['floor']:.2f}")
    print(f"\nper pair: original {1000 * best_o['total'] / len(preds):.1f} ms, movers "
          f"{1000 * best_m['total'] / len(preds):.1f} ms; solver iterations per pair: median "
          f"{int(np.median(iters))}, max {max(iters)}; max |score difference| = {diff:.1e}")
    print("\nmovers' phases are timed separately on the same inputs (embedding all texts; the batched "
          "solver on the resulting costs); total is the end-to-end call.")
    return 0
