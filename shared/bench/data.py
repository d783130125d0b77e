"""Human-judgment data sets of ../shared/data (or $MOVERS_DATA) for the studies.

Each set is JSONL with `id`, `hypothesis`, `references` (list), `human` (float, or a dict of criteria).
The development/validation split follows ../shared/README.md: validation sets are for final numbers
only, never for choosing defaults (the harness prints a reminder).

Preprocessing as the papers': a set whose README names a step that the published figures ran before
scoring gets that step by default (``preprocess="paper"``; ``"none"`` scores the text as stored). Only
``wmt17_da_seg_toen`` names one: its text is lowercased, Moses-tokenized and Moses-escaped (``&apos;``,
``&quot;``, ...), and MoverScore's ``run_MT.py`` runs the Moses English detokenizer over hypotheses and
references (``MosesDetokenizer('en')`` of the ``mosestokenizer`` wrapper around ``detokenizer.perl``,
which also unescapes the XML entities); here sacremoses' port of the same rules does it. The other READMEs
state how the text was normalised when packaged but name no scoring-time step: BAGEL/SFHOTEL/SFRES's
sentence-BLEU sanity figures lowercase inside BLEU (``sentbleu={"lowercase": true}``), which is a metric
option, not a data step, and WMT15/16 is stored detokenized already.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from . import CHECKOUT

__all__ = ["Dataset", "load_dataset", "data_root", "detokenize", "DEVELOPMENT", "VALIDATION", "PREPROCESSING",
           "INPUT_FIELDS"]

DEVELOPMENT = {"bagel", "sfhotel", "sfres", "stsb:train", "stsb:dev", "wmt15_16_da_seg_toen", "summeval",
               "dailydialog_multiref", "usr_personachat", "newsroom_human"}
VALIDATION = {"wmt17_da_seg_toen", "sts12_16", "stsb:test", "realsumm", "webnlg2020_human"}


PREPROCESSING: dict[str, str] = {"wmt17_da_seg_toen": "moses-detok-en"}
"""set -> the step its README names (applied to `hypothesis` and every `references` entry)."""

INPUT_FIELDS: dict[str, str] = {
    "realsumm": "doc_id", "summeval": "doc_id", "newsroom_human": "doc_id", "webnlg2020_human": "sample_id",
    "dailydialog_multiref": "context_id", "usr_personachat": "context_idx", "wmt17_da_seg_toen": "lp,sid",
    "bagel": "mr", "sfhotel": "mr", "sfres": "mr"}
"""set -> the record field(s) naming the input an output was made from (document, source item, dialogue
context, meaning representation): the unit of the system and summary levels (their READMEs list the fields)."""


@dataclass(frozen=True)
class Dataset:
    name: str
    records: list[dict]
    criteria: list[str]  # human score keys ("human" when a single float)
    preprocessing: str = "none"  # what was applied to the stored text, with the library version

    def human(self, criterion: str) -> list[float]:
        """Each record's human score for `criterion`; NaN where the record has none (WebNLG 2020 has one
        such record: no worker rated it), which the correlations skip and count."""
        values = [r["human"] if criterion == "human" else r["human"][criterion] for r in self.records]
        return [math.nan if v is None else float(v) for v in values]


def data_root() -> Path:
    """$MOVERS_DATA, else ../shared/data beside the checkout (the folder holding this repository)."""
    env = os.environ.get("MOVERS_DATA")
    return Path(env) if env else CHECKOUT.parent / "shared" / "data"


def detokenize(texts: list[str]) -> tuple[list[str], str]:
    """Moses English detokenization with XML unescaping, as ``run_MT.py`` (split on single spaces).

    Returns the texts and a label naming the library and version, for the bench output.
    """
    try:
        import sacremoses
        from sacremoses import MosesDetokenizer
    except ImportError as err:  # a bench extra, not a runtime dependency of the metrics
        raise ImportError("correlation: the wmt17_da_seg_toen set is detokenized as MoverScore's run_MT.py does, "
                          "which needs sacremoses (pip install 'movers[bench]' or sacremoses); "
                          "or pass --preprocess none to score the stored tokenized text.") from err
    detok = MosesDetokenizer(lang="en")
    out = [detok.detokenize(t.split(" "), unescape=True) for t in texts]
    return out, f"moses-detok-en(sacremoses {sacremoses.__version__}, unescape)"


def _preprocess(records: list[dict], step: str) -> tuple[list[dict], str]:
    if step != "moses-detok-en":
        raise ValueError(f"correlation: unknown preprocessing step {step!r}")
    # One call over every distinct string (references repeat across systems).
    texts = sorted({r["hypothesis"] for r in records} | {x for r in records for x in r["references"]})
    done, label = detokenize(texts)
    table = dict(zip(texts, done, strict=False))
    return [{**r, "hypothesis": table[r["hypothesis"]], "references": [table[x] for x in r["references"]]}
            for r in records], label


def load_dataset(spec: str, *, root: Path | None = None, preprocess: str = "paper") -> Dataset:
    """Load ``name`` or ``name:split`` (e.g. ``stsb:dev``) from the data root.

    ``preprocess="paper"`` applies the step the set's README names (see :data:`PREPROCESSING`);
    ``"none"`` keeps the stored text. ``Dataset.preprocessing`` records what was done.
    """
    if preprocess not in ("paper", "none"):
        raise ValueError(f"correlation: `preprocess` must be 'paper' or 'none', got {preprocess!r}")
    root = root or data_root()
    name, _, split = spec.partition(":")
    folder = root / name
    if not folder.is_dir():
        raise FileNotFoundError(f"correlation: data set {name!r} not found under {root} "
                                f"(set $MOVERS_DATA to the folder holding the data sets, or keep ../shared/data beside "
                                f"the checkout).")
    files = sorted(p for p in folder.glob("*.jsonl") if not p.name.endswith("_docs.jsonl"))
    if split:
        files = [p for p in files if p.stem.endswith(split)]
    if len(files) != 1:
        raise ValueError(f"correlation: `--data {spec}` matches {[p.name for p in files]}; name one split, "
                         f"e.g. {name}:{files[0].stem.rsplit('_', 1)[-1] if files else 'dev'}.")
    records = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]
    first = records[0]["human"]
    criteria = sorted(first) if isinstance(first, dict) else ["human"]
    label = "none"
    if preprocess == "paper" and name in PREPROCESSING:
        records, label = _preprocess(records, PREPROCESSING[name])
    return Dataset(name=spec, records=records, criteria=criteria, preprocessing=label)
