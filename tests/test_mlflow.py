"""movers.integrations.harnesses.mlflow in real ``mlflow.models.evaluate`` runs (offline: a sqlite tracking store shared by
this file's tests, one run each, telemetry off by tests/conftest.py).

``result.metrics`` holds the corpus score, equal to a direct ``movers.<slug>`` call on the same columns, the eval
table the per-row scores of that call, the run the signature; TWMD's and per-call IDF's corpus scores differ
from the mean of rows scored alone. Empty generations: the worst value and one warning, although MLflow probes
the metric on the first row first.
"""
from __future__ import annotations

import warnings

import mlflow  # in the test extra: a missing harness fails here, it is not skipped
import numpy as np
import pandas as pd
import pytest

import movers
import movers.integrations.harnesses.mlflow as integration
from movers.core.result import REGROUPING_ATOL

ATOL = REGROUPING_ATOL  # the harness's in-memory cache holds vectors of earlier calls: other batches
PREDICTIONS = ["The cat sat on the mat.", "A dog barked loudly at the postman.", "",
               "My friend came home late.", "The train left the station."]
REFERENCES = ["A cat was sitting on the mat.", "The dog was barking at the mailman.", "The weather is nice today.",
              "My friend returned late.", "The train departed from the station early."]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """One sqlite tracking store for the file's runs (a new store migrates its schema: a second per test); each test
    reads back its own run."""
    return tmp_path_factory.mktemp("mlflow") / "mlflow.db"


