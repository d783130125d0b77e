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
    # Default preset 1.0.3 (1 - d): each value is 2 - 1/s of the github preset's s (d = 1/s - 1), and the
    # github values average to the GitHub original's corpus_score example (0.62097).
    assert "moverscore = 0.3284" in out and "-0.1531  'He went" in out
    assert "MoverScore|preset:1.0.3|" in out
    import movers
    from movers.cli import DEMO_PAIRS
    github = movers.moverscore([p for p, _ in DEMO_PAIRS], [r for _, r in DEMO_PAIRS], preset="github").scores
    assert np.mean(github) == pytest.approx(0.62097, abs=5e-5)
    default = movers.moverscore([p for p, _ in DEMO_PAIRS], [r for _, r in DEMO_PAIRS]).scores
    assert default == pytest.approx([2 - 1 / s for s in github], abs=1e-12)
    assert default == pytest.approx([0.599499, 0.538932, -0.15309], abs=1e-4)  # PyPI 1.0.3, originals.md §8.3


def test_demo_command_starts_with_its_scores(tmp_path):
    """The README's first command: its first line is a score, with no evaluate message that reads as a failure
    ("... couldn't be found ... on the Hugging Face Hub"), in a fresh HF_HOME."""
    import os
    import subprocess
    import sys

    from .test_cli import _PATH

    env = {**os.environ, **_PATH, "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_EVALUATE_OFFLINE", None)
    env.pop("MOVERS_NO_AUTOREGISTER", None)
    proc = subprocess.run([sys.executable, "-m", "movers", "demo"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("0.5995  'The cat sat on the mat.'")
    assert "Hugging Face Hub" not in proc.stderr and "couldn't be found" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------- preprocessing as the papers'

def test_wmt17_is_detokenized_and_unescaped_as_run_mt():
    data_path("wmt17_da_seg_toen")
    pytest.importorskip("sacremoses")
    stored = load_dataset("wmt17_da_seg_toen", preprocess="none")
    paper = load_dataset("wmt17_da_seg_toen")
    assert stored.preprocessing == "none" and paper.preprocessing.startswith("moses-detok-en(sacremoses ")
    by_id = {r["id"]: r for r in paper.records}
    # A stored (tokenized, escaped) line with its detokenized form written out by hand.
    raw = next(r for r in stored.records if "&apos;" in r["hypothesis"] and " , " in r["hypothesis"])
    done = by_id[raw["id"]]["hypothesis"]
    assert "&apos;" not in done and " ," not in done and "'" in done
    assert done.replace(" ", "") == (raw["hypothesis"].replace("&apos;", "'").replace("&quot;", '"')
                                     .replace("&amp;", "&").replace(" ", ""))  # only spaces/escapes move
    assert not any("&apos;" in x or "&quot;" in x for r in paper.records for x in [r["hypothesis"], *r["references"]])


def test_detokenize_rules():
    pytest.importorskip("sacremoses")
    from movers.bench.data import detokenize

    texts, label = detokenize(["he said &quot; it &apos;s fine &quot; , didn &apos;t he ?", "a ( b ) c ."])
    assert texts == ['he said "it\'s fine", didn\'t he?', "a (b) c."]  # Moses English rules, by hand
    assert "sacremoses" in label


def test_preprocess_option_is_checked():
    with pytest.raises(ValueError, match="`preprocess` must be 'paper' or 'none'"):
        load_dataset("wmt17_da_seg_toen", preprocess="moses")


@pytest.mark.slow
def test_sentbleu_reproduces_the_wmt17_readme_sanity_figures(tmp_path, capsys):
    """../shared/data/wmt17_da_seg_toen/README.md: sacreBLEU sentence-BLEU on Moses-detokenized text gives
    Pearson r cs .431, de .430, fi .578, lv .395, ru .478, tr .548, zh .508, avg .481 (issue 14: ± .002)."""
    data_path("wmt17_da_seg_toen")
    pytest.importorskip("sacremoses")
    assert main(["bench", "correlation", "--data", "wmt17_da_seg_toen", "--group-by", "lp", "--metric", "sentbleu",
                 "--bootstrap", "100", "--out", str(tmp_path)]) == 0
    assert "preprocessing: moses-detok-en(sacremoses" in capsys.readouterr().out
    saved = json.loads((tmp_path / "correlation_wmt17_da_seg_toen.json").read_text())
    assert saved["preprocessing"].startswith("moses-detok-en")
    readme = {"cs-en": .431, "de-en": .430, "fi-en": .578, "lv-en": .395, "ru-en": .478, "tr-en": .548,
              "zh-en": .508}
    got = saved["per_group_pearson"]["human"]["sentbleu"]
    for lp, value in readme.items():
        assert got[lp] == pytest.approx(value, abs=0.002), lp
    assert saved["correlations"]["human"]["sentbleu"]["pearson"][0] == pytest.approx(0.481, abs=0.002)


@pytest.mark.parametrize("name, criterion, lowercase, expected", [
    # The READMEs' sentence-BLEU sanity figures (Spearman ρ; BAGEL/SF* lowercase inside BLEU).
    ("bagel", "informativeness", True, .162), ("bagel", "naturalness", True, .153), ("bagel", "quality", True, .118),
    ("sfhotel", "informativeness", True, .085), ("sfhotel", "naturalness", True, .142),
    ("sfhotel", "quality", True, .060), ("sfres", "informativeness", True, .114),
    ("sfres", "naturalness", True, .158), ("sfres", "quality", True, .114),
    ("dailydialog_multiref", "human", False, .257),
])
def test_sentbleu_reproduces_the_other_readme_sanity_figures(name, criterion, lowercase, expected):
    data_path(name)
    from movers.bench.correlation import score_metric

    data = load_dataset(name)
    assert data.preprocessing == "none"  # these READMEs name no scoring-time step
    bleu = score_metric("sentbleu", [r["hypothesis"] for r in data.records],
                        [r["references"] for r in data.records], {"lowercase": lowercase})
    assert stats.spearmanr(bleu, data.human(criterion))[0] == pytest.approx(expected, abs=0.0015)


# ---------------------------------------------------------------- development / validation suite

def test_paired_bootstrap_point_values_and_pairing():
    from movers.bench.suite import paired_bootstrap

    rng = np.random.default_rng(2)
    h1, h2 = rng.normal(size=150), rng.normal(size=150)
    m = h1 + h2 + rng.normal(size=150)
    groups = ["a"] * 70 + ["b"] * 80
    value, dist = paired_bootstrap(m, [h1, h2], groups, "pearson", n_boot=300)
    by_hand = np.mean([np.corrcoef(m[s], h[s])[0, 1] for s in (slice(0, 70), slice(70, None)) for h in (h1, h2)])
    assert value == pytest.approx(by_hand, abs=1e-12) and dist.shape == (300,)
    value_s, _ = paired_bootstrap(m, [h1], None, "spearman", n_boot=10)
    assert value_s == pytest.approx(stats.spearmanr(m, h1)[0], abs=1e-12)
    # The same items get the same resamples: a monotone rescaling leaves Spearman's paired difference at 0.
    _, d1 = paired_bootstrap(m, [h1], groups, "spearman", n_boot=200, seed=5)
    _, d2 = paired_bootstrap(np.exp(m), [h1], groups, "spearman", n_boot=200, seed=5)
    assert np.allclose(d1, d2)


def test_suite_cli_tables_and_cache(tmp_path, capsys):
    data_path("bagel")
    args = ["bench", "suite", "--set", "bagel", "--metric", "sentbleu", "--metric", 'sentbleu={"lowercase": true}',
            "--bootstrap", "100", "--out", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| sentbleu | 0.144 [" in out  # mean Spearman over the 3 criteria: (.162 + .154 + .117) / 3
    assert 'Difference to `sentbleu`' in out
    saved = json.loads((tmp_path / "suite_dev.json").read_text())
    assert saved["sets"]["bagel"]["n"] == 404 and len(list((tmp_path / "scores").glob("bagel_*.json"))) == 2
    assert main(args) == 0 and capsys.readouterr().out.count("(cached)") == 2
