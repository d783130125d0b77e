"""movers bench (correlation statistics and CLI, the MoverScore speed run) and the demo command."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from movers.bench.correlation import _parse_metric, correlations
from movers.bench.data import load_dataset
from movers.cli import main

from .conftest import data_path


def test_correlations_agree_with_direct_formulas():
    rng = np.random.default_rng(0)
    human = rng.normal(size=200)
    metric = human + rng.normal(scale=0.8, size=200)
    got = correlations(metric, human, n_boot=200)
    assert got["pearson"][0] == pytest.approx(np.corrcoef(metric, human)[0, 1], abs=1e-12)
    assert got["spearman"][0] == pytest.approx(np.corrcoef(stats.rankdata(metric), stats.rankdata(human))[0, 1],
                                               abs=1e-12)
    for key, (value, low, high) in got.items():
        assert low <= value <= high, key
    perfect = correlations(np.arange(50.0), np.arange(50.0) ** 3, n_boot=50)
    assert perfect["spearman"][0] == pytest.approx(1.0) and perfect["kendall"][0] == pytest.approx(1.0)


def test_group_by_averages_per_group_values():
    rng = np.random.default_rng(1)
    h = rng.normal(size=120)
    m = np.concatenate([h[:60] + rng.normal(size=60), -h[60:]])
    groups = ["a"] * 60 + ["b"] * 60
    got = correlations(m, h, groups, n_boot=50)
    expected = (np.corrcoef(m[:60], h[:60])[0, 1] + np.corrcoef(m[60:], h[60:])[0, 1]) / 2
    assert got["pearson"][0] == pytest.approx(expected, abs=1e-12)


def test_metric_specs_parse():
    assert _parse_metric("moverscore") == ("moverscore", "moverscore", {})
    assert _parse_metric('moverscore={"idf": true}') == ('moverscore {"idf":true}', "moverscore", {"idf": True})
    assert _parse_metric('SMS:sms={"variant": "wms"}') == ("SMS", "sms", {"variant": "wms"})


def test_unknown_data_set_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="data set 'nope' not found"):
        load_dataset("nope", root=tmp_path)


def test_correlation_cli_writes_table_png_and_json(tmp_path, capsys):
    data_path("bagel")
    assert main(["bench", "correlation", "--data", "bagel", "--metric", "sentbleu", "--metric",
                 'moverscore={"preset": "1.0.3"}', "--limit", "40", "--bootstrap", "50",
                 "--criterion", "quality", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| sentbleu |" in out and '| moverscore {"preset":"1.0.3"} |' in out
    assert (tmp_path / "correlation_bagel_quality.png").stat().st_size > 1000
    saved = json.loads((tmp_path / "correlation_bagel.json").read_text())
    assert saved["n"] == 40 and len(saved["scores"]["sentbleu"]) == 40


def test_validation_sets_are_flagged(tmp_path, capsys):
    data_path("stsb")
    main(["bench", "correlation", "--data", "stsb:test", "--metric", "sentbleu", "--limit", "20",
          "--bootstrap", "20", "--out", str(tmp_path)])
    assert "VALIDATION set" in capsys.readouterr().out


@pytest.mark.slow
def test_speed_benchmark_runs_side_by_side(tmp_path, capsys):
    data_path("wmt15_16_da_seg_toen")
    assert main(["bench", "speed", "--metric", "moverscore", "--refs", "6", "--systems", "2",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for needle in ("floor (encoder forward", "original moverscore 1.0.3", "bert-score 0.3.13",
                   "movers / floor time", "movers throughput / original"):
        assert needle in out
    saved = json.loads((tmp_path / "speed_moverscore.json").read_text())
    assert saved["pairs"] == 12 and saved["max_diff"] <= 1e-4  # movers agrees with the original


def test_demo_prints_scores_and_signature(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "moverscore = 0.6210" in out  # = the GitHub original's corpus_score example (0.62097)
    assert "MoverScore|preset:github|" in out