@pytest.fixture()
def store(database, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mlflow.set_tracking_uri(f"sqlite:///{database}")
    yield tmp_path
    mlflow.set_tracking_uri(None)


def _evaluate(data, metrics, **kwargs):
    return mlflow.models.evaluate(data=data, predictions="prediction", targets="reference", extra_metrics=metrics,
                                  model_type=None, **kwargs)


@pytest.mark.slow
def test_evaluate_reports_the_corpus_score_per_row_scores_and_the_signature(store):
    data = pd.DataFrame({"prediction": PREDICTIONS, "reference": REFERENCES})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _evaluate(data, [integration.metric("twmd"), integration.metric("moverscore", idf=True)])
    twmd, moverscore = movers.twmd(PREDICTIONS, REFERENCES), movers.moverscore(PREDICTIONS, REFERENCES, idf=True)
    assert result.metrics["twmd"] == pytest.approx(twmd.score, abs=ATOL)
    assert result.metrics["moverscore"] == pytest.approx(moverscore.score, abs=ATOL)
    table = result.tables["eval_results_table"]
    np.testing.assert_allclose(table["twmd/score"], twmd.scores, atol=ATOL, rtol=0)
    np.testing.assert_allclose(table["moverscore/score"], moverscore.scores, atol=ATOL, rtol=0)
    assert table["twmd/score"][2] == -1.0  # the empty generation: the worst value
    tags = mlflow.get_run(result.run_id).data.tags
    assert tags["movers.twmd.signature"] == str(twmd.signature)
    assert tags["movers.moverscore.signature"] == str(moverscore.signature)
    # the corpus score, not a mean of rows scored alone
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = [movers.twmd([p], [r]).score for p, r in zip(PREDICTIONS, REFERENCES, strict=True)]
    assert abs(twmd.score - float(np.mean(alone))) > 1e-3
    empty = [str(w.message) for w in caught if "are empty" in str(w.message)]
    assert sorted(m.split(":")[0] for m in empty) == ["moverscore", "twmd"], empty  # one each


@pytest.mark.slow
def test_an_empty_first_row_is_warned_about_once(store):
    """MLflow scores the first row alone before the whole set: that probe's warning is held back."""
    preds, refs = ["", *PREDICTIONS[:2]], ["Nothing.", *REFERENCES[:2]]
    for data in (pd.DataFrame({"prediction": preds, "reference": refs}),
                 pd.DataFrame({"prediction": preds[:1], "reference": refs[:1]})):  # a one-row set
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = _evaluate(data, [integration.metric("sms")])
        assert [str(w.message) for w in caught if "are empty" in str(w.message)] == [
            "sms: predictions [0] are empty; scored as the metric's worst value (empty_predictions='worst'; 'error' "
            "rejects them)."]
        assert result.tables["eval_results_table"]["sms/score"][0] == 0.0


@pytest.mark.slow
def test_several_references_and_reference_weights_come_from_columns(store):
    refs = [["A cat was sitting on the mat.", "The cat sat."], ["The dog was barking."], ["It is nice today."]]
    weights = [[0.9, -0.4], [1.0], [0.5]]
    data = pd.DataFrame({"prediction": ["The cat sat on the mat.", "A dog barked.", "It is nice."],
                         "reference": refs, "reference_weights": weights})
    result = _evaluate(data, [integration.metric("delta_bleu"), integration.metric("moverscore", name="ms")])
    direct = movers.delta_bleu(list(data.prediction), refs, reference_weights=weights)
    assert result.metrics["delta_bleu"] == pytest.approx(direct.score, abs=1e-9)  # counts: exact
    # ΔBLEU's corpus score comes from the summed n-gram counts, not from the rows' own scores
    segments = result.tables["eval_results_table"]["delta_bleu/score"]
    np.testing.assert_allclose(segments, direct.scores, atol=1e-9, rtol=0)
    assert abs(direct.score - float(np.mean(segments))) > 1.0
    assert result.metrics["ms"] == pytest.approx(movers.moverscore(list(data.prediction), refs).score, abs=ATOL)
    assert "movers.ms.signature" in mlflow.get_run(result.run_id).data.tags


@pytest.mark.slow
def test_single_references_beside_several_as_tuples(store):
    """A targets column that mixes single reference strings with lists fails inside MLflow (it hashes the column
    and a list is unhashable) before any metric runs; tuples for the rows with several references work, as the
    module docs say, and score as lists would."""
    preds = ["The cat sat on the mat.", "A dog barked loudly.", "It rained."]
    mixed = ["A cat was sitting on the mat.", ("The dog was barking.", "A dog barked."), "Rain fell."]
    result = _evaluate(pd.DataFrame({"prediction": preds, "reference": mixed}), [integration.metric("twmd")])
    want = movers.twmd(preds, [r if isinstance(r, str) else list(r) for r in mixed])
    assert result.metrics["twmd"] == pytest.approx(want.score, abs=ATOL)
    with pytest.raises(TypeError, match="unhashable type: 'list'"):  # MLflow's own failure, documented
        _evaluate(pd.DataFrame({"prediction": preds, "reference": [mixed[0], list(mixed[1]), mixed[2]]}),
                  [integration.metric("twmd")])
    mlflow.end_run()  # the failed evaluation may leave its run open


@pytest.mark.slow
@pytest.mark.parametrize("form", [tuple, np.array], ids=["tuples", "arrays"])
@pytest.mark.parametrize("slug", ["sms", "delta_bleu"])
def test_mixed_targets_are_each_rows_references(store, slug, form):
    """Single reference strings beside rows of several references (tuples, or NumPy arrays as a Parquet file or
    Spark's toPandas gives them) reach the metric and score as one direct call on the rows' lists would
    (ΔBLEU's weights: a list in every row, one weight per reference). The middle row has 2 references and the
    others 1: the signature says nrefs:var (a row read as one reference would give nrefs:1). Python lists
    beside strings fail in MLflow's hash of the data set, before any metric runs (the test above)."""
    preds = ["The cat sat on the mat.", "A dog barked loudly.", "It rained all day."]
    refs = [["A cat was sitting on the mat."], ["The dog was barking.", "A dog barked."], ["Rain fell all day."]]
    weights = [[0.8], [0.9, -0.4], [1.0]]
    data = pd.DataFrame({"prediction": preds, "reference": [refs[0][0], form(refs[1]), refs[2][0]]})
    extra = {}
    if slug == "delta_bleu":
        data["reference_weights"] = weights
        extra = {"reference_weights": weights}
    result = _evaluate(data, [integration.metric(slug)])
    want = getattr(movers, slug)(preds, refs, **extra)
    assert result.metrics[slug] == pytest.approx(want.score, abs=ATOL)
    np.testing.assert_allclose(result.tables["eval_results_table"][f"{slug}/score"], want.scores, atol=ATOL, rtol=0)
    tag = mlflow.get_run(result.run_id).data.tags[f"movers.{slug}.signature"]
    assert tag == str(want.signature) and "|nrefs:var|" in tag


def test_options_are_checked_when_the_metric_is_made():
    with pytest.raises(TypeError, match=r"twmd\(\) got an unexpected keyword argument 'idf'"):
        integration.metric("twmd", idf=True)
    with pytest.raises(ValueError, match=r"moverscore: `n_gram` must be"):
        integration.metric("moverscore", n_gram=0)
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        integration.metric("bleu")
    made = integration.metric("lazy_emd")
    assert (made.name, made.greater_is_better) == ("lazy_emd", False)  # a distance


@pytest.mark.slow
def test_bad_input_stops_the_evaluation_with_movers_error(store):
    data = pd.DataFrame({"prediction": ["The cat sat.", None], "reference": ["A cat sat.", "A dog."]})
    with pytest.raises(TypeError, match=r"twmd: `predictions\[1\]` must be a string, got float nan"):
        _evaluate(data, [integration.metric("twmd")])
    # a bad first row fails MLflow's probe, which wraps every exception: movers' message is quoted
    with pytest.raises(mlflow.exceptions.MlflowException, match=r"twmd: `predictions\[0\]` must be a string"):
        _evaluate(data.iloc[::-1].reset_index(drop=True), [integration.metric("twmd")])


def test_a_numeric_column_gets_movers_error_not_a_pandas_one():
    with pytest.raises(TypeError, match=r"twmd: `predictions\[0\]` must be a string, got float 1.5"):
        integration.metric("twmd").eval_fn(pd.Series([1.5, 2.0]), pd.Series(["A cat.", "A dog."]))
