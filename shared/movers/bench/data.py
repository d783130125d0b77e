"""Human-judgment data sets of ../shared/data for the correlation benchmark.

Each set is JSONL with `id`, `hypothesis`, `references` (list), `human` (float, or a dict of criteria).
The development/validation split follows ../shared/README.md: validation sets are for final numbers
only, never for choosing defaults (the harness prints a reminder).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Dataset", "load_dataset", "data_root", "DEVELOPMENT", "VALIDATION"]

DEVELOPMENT = {"bagel", "sfhotel", "sfres", "stsb:train", "stsb:dev", "wmt15_16_da_seg_toen", "summeval",
               "dailydialog_multiref", "usr_personachat", "newsroom_human"}
VALIDATION = {"wmt17_da_seg_toen", "sts12_16", "stsb:test", "realsumm", "webnlg2020_human"}


@dataclass(frozen=True)
class Dataset:
    name: str
    records: list[dict]
    criteria: list[str]  # human score keys ("human" when a single float)

    def human(self, criterion: str) -> list[float]:
        if criterion == "human":
            return [float(r["human"]) for r in self.records]
        return [float(r["human"][criterion]) for r in self.records]


def data_root() -> Path:
    """$MOVERS_DATA, else ../shared/data beside the repository (source checkout) or the CWD."""
    env = os.environ.get("MOVERS_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for base in (here.parents[3], Path.cwd()):
        candidate = base.parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return Path.cwd().parent / "shared" / "data"


def load_dataset(spec: str, *, root: Path | None = None) -> Dataset:
    """Load ``name`` or ``name:split`` (e.g. ``stsb:dev``) from the data root."""
    root = root or data_root()
    name, _, split = spec.partition(":")
    folder = root / name
    if not folder.is_dir():
        raise FileNotFoundError(f"correlation: data set {name!r} not found under {root} "
                                f"(set $MOVERS_DATA to the folder holding the data sets, or keep ../shared/data beside the checkout).")
    files = sorted(p for p in folder.glob("*.jsonl") if not p.name.endswith("_docs.jsonl"))
    if split:
        files = [p for p in files if p.stem.endswith(split)]
    if len(files) != 1:
        raise ValueError(f"correlation: `--data {spec}` matches {[p.name for p in files]}; name one split, "
                         f"e.g. {name}:{files[0].stem.rsplit('_', 1)[-1] if files else 'dev'}.")
    records = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]
    first = records[0]["human"]
    criteria = sorted(first) if isinstance(first, dict) else ["human"]
    return Dataset(name=spec, records=records, criteria=criteria)
