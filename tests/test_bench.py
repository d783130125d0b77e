"""The studies (shared.bench: the correlation study, the suite, validation, systems, the MoverScore speed run) and
the demo command."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from movers.cli import main
from shared.bench.__main__ import main as bench
from shared.bench.correlation import parse_metric
from shared.bench.data import load_dataset

from .helpers import data_path, real_pairs


def test_metric_specs_parse():
    assert parse_metric("moverscore") == ("moverscore", "moverscore", {})
    assert parse_metric('moverscore={"idf": true}') == ('moverscore {"idf":true}', "moverscore", {"idf": True})
    assert parse_metric('SMS:sms={"variant": "wms"}') == ("SMS", "sms", {"variant": "wms"})


def test_unknown_data_set_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="data set 'nope' not found"):
        load_dataset("nope", root=tmp_path)


def test_correlation_cli_writes_table_png_and_json(tmp_path, capsys):
    data_path("bagel")
    assert bench(["correlation", "--data", "bagel", "--metric", "sentbleu", "--metric",
                 'moverscore={"preset": "1.0.3"}', "--limit", "40", "--bootstrap", "50",
                 "--criterion", "quality", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| sentbleu |" in out and '| moverscore {"preset":"1.0.3"} |' in out
    assert (tmp_path / "correlation_bagel_quality.png").stat().st_size > 1000
    saved = json.loads((tmp_path / "correlation_bagel.json").read_text())
    assert saved["n"] == 40 and len(saved["scores"]["sentbleu"]) == 40
    # the scored records it writes give the same figures under movers correlate, from the file alone
    import movers

    again = movers.correlate(tmp_path / "correlation_bagel.jsonl", "column:sentbleu", human="human.quality",
                             resamples=50).to_dict()["metrics"]["column:sentbleu"]
    for s in ("pearson", "spearman", "kendall"):
        value, low, high = saved["correlations"]["quality"]["sentbleu"][s]
        assert again[s] == {"value": value, "ci": [low, high]} and value > 0


def test_the_study_command_lists_every_study_once(capsys):
    """`python -m shared.bench` at the checkout's root: each study once, with the first line of its module's
    docstring, as docs/development.md's table lists them; an unknown study is an error that lists them."""
    import subprocess
    import sys

    from shared.bench.__main__ import STUDIES

    from .helpers import REPO

    proc = subprocess.run([sys.executable, "-m", "shared.bench", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines()[2:]]
    assert listed == list(STUDIES) == ["correlation", "correlate-scale", "suite", "validation", "long-texts", "speed",
                                       "cold-start", "gpu", "scale", "systems", "ray", "baselines", "docs", "cards"]
    assert "usage: python -m shared.bench STUDY [options]" in proc.stdout
    section = (REPO / "docs" / "development.md").read_text(encoding="utf-8").split("## Running the studies\n")[1]
    assert re.findall(r"^\| `([a-z-]+)` \|", section.split("\n## ")[0], re.M) == list(STUDIES)  # its table
    assert bench(["nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m shared.bench: error: unknown study 'nope'") and "  speed " in err


def test_baselines_command_writes_the_shipped_format(tmp_path, capsys, monkeypatch):
    """`baselines` on 8 pairs of 6 fixture references: one entry per rescalable metric, with the shipped file's
    fields; each baseline is the mean of the pairs' scores."""
    import movers

    hyps, refs = real_pairs("wmt15_16", 6)
    folder = tmp_path / "wmt15_16_da_seg_toen"
    folder.mkdir()
    (folder / "wmt15_16_da_seg_toen.jsonl").write_text("".join(
        json.dumps({"id": str(i), "hypothesis": h, "references": [r], "human": 0.0}) + "\n"
        for i, (h, r) in enumerate(zip(hyps, refs, strict=True))), encoding="utf-8")
    monkeypatch.setenv("MOVERS_DATA", str(tmp_path))
    assert bench(["baselines", "--pairs", "8", "--out", str(tmp_path / "b.json")]) == 0
    saved = json.loads((tmp_path / "b.json").read_text())
    shipped = json.loads((Path(movers.__file__).parent / "data" / "baselines.json").read_text())
    assert set(saved["baselines"]) == {s.slug for s in movers.metrics.specs() if s.rescalable}
    for entry in saved["baselines"].values():
        assert set(entry) == set(shipped["baselines"]["moverscore"]) and entry["pairs"] == 8
        assert entry["corpus"] == "wmt15_16_da_seg_toen: unique first references (6)"
    assert "python -m shared.bench baselines" in saved["about"]
    assert len(capsys.readouterr().err.strip().splitlines()) == len(saved["baselines"])


def test_validation_command_renders_the_saved_figures(capsys):
    """`validation --render DIR` (without --write) prints each block the cards and the validation page hold."""
    from shared.bench.validation import PAGE

    from .helpers import REPO

    assert bench(["validation", "--render", str(REPO / "cards" / "validation"), "--repo", str(REPO)]) == 0
    out = capsys.readouterr().out
    assert f"## {REPO / PAGE} (summary)" in out and f"## {REPO / 'cards' / 'moverscore.md'}" in out


def test_a_study_without_its_data_names_movers_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MOVERS_DATA", str(tmp_path / "nowhere"))
    assert bench(["correlation", "--data", "bagel", "--metric", "sentbleu", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith("python -m shared.bench correlation: error: ")
    assert "$MOVERS_DATA" in lines[0] and str(tmp_path / "nowhere") in lines[0]


def test_validation_sets_are_flagged(tmp_path, capsys):
    data_path("stsb")
    bench(["correlation", "--data", "stsb:test", "--metric", "sentbleu", "--limit", "20",
          "--bootstrap", "20", "--out", str(tmp_path)])
    assert "VALIDATION set" in capsys.readouterr().out


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


@pytest.mark.system
def test_demo_command_starts_with_its_scores(tmp_path):
    """The README's first command: its first line is a score, with no evaluate message that reads as a failure
    ("... couldn't be found ... on the Hugging Face Hub"), in a fresh HF_HOME. A fresh process in a fresh Hugging
    Face home: a system test; a plain run compares the demo's output with docs/getting-started.md's
    (tests/test_docs.py)."""
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
    from shared.bench.data import detokenize

    texts, label = detokenize(["he said &quot; it &apos;s fine &quot; , didn &apos;t he ?", "a ( b ) c ."])
    assert texts == ['he said "it\'s fine", didn\'t he?', "a (b) c."]  # Moses English rules, by hand
    assert "sacremoses" in label


def test_preprocess_option_is_checked():
    with pytest.raises(ValueError, match="`preprocess` must be 'paper' or 'none'"):
        load_dataset("wmt17_da_seg_toen", preprocess="moses")


@pytest.mark.slow
def test_sentbleu_reproduces_the_wmt17_readme_sanity_figures(tmp_path, capsys):
    """../shared/data/wmt17_da_seg_toen/README.md: sacreBLEU sentence-BLEU on Moses-detokenized text gives
    Pearson r cs .431, de .430, fi .578, lv .395, ru .478, tr .548, zh .508, avg .481 (± .002)."""
    data_path("wmt17_da_seg_toen")
    pytest.importorskip("sacremoses")
    assert bench(["correlation", "--data", "wmt17_da_seg_toen", "--group-by", "lp", "--metric", "sentbleu",
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
    from shared.bench.correlation import score_metric

    data = load_dataset(name)
    assert data.preprocessing == "none"  # these READMEs name no scoring-time step
    bleu = score_metric("sentbleu", [r["hypothesis"] for r in data.records],
                        [r["references"] for r in data.records], {"lowercase": lowercase})
    assert stats.spearmanr(bleu, data.human(criterion))[0] == pytest.approx(expected, abs=0.0015)


# ---------------------------------------------------------------- development / validation suite

def _texts(n, **fields):
    """`n` records with texts (what movers.correlate reads) and per-record fields from lists."""
    return [{"hypothesis": f"output {i}", "references": [f"reference {i}"], **{k: v[i] for k, v in fields.items()}}
            for i in range(n)]


def test_set_bootstrap_point_values_and_pairing():
    from shared.bench.suite import SetProtocol, set_bootstrap

    rng = np.random.default_rng(2)
    h1, h2 = rng.normal(size=150), rng.normal(size=150)
    m = h1 + h2 + rng.normal(size=150)
    records = _texts(150, lp=["a"] * 70 + ["b"] * 80)
    grouped = SetProtocol("toy", "pearson", group_by="lp")
    value, dist = set_bootstrap(m, [h1, h2], records, grouped, n_boot=300)
    by_hand = np.mean([np.corrcoef(m[s], h[s])[0, 1] for s in (slice(0, 70), slice(70, None)) for h in (h1, h2)])
    assert value == pytest.approx(by_hand, abs=1e-12) and dist.shape == (300,)
    value_s, _ = set_bootstrap(m, [h1], records, SetProtocol("toy", "spearman"), n_boot=10)
    assert value_s == pytest.approx(stats.spearmanr(m, h1)[0], abs=1e-12)
    # The same items get the same resamples: a monotone rescaling leaves Spearman's paired difference at 0.
    spearman = SetProtocol("toy", "spearman", group_by="lp")
    _, d1 = set_bootstrap(m, [h1], records, spearman, n_boot=200, seed=5)
    _, d2 = set_bootstrap(np.exp(m), [h1], records, spearman, n_boot=200, seed=5)
    assert np.allclose(d1, d2)


def test_suite_cli_tables_and_cache(tmp_path, capsys):
    data_path("bagel")
    args = ["suite", "--set", "bagel", "--metric", "sentbleu", "--metric", 'sentbleu={"lowercase": true}',
            "--bootstrap", "100", "--out", str(tmp_path)]
    environment = dict(os.environ)
    assert bench(args) == 0
    assert dict(os.environ) == environment  # a command run in-process leaves its caller's environment alone
    out = capsys.readouterr().out
    assert "| sentbleu | 0.144 [" in out  # mean Spearman over the 3 criteria: (.162 + .154 + .117) / 3
    assert 'Difference to `sentbleu`' in out
    saved = json.loads((tmp_path / "suite_dev.json").read_text())
    assert saved["sets"]["bagel"]["n"] == 404 and len(list((tmp_path / "scores").glob("bagel_*.json"))) == 2
    # the table's cells are movers correlate's on the scored records it writes: one command per criterion, averaged
    import movers

    label = 'sentbleu {"lowercase":true}'
    per_criterion = [movers.correlate(tmp_path / "judgments" / "bagel.jsonl", f"column:{label}", human=f"human.{c}",
                                      resamples=100).to_dict()["metrics"][f"column:{label}"]["spearman"]["value"]
                     for c in ("informativeness", "naturalness", "quality")]
    assert saved["sets"]["bagel"]["metrics"][label]["value"] == pytest.approx(np.mean(per_criterion), abs=1e-12)
    assert bench(args) == 0 and capsys.readouterr().out.count("(cached)") == 2
    # One set: the mean over sets is that set, interval included.
    for label in ("sentbleu", 'sentbleu {"lowercase":true}'):
        row, mean = saved["sets"]["bagel"]["metrics"][label], saved["mean"][label]
        assert mean["value"] == pytest.approx(row["value"]) and mean["ci"] == pytest.approx(row["ci"])
    assert saved["mean"]['sentbleu {"lowercase":true}']["delta_ci"] == pytest.approx(
        saved["sets"]["bagel"]["metrics"]['sentbleu {"lowercase":true}']["delta_ci"])


def test_suite_mean_over_sets_has_a_paired_interval(tmp_path):
    from shared.bench.suite import format_tables, run_suite

    data_path("bagel"), data_path("usr_personachat")
    result = run_suite("dev", ["sentbleu", 'sentbleu={"lowercase": true}'], sets=["bagel", "usr_personachat"],
                       out=tmp_path, n_boot=200)
    values = [e["metrics"]["sentbleu"]["value"] for e in result["sets"].values()]
    mean = result["mean"]["sentbleu"]
    assert len(values) == 2 and mean["value"] == pytest.approx(np.mean(values))
    assert mean["ci"][0] < mean["value"] < mean["ci"][1]
    other = result["mean"]['sentbleu {"lowercase":true}']
    assert other["delta"] == pytest.approx(other["value"] - mean["value"])
    lo, hi = other["delta_ci"]
    assert lo <= other["delta"] <= hi
    assert f"{mean['value']:.3f} [{mean['ci'][0]:.3f}, {mean['ci'][1]:.3f}] |" in format_tables(result)


# ---------------------------------------------------------------- missing scores, empty outputs, levels,
# paired comparisons (every expected value below is worked out by hand, by scipy, or from the published formula)

def _toy(tmp_path, human, *, system=True, name="toy"):
    """A data set of 4 systems x len(human[0]) inputs under tmp_path/<name>: human[s][j] (None = not rated)."""
    folder = tmp_path / name
    folder.mkdir()
    lines = []
    for s, row in enumerate(human):
        for j, value in enumerate(row):
            record = {"id": f"{s}.{j}", "doc_id": j, "hypothesis": f"output {s} of input {j}",
                      "references": [f"output of input {j}"], "human": {"quality": value}}
            if system:
                record["system"] = "ABCD"[s]
            lines.append(json.dumps(record))
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_records_without_a_human_score_are_skipped_per_criterion(tmp_path):
    from movers.core.agreement import level_correlations

    data = load_dataset("toy", root=_toy(tmp_path, [[1, None], [2, 4], [5, 3], [6, 4]]))
    human = data.human("quality")
    assert np.isnan(human[1]) and human[0] == 1.0  # None becomes NaN, not a TypeError
    metric = [1.0, 99.0, 4, 4, 5, 7, 3, 7]  # 99 sits on the unrated record: it must not count
    got = level_correlations(metric, human, n_boot=20)
    keep = [0, 2, 3, 4, 5, 6, 7]
    assert got.skipped == 1 and got.groups["all"].units == 7
    assert got.point["pearson"] == pytest.approx(stats.pearsonr([metric[i] for i in keep],
                                                                [human[i] for i in keep])[0], abs=1e-12)


def test_correlation_cli_counts_skipped_records(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MOVERS_DATA", str(_toy(tmp_path, [[1, None, 3], [2, 4, 1], [5, 3, 2], [6, 4, 5]])))
    assert bench(["correlation", "--data", "toy", "--metric", "sentbleu", "--bootstrap", "20",
                 "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "1 record without a quality score skipped" in printed
    saved = json.loads((tmp_path / "out" / "correlation_toy.json").read_text())
    assert saved["counts"]["quality"]["skipped"] == 1 and saved["counts"]["quality"]["units"] == {"all": 11}
    # the report is its JSON rendered: what `--render` prints from the saved file (and the docs include)
    from shared.bench.correlation import render

    assert printed.startswith(render(saved)) and printed[len(render(saved)):].startswith("saved ")
    assert bench(["correlation", "--render", str(tmp_path / "out" / "correlation_toy.json")]) == 0
    assert capsys.readouterr().out == render(saved)


def test_correlation_negates_distances_so_every_row_reads_the_same_way(tmp_path, capsys, monkeypatch):
    """Lazy-EMD is a distance: the bench correlates its negation (higher = better, as bench suite does), so its r
    has the sign of a similarity's and a paired difference to BERTScore compares like with like. The scores
    saved are minus movers.lazy_emd's own."""
    import movers

    monkeypatch.setenv("MOVERS_DATA", str(_toy(tmp_path, [[1, 2, 3], [2, 4, 1], [5, 3, 2], [6, 4, 5]])))
    out = tmp_path / "out"
    assert bench(["correlation", "--data", "toy", "--metric", "lazy_emd", "--metric", "sentbleu",
                 "--bootstrap", "20", "--out", str(out)]) == 0
    assert "distances negated (higher = better), so every correlation reads the same way: lazy_emd." in \
        capsys.readouterr().out
    saved = json.loads((out / "correlation_toy.json").read_text())
    data = load_dataset("toy")
    raw = movers.lazy_emd([r["hypothesis"] for r in data.records], [r["references"] for r in data.records]).scores
    assert saved["negated"] == ["lazy_emd"] and saved["scores"]["lazy_emd"] == [-x for x in raw]
    assert saved["scores"]["sentbleu"][0] >= 0  # a similarity is left as it is
    human = data.human("quality")
    assert saved["correlations"]["quality"]["lazy_emd"]["pearson"][0] == pytest.approx(
        -stats.pearsonr(raw, human)[0], abs=1e-12)


def test_baselines_give_empty_outputs_the_worst_value():
    from shared.bench.correlation import score_metric

    refs = [["the cat sat on the mat"]] * 3
    assert score_metric("sentbleu", ["", "the cat sat on the mat", "  "], refs, {}) == [0.0, pytest.approx(100.0),
                                                                                         0.0]
    assert score_metric("rougeL", ["", "the cat sat on the mat"], refs[:2], {}) == [0.0, pytest.approx(1.0)]
    pytest.importorskip("bert_score")
    # bert-score 0.3.13 crashes on "" under transformers 5; the empty output gets F1 = 0 and the other is scored alone
    got = score_metric("bertscore", ["", "a dog sat on the mat", " "], refs, {})
    alone = score_metric("bertscore", ["a dog sat on the mat"], refs[:1], {})
    assert got[0] == 0.0 and got[2] == 0.0 and got[1] == pytest.approx(alone[0], abs=1e-6) and 0.5 < got[1] < 1


def test_levels_need_systems_and_inputs(tmp_path):
    from shared.bench.correlation import record_layout

    data = load_dataset("toy", root=_toy(tmp_path, [[1, 2]] * 4, system=False))
    with pytest.raises(ValueError, match=r"`--level system` needs a `system` field .* data set 'toy'"):
        record_layout(data.records, "system", data="toy", input_field="doc_id")
    with pytest.raises(ValueError, match=r"`--level summary` resamples inputs .* data set 'toy' names no input field"):
        record_layout(data.records, "summary", data="toy")
    layout = record_layout(data.records, "summary", data="toy", input_field="doc_id")
    assert list(layout.inputs) == ["0", "1"] * 4


def test_correlation_cli_system_level_with_paired_comparison(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MOVERS_DATA", str(_toy(tmp_path, [[1, 2, 3], [2, 4, 1], [5, 3, 2], [6, 4, 5]])))
    out = tmp_path / "out"
    assert bench(["correlation", "--data", "toy", "--metric", "rougeL", "--compare-to", "sentbleu",
                 "--level", "system", "--input-field", "doc_id", "--bootstrap", "50", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "system level: 4 systems; means over 3 inputs" in text
    assert "Difference to `sentbleu`" in text and "| rougeL | " in text and "Williams t (df)" in text
    saved = json.loads((out / "correlation_toy_system.json").read_text())
    assert saved["level"] == "system" and saved["compare_to"] == "sentbleu" and saved["input_field"] == "doc_id"
    paired = saved["paired"]["quality"]["rougeL"]
    assert set(paired) == {"pearson", "spearman", "kendall", "williams"} and paired["williams"]["all"]["df"] == 1
    assert (out / "correlation_toy_system_quality.png").stat().st_size > 1000
    with pytest.raises(SystemExit):
        bench(["correlation", "--data", "toy", "--metric", "sentbleu", "--level", "summary", "--out", str(out)])
    assert "data set 'toy' names no input field" in capsys.readouterr().err


def test_suite_skips_records_without_a_human_score():
    from shared.bench.suite import SetProtocol, set_bootstrap

    rng = np.random.default_rng(5)
    h = rng.normal(size=50)
    m = h + rng.normal(size=50)
    gap = h.copy()
    gap[7] = np.nan
    value, dist = set_bootstrap(m, [gap], _texts(50), SetProtocol("toy", "pearson"), n_boot=100)
    keep = np.arange(50) != 7
    assert value == pytest.approx(stats.pearsonr(m[keep], h[keep])[0], abs=1e-12) and not np.isnan(dist).any()


def test_suite_system_level_by_hand():
    """The suite's system level: per-system means of the scores against per-system means of each criterion,
    the statistic averaged over criteria; inputs are resampled, so a monotone rescaling of the per-system means
    keeps Spearman's resamples equal (paired)."""
    from shared.bench.suite import SetProtocol, set_bootstrap

    rng = np.random.default_rng(3)
    systems, inputs = ["s0", "s1", "s2", "s3", "s4"], [f"d{j}" for j in range(6)]
    records = _texts(30, system=[s for s in systems for _ in inputs], doc_id=inputs * 5)
    m = rng.normal(size=len(records))
    h1, h2 = m + rng.normal(size=len(records)), rng.normal(size=len(records))
    protocol = SetProtocol("realsumm", "pearson")  # realsumm's input field: doc_id
    value, dist = set_bootstrap(m, [h1, h2], records, protocol, level="system", n_boot=200, seed=1)
    means = [np.asarray(x).reshape(5, 6).mean(1) for x in (m, h1, h2)]  # records are system-major
    by_hand = (np.corrcoef(means[0], means[1])[0, 1] + np.corrcoef(means[0], means[2])[0, 1]) / 2
    assert value == pytest.approx(by_hand, abs=1e-12) and dist.shape == (200,)
    spearman = SetProtocol("realsumm", "spearman")
    v1, d1 = set_bootstrap(m, [h1], records, spearman, level="system", n_boot=200, seed=1)
    assert v1 == pytest.approx(stats.spearmanr(means[0], means[1])[0], abs=1e-12)
    # a per-system shift that keeps the order of the system means (s0 lowest .. s4 highest by construction)
    ordered = np.repeat(np.arange(5.0), 6) * 100 + m
    v2, d2 = set_bootstrap(ordered, [h1], records, spearman, level="system", n_boot=200, seed=1)
    v3, d3 = set_bootstrap(ordered * 3 + 1, [h1], records, spearman, level="system", n_boot=200, seed=1)
    assert v2 == v3 and np.array_equal(d2, d3, equal_nan=True)


def test_suite_full_sets_and_system_level_cli(tmp_path, capsys):
    """--full scores whole sets (STS-B test: 1,379 pairs, not the suite's 500); --level system leaves out the
    sets without systems and says so, and reuses the segment level's cached scores."""
    data_path("stsb"), data_path("webnlg2020_human"), data_path("bagel")
    base = ["suite", "--suite", "validation", "--set", "stsb:test", "--set", "webnlg2020_human", "--full",
            "--metric", "sentbleu", "--bootstrap", "50", "--out", str(tmp_path)]
    assert bench(base) == 0
    saved = json.loads((tmp_path / "suite_validation_full.json").read_text())
    assert {k: v["n"] for k, v in saved["sets"].items()} == {"stsb:test": 1379, "webnlg2020": 2848}
    capsys.readouterr()
    assert bench([*base, "--level", "system"]) == 0
    out = capsys.readouterr().out
    assert "no systems, left out at the system level: stsb:test" in out and out.count("(cached)") == 1
    system = json.loads((tmp_path / "suite_validation_full_system.json").read_text())
    assert list(system["sets"]) == ["webnlg2020"] and system["level"] == "system"
    capsys.readouterr()
    # BAGEL has 2 systems: two system means always correlate ±1, so the set is left out, and said so
    assert bench(["suite", "--set", "bagel", "--metric", "sentbleu", "--level", "system", "--bootstrap", "20",
                 "--out", str(tmp_path)]) == 0
    assert "fewer than 4 systems, left out at the system level: bagel" in capsys.readouterr().out
    # by hand: sentence BLEU's per-system means against each criterion's per-system means (16 systems)
    from shared.bench.correlation import score_metric
    from shared.bench.data import load_dataset

    data = load_dataset("webnlg2020_human")
    bleu = np.asarray(score_metric("sentbleu", [r["hypothesis"] for r in data.records],
                                   [r["references"] for r in data.records], {}))
    names = sorted({r["system"] for r in data.records})
    sys_of = np.array([names.index(r["system"]) for r in data.records])
    rhos = []
    for criterion in data.criteria:
        h = np.asarray(data.human(criterion), float)
        ok = ~np.isnan(h)
        rhos.append(stats.spearmanr([bleu[ok & (sys_of == k)].mean() for k in range(16)],
                                    [h[ok & (sys_of == k)].mean() for k in range(16)])[0])
    assert system["sets"]["webnlg2020"]["metrics"]["sentbleu"]["value"] == pytest.approx(np.mean(rhos), abs=1e-12)


# ---------------------------------------------------------------- the final validation tables

def test_validation_rows_come_from_the_declarations():
    """Rows: BERTScore first, then each metric that declares original_options, at its default and, where the
    default departs from the original, with the original's settings; `model` reaches only metrics that take an
    encoder (SMS and S+WMS keep their GloVe vectors)."""
    from shared.bench.validation import rows

    table = {label: (name, kwargs, of) for label, name, kwargs, of in rows("ENC", 12)}
    assert next(iter(table)) == "BERTScore F1" and table["BERTScore F1"] == ("bertscore", {"model": "ENC", "layer": 12},
                                                                               None)
    assert set(table) == {"BERTScore F1", "MoverScore", "MoverScore original", "SMS", "S+WMS", "TWMD", "LazyEMD",
                          "LazyEMD original"}
    assert table["MoverScore original"] == ("moverscore", {"model": "ENC", "reference_aggregation": "mean"},
                                            "MoverScore")
    assert table["LazyEMD original"] == ("lazy_emd", {"model": "ENC", "preset": "original"}, "LazyEMD")
    assert table["SMS"] == ("sms", {}, None) and table["S+WMS"] == ("s_wms", {}, None)
    assert table["TWMD"] == ("twmd", {"model": "ENC"}, None)
    assert rows()[0] == ("BERTScore F1", "bertscore", {}, None)


def _figure(value, lo, hi, delta=None, dlo=None, dhi=None):
    row = {"value": value, "ci": [lo, hi]}
    if delta is not None:
        row.update(delta=delta, delta_ci=[dlo, dhi])
    return row


def test_validation_render_marks_intervals_and_flips_the_original_pair():
    """A hand-made run: a difference whose interval excludes 0 gets '*'; the default − original row is the
    negated (original − default) pair with its interval's ends swapped; the summary picks the best default and
    says whether its paired interval reaches 0."""
    from shared.bench.validation import BEGIN, END, begin, render_headline, render_summary, render_tables

    level = {"sets": {"a": {"n": 10, "statistic": "pearson", "metrics": {
        "BERTScore F1": _figure(0.5, 0.4, 0.6), "M": _figure(0.55, 0.45, 0.65, 0.05, 0.01, 0.09),
        "M original": _figure(0.45, 0.35, 0.55, -0.05, -0.08, 0.02), "S": _figure(0.3, 0.2, 0.4, -0.2, -0.3, -0.1)}}},
        "mean": {"BERTScore F1": _figure(0.5, 0.4, 0.6), "M": _figure(0.55, 0.45, 0.65, 0.05, 0.01, 0.09),
                 "M original": _figure(0.45, 0.35, 0.55, -0.05, -0.08, 0.02),
                 "S": _figure(0.3, 0.2, 0.4, -0.2, -0.3, -0.1)}, "no_systems": []}
    pair = {"a": {"delta": -0.1, "delta_ci": [-0.15, -0.04]}, "mean": {"delta": -0.1, "delta_ci": [-0.15, -0.04]}}
    run = {"encoder": "enc", "model": "bundled", "rows": ["BERTScore F1", "M", "M original", "S"],
           "originals": {"M original": "M"}, "levels": {"segment": level, "system": level},
           "default_vs_original": {"segment": {"M": pair}, "system": {"M": pair}}}
    tables = render_tables([run], "M", "m")
    assert tables.startswith(begin("m")) and tables.endswith(END) and "| S |" not in tables
    assert "| M | enc | 0.550 [0.450, 0.650] | 0.550 [0.450, 0.650] |" in tables
    assert "| M | enc | +0.050 [+0.010, +0.090]* | +0.050 [+0.010, +0.090]* |" in tables
    assert "| M original | enc | -0.050 [-0.080, +0.020] |" in tables
    assert "| M − M original | enc | +0.100 [+0.040, +0.150]* | +0.100 [+0.040, +0.150]* |" in tables
    headline = render_headline([run], "M")  # the card's one table: values beside BERTScore, the mean's difference
    assert headline.startswith(BEGIN) and headline.endswith(END) and "original" not in headline
    assert "| set | BERTScore F1, enc | M, enc |" in headline and "| a (p) | 0.500 | 0.550 |" in headline
    assert "| mean (− BERTScore) | 0.500 | 0.550 (+0.050 [+0.010, +0.090]*) |" in headline
    summary = render_summary([run])
    assert "| a (p) | enc | 0.500 [0.400, 0.600] | M 0.550 [0.450, 0.650] | +0.050 [+0.010, +0.090]* | yes |" \
        in summary and "enc 1 of 1 sets" in summary


def test_validation_blocks_are_the_saved_figures():
    """Each validated metric's card (its headline) and the validation page (the summary and every metric's full
    tables) hold the blocks rendered from cards/validation/*.json: run
    `python -m shared.bench validation --render cards/validation --write` after a new validation run."""
    import movers
    from shared.bench.validation import (
        PAGE,
        SUMMARY,
        load_results,
        render_headline,
        render_summary,
        render_tables,
        sync,
    )

    from .helpers import REPO

    runs = load_results(REPO / "cards" / "validation")
    assert [r["model"] for r in runs][:1] == ["bundled"] and len(runs) >= 2
    page = (REPO / PAGE).read_text(encoding="utf-8")
    assert sync(page, render_summary(runs), PAGE, SUMMARY) == page, f"{PAGE}: stale summary block"
    for slug in movers.metrics.slugs():
        spec = movers.metrics.get(slug)
        if spec.original_options is not None:
            card = (REPO / "cards" / f"{slug}.md").read_text(encoding="utf-8")
            assert sync(card, render_headline(runs, spec.title), slug) == card, f"cards/{slug}.md: stale headline"
            tables = render_tables(runs, spec.title, slug)
            assert sync(page, tables, PAGE, slug) == page, f"{PAGE}: stale {slug}"


def test_validation_plot_draws_every_encoder(tmp_path):
    """The benchmarks page's picture comes from the saved figures: one panel per encoder (drawn afresh here; the
    committed PNG is rewritten by `--render --write`)."""
    from PIL import Image

    from shared.bench.validation import PAGE, PLOT, load_results, render_plot

    from .helpers import REPO

    runs = load_results(REPO / "cards" / "validation")
    render_plot(runs, tmp_path / PLOT)
    with Image.open(tmp_path / PLOT) as fresh, Image.open(REPO / "cards" / PLOT) as committed:
        assert fresh.size == committed.size and fresh.size[0] > 500 * len(runs)
    assert f"](../cards/{PLOT})" in (REPO / PAGE).read_text(encoding="utf-8")  # docs/ -> cards/


@pytest.mark.system
@pytest.mark.slow
def test_validation_figures_recompute(tmp_path):
    """The saved MiniLM figures come from this code: STS-B test (1,379 pairs, the cheapest full set) rescored
    with BERTScore F1 and TWMD gives the saved segment-level values and paired difference. A study on a whole data
    set: a system test."""
    data_path("stsb")
    from shared.bench.suite import run_suite
    from shared.bench.validation import load_results

    from .helpers import REPO

    saved = load_results(REPO / "cards" / "validation")[0]["levels"]["segment"]["sets"]["stsb:test"]["metrics"]
    fresh = run_suite("validation", ["BERTScore F1:bertscore", "TWMD:twmd"], sets=["stsb:test"], out=tmp_path,
                      full=True)["sets"]["stsb:test"]["metrics"]
    for label in ("BERTScore F1", "TWMD"):
        assert fresh[label]["value"] == pytest.approx(saved[label]["value"], abs=1e-6)
        assert fresh[label]["ci"] == pytest.approx(saved[label]["ci"], abs=1e-6)
    assert fresh["TWMD"]["delta_ci"] == pytest.approx(saved["TWMD"]["delta_ci"], abs=1e-6)


_REPORT = re.compile(r"<!-- bench (?P<command>correlation|systems|speed): generated from (?P<json>\S+) by "
                     r"`python -m shared\.bench (?P=command)(?: --lengths (?P<lengths>[\d,]+))? --render \S+"
                     r"(?: --heading (?P<heading>\d))?` -->\n(?P<body>.*?)<!-- /bench (?P=command) -->", re.S)


@pytest.mark.parametrize("page", ["benchmarks.md", "validation.md", "cli.md"])
def test_the_pages_show_saved_runs_as_the_commands_report_them(page):
    """The pages include real `python -m shared.bench correlation` / `systems` / `speed --lengths` runs as Markdown
    tables (not console output), rendered from each run's saved JSON by the command's own report (`--render FILE`):
    kept equal here."""
    from shared.bench import correlation, lengths, systems

    from .helpers import REPO

    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    blocks = list(_REPORT.finditer(text))
    assert blocks, f"docs/{page} has no generated bench block"
    for block in blocks:
        saved = json.loads((REPO / block.group("json")).read_text(encoding="utf-8"))
        if block.group("command") == "correlation":
            want = correlation.render(saved, int(block.group("heading") or 2))
        elif block.group("command") == "speed":
            want = lengths.render_saved(saved, [int(x) for x in block.group("lengths").split(",")])
        else:
            want = systems.render(saved)
        assert want.strip("\n") == block.group("body").strip("\n"), (
            f"docs/{page}: the block differs from {block.group('json')}; rewrite it from the command's --render")


def test_cold_start_times_each_command_in_rounds_and_reports_ratios_to_the_floor(capsys, tmp_path):
    """The study's rounds and report, with a runner that stands in for the processes: every command of every
    round is run, and the ratios are the medians' (and minima's) quotients, checked against the goals."""
    from movers.cli import COMMANDS
    from shared.bench import cold_start

    seconds = {"floor": [8.0, 9.0, 10.0], "score moverscore": [9.0, 12.0, 30.0], "--help": [0.1, 0.2, 0.9]}
    calls: list[list[str]] = []

    def fake(argv, env):
        calls.append(list(argv))
        label = ("floor" if argv[1] == "-c" else "--help" if argv[-1] == "register" else "score moverscore" if "score" in argv and "--help" not in argv
                 else "--help")
        return seconds[label][sum(1 for c in calls if c == list(argv)) - 1]

    out = tmp_path / "figures.json"
    assert cold_start.main(["--metric", "moverscore", "--repeats", "3", "--json", str(out)], run=fake) == 0
    assert calls[0][-2:] == ["movers", "register"]  # once, untimed
    assert len(calls) == 1 + 3 * (2 + 1 + len(COMMANDS))
    figures = json.loads(out.read_text(encoding="utf-8"))["this tree"]
    assert figures["score moverscore"]["ratio"] == 12.0 / 9.0 and figures["score moverscore"]["ratio_min"] == 9 / 8
    assert figures["score moverscore"]["goal"] == "over 1.3x" and figures["score --help"]["goal"] == "ok"
    assert set(figures) == {"floor", "score moverscore", "--help", *(f"{name} --help" for name in COMMANDS)}
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("score moverscore "))
    assert row.split() == ["score", "moverscore", "9.00", "12.00", "1.33x", "(1.12x)", "over", "1.3x"]
