"""Agreement with human judgments: ``movers.correlate`` and ``movers correlate``.

Every expected value comes from an oracle this project did not write: scipy.stats (pearsonr, spearmanr,
kendalltau's tau-b), the Williams test written out below from Graham & Baldwin (2014), numbers worked out by hand,
or sacreBLEU's own sentence scores. The command is run as a person runs it, on real files.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import movers
from movers.core import agreement as core
from movers.core.agreement import Layout, level_correlations

from .helpers import REPO
from .support.cli_process import run_movers

EXAMPLE = REPO / "docs" / "examples" / "judgments.jsonl"
EXACT = 1e-9
"""The acceptance bound for the statistics against scipy."""


def _records(n=60, seed=0, **extra):
    """`n` records with real-looking texts, a human score and a metric score column, from a seeded generator."""
    rng = np.random.default_rng(seed)
    human = rng.normal(size=n)
    out = []
    for i in range(n):
        record = {"prediction": f"output number {i} of the system", "references": [f"reference text {i % 7}"],
                  "human": float(human[i]), "comet": float(human[i] + rng.normal()),
                  "bleurt": float(-human[i] + 2 * rng.normal())}
        record.update({k: v(i) for k, v in extra.items()})
        out.append(record)
    return out


def _write(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ------------------------------------------------------------------ the statistics against scipy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_segment_statistics_equal_scipys(seed):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=80)
    m = np.round(h + rng.normal(size=80), 1)  # rounded: ties, which tau-b and average ranks must handle
    got = level_correlations(m, h, n_boot=20)
    assert abs(got.point["pearson"] - stats.pearsonr(m, h)[0]) <= EXACT
    assert abs(got.point["spearman"] - stats.spearmanr(m, h)[0]) <= EXACT
    assert abs(got.point["kendall"] - stats.kendalltau(m, h, variant="b")[0]) <= EXACT


def test_the_function_equals_scipy_per_group_and_averages_the_groups():
    records = _records(90, seed=3, lp=lambda i: ["de-en", "fi-en", "zh-en"][i % 3])
    result = movers.correlate(records, ["column:comet", "column:bleurt"], group_by="lp", resamples=50)
    out = result.to_dict()
    for name in ("comet", "bleurt"):
        per_group = {}
        for lp in ("de-en", "fi-en", "zh-en"):
            m = [r[name] for r in records if r["lp"] == lp]
            h = [r["human"] for r in records if r["lp"] == lp]
            per_group[lp] = {"pearson": stats.pearsonr(m, h)[0], "spearman": stats.spearmanr(m, h)[0],
                             "kendall": stats.kendalltau(m, h)[0]}
        for statistic in ("pearson", "spearman", "kendall"):
            entry = out["metrics"][f"column:{name}"]
            assert abs(entry["per_group"]["de-en"][statistic] - per_group["de-en"][statistic]) <= EXACT
            mean = np.mean([v[statistic] for v in per_group.values()])
            assert abs(entry[statistic]["value"] - mean) <= EXACT
            low, high = entry[statistic]["ci"]
            assert low <= entry[statistic]["value"] <= high


def test_system_level_by_hand_and_pairwise_accuracy():
    # 4 systems (rows) x 2 inputs. System means: metric (2, 4, 6, 5), human (1, 3, 4, 5).
    metric, human = [[1, 3], [4, 4], [5, 7], [3, 7]], [[1, 1], [2, 4], [5, 3], [6, 4]]
    layout = Layout("system", systems=[s for s in "ABCD" for _ in range(2)], inputs=["d1", "d2"] * 4)
    got = level_correlations([x for r in metric for x in r], [x for r in human for x in r], layout, n_boot=200)
    means_m, means_h = [2, 4, 6, 5], [1, 3, 4, 5]
    assert abs(got.point["pearson"] - stats.pearsonr(means_m, means_h)[0]) <= EXACT
    assert abs(got.point["pearson"] - 31 / 35) <= EXACT  # centred products 7.75 / 8.75, by hand
    assert abs(got.point["kendall"] - stats.kendalltau(means_m, means_h)[0]) <= EXACT
    # pairs: C and D are ordered the other way round (6 > 5 but 4 < 5): 5 of 6 pairs agree
    assert got.point[core.ACCURACY] == pytest.approx(5 / 6, abs=EXACT)
    assert got.groups["all"].units == 4 and got.groups["all"].resampled == 2
    # the inputs are resampled: a resample holds d1 twice, both, or d2 twice
    only = [stats.pearsonr([r[j] for r in metric], [r[j] for r in human])[0] for j in (0, 1)]
    assert set(np.round(got.boot["pearson"], 12)) == {round(only[0], 12), round(31 / 35, 12), round(only[1], 12)}


def test_pairwise_accuracy_counts_ties_as_the_humans_do():
    # pairs (a,b) (a,c) (b,c): metric 1 = 1 < 2 -> tie, tie, lower; human tie, lower, lower: 2 of 3 agree
    assert core.pairwise_accuracy([[1, 1, 2]], [[5, 5, 6]])[0] == pytest.approx(1.0)
    assert core.pairwise_accuracy([[1, 1, 2]], [[5, 6, 7]])[0] == pytest.approx(2 / 3)
    assert core.pairwise_accuracy([[3, 2, 1]], [[1, 2, 3]])[0] == 0.0


def test_summary_level_by_hand_leaves_out_inputs_without_a_correlation():
    # 4 inputs x 4 systems: per input r = 1, -1, .8, and a constant human row (undefined: left out, counted)
    metric = [1, 2, 3, 4] * 4
    human = [1, 2, 3, 4, 4, 3, 2, 1, 1, 3, 2, 4, 2, 2, 2, 2]
    layout = Layout("summary", inputs=[j for j in "wxyz" for _ in range(4)])
    got = level_correlations(metric, human, layout, n_boot=300)
    assert got.point["pearson"] == pytest.approx((1 - 1 + stats.pearsonr([1, 2, 3, 4], [1, 3, 2, 4])[0]) / 3,
                                                 abs=EXACT)
    assert got.point["kendall"] == pytest.approx((1 - 1 + 4 / 6) / 3, abs=EXACT)
    assert got.groups["all"].undefined == 1 and got.groups["all"].units == 3 and got.groups["all"].resampled == 4


def test_records_without_a_score_are_left_out_of_both_system_means():
    layout = Layout("system", systems=[s for s in "ABCD" for _ in range(2)], inputs=["d1", "d2"] * 4)
    human = [1, 1, 2, 4, 5, 3, 6, float("nan")]  # D's score on d2 is missing: D's means are metric 3, human 6
    got = level_correlations([1, 3, 4, 4, 5, 7, 3, 7], human, layout, n_boot=10)
    assert got.skipped == 1
    assert abs(got.point["pearson"] - stats.pearsonr([2, 4, 6, 3], [1, 3, 4, 6])[0]) <= EXACT


# ------------------------------------------------------------------ Williams, paired differences, bootstrap


def _williams_from_the_paper(r12, r13, r23, n):
    """Graham & Baldwin (2014), section 3 (Williams 1959): t with n - 3 degrees of freedom, one-sided p."""
    k = 1 - r12 ** 2 - r13 ** 2 - r23 ** 2 + 2 * r12 * r13 * r23
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(
        2 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3)
    return t, stats.t.sf(t, df=n - 3)


@pytest.mark.parametrize("r12, r13, r23, n", [(0.5, 0.3, 0.4, 20), (0.65, 0.55, 0.3, 50), (0.2, 0.6, 0.7, 9),
                                              (0.91, 0.9, 0.95, 560)])
def test_williams_equals_the_papers_formula(r12, r13, r23, n):
    t, p = core.williams_test(r12, r13, r23, n)
    want_t, want_p = _williams_from_the_paper(r12, r13, r23, n)
    assert abs(t - want_t) <= 1e-6 and abs(p - want_p) <= 1e-6


def test_williams_against_a_published_value_and_both_directions():
    # inmoonlight/nlp-williams README (a Python port of Graham's R script): r12 .65, r13 .55, r23 .3, n 50
    assert core.williams_test(0.65, 0.55, 0.3, 50)[1] == pytest.approx(0.20928617286753592, abs=1e-6)
    assert core.williams_test(0.55, 0.65, 0.3, 50)[1] == pytest.approx(1 - 0.20928617286753592, abs=1e-6)
    assert all(math.isnan(x) for x in core.williams_test(0.5, 0.4, 0.3, 3))  # n - 3 = 0 degrees of freedom


def test_the_functions_williams_uses_the_three_pearson_correlations():
    records = _records(70, seed=5)
    out = movers.correlate(records, ["column:comet", "column:bleurt"], compare_to="column:bleurt",
                           resamples=20).to_dict()
    a, b, h = ([r[k] for r in records] for k in ("comet", "bleurt", "human"))
    want = _williams_from_the_paper(stats.pearsonr(a, h)[0], stats.pearsonr(b, h)[0], stats.pearsonr(a, b)[0], 70)
    w = out["williams"]["column:comet"]
    assert abs(w["t"] - want[0]) <= 1e-6 and abs(w["p"] - want[1]) <= 1e-6 and w["df"] == 67 and w["n"] == 70


def test_paired_differences_use_the_same_resamples():
    rng = np.random.default_rng(4)
    h = rng.normal(size=60)
    m = h + rng.normal(size=60)
    # an affine copy has the same Pearson r in every resample: paired, the interval of the difference is [0, 0]
    got = core.paired_difference(level_correlations(3 * m + 1, h, n_boot=300), level_correlations(m, h, n_boot=300))
    assert got["pearson"] == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    better = core.paired_difference(level_correlations(h + 0.1 * rng.normal(size=60), h, n_boot=300),
                                    level_correlations(m, h, n_boot=300))
    for value, low, high in better.values():
        assert 0 < low <= value <= high
    # by hand: b = (1, 3, 2, 4) against (1, 2, 3, 4) has r = rho = .8 and tau = 4/6; a is perfect
    by_hand = core.paired_difference(level_correlations([1, 2, 3, 4], [1, 2, 3, 4], n_boot=50),
                                     level_correlations([1, 3, 2, 4], [1, 2, 3, 4], n_boot=50))
    assert by_hand["pearson"][0] == pytest.approx(0.2) and by_hand["kendall"][0] == pytest.approx(1 - 4 / 6)


def test_the_bootstrap_is_seeded_reproducible_and_resamples_within_groups():
    records = _records(60, seed=6, lp=lambda i: "ab"[i % 2])
    one = movers.correlate(records, "column:comet", group_by="lp", resamples=200, seed=3).to_dict()
    two = movers.correlate(records, "column:comet", group_by="lp", resamples=200, seed=3).to_dict()
    other = movers.correlate(records, "column:comet", group_by="lp", resamples=200, seed=4).to_dict()
    assert one == two and one["metrics"] != other["metrics"]
    # within groups: the resampled units of each group are its own records
    assert one["groups"] == {"a": {"units": 30, "resampled": 30}, "b": {"units": 30, "resampled": 30}}
    # the interval is the 2.5th and 97.5th percentile of the resampled values (numpy's linear interpolation)
    result = movers.correlate(records, "column:comet", group_by="lp", resamples=200, seed=3)
    boot = result.metrics["column:comet"].result.boot["pearson"]
    assert one["metrics"]["column:comet"]["pearson"]["ci"] == list(np.percentile(boot, [2.5, 97.5]))


# ------------------------------------------------------------------ metrics by name


def test_sentbleu_and_chrf_are_sacrebleus_sentence_scores():
    import sacrebleu

    records = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
    result = movers.correlate(EXAMPLE, ["sentbleu", 'chrf={"word_order": 2}'], resamples=10)
    bleu = [sacrebleu.sentence_bleu(r["prediction"], r["references"]).score for r in records]
    chrf = [sacrebleu.sentence_chrf(r["prediction"], r["references"], word_order=2).score for r in records]
    assert list(result.metrics["sentbleu"].scores) == bleu
    assert list(result.metrics['chrf={"word_order": 2}'].scores) == chrf
    h = [r["human"] for r in records]
    assert abs(result.metrics["sentbleu"].result.point["pearson"] - stats.pearsonr(bleu, h)[0]) <= EXACT


def test_a_movers_metric_scores_once_as_its_function_does_and_distances_are_negated():
    records = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()][:12]
    preds, refs = [r["prediction"] for r in records], [r["references"] for r in records]
    result = movers.correlate(records, ["moverscore", "lazy_emd", 'moverscore={"idf": true}'], resamples=10)
    assert list(result.metrics["moverscore"].scores) == movers.moverscore(preds, refs).scores
    assert list(result.metrics['moverscore={"idf": true}'].scores) == movers.moverscore(preds, refs, idf=True).scores
    distance = movers.lazy_emd(preds, refs)
    assert list(result.metrics["lazy_emd"].scores) == [-x for x in distance.scores]
    assert result.metrics["lazy_emd"].negated and str(distance.signature) == result.metrics["lazy_emd"].signature
    assert any("lazy_emd: a distance" in note for note in result.notes())


def test_a_metric_with_equal_scores_has_no_correlation_and_says_so():
    records = _records(40, seed=7, lp=lambda i: "ab"[i % 2], flat=lambda i: 0.5 if i % 2 else float(i))
    result = movers.correlate(records, ["column:flat", "column:comet"], group_by="lp", compare_to="column:comet",
                              resamples=30)
    out = result.to_dict()
    entry = out["metrics"]["column:flat"]
    assert entry["per_group"]["b"]["pearson"] is None and entry["per_group"]["a"]["pearson"] is not None
    assert entry["pearson"]["value"] == pytest.approx(entry["per_group"]["a"]["pearson"])  # over 1 of 2 groups
    assert any("all equal in group 'b'" in n and "1 of 2 groups" in n for n in out["notes"])
    text = result.to_json()
    assert "NaN" not in text and "Infinity" not in text
    constant = movers.correlate(_records(20, flat=lambda i: 1.0), ["column:flat", "column:comet"],
                                compare_to="column:comet", resamples=20).to_dict()
    assert constant["metrics"]["column:flat"]["pearson"] == {"value": None, "ci": None}
    assert constant["williams"]["column:flat"]["p"] is None


# ------------------------------------------------------------------ bad input: named, before any scoring


def _refused(tmp_path, records, *, match, raw=None):
    path = tmp_path / "judgments.jsonl"
    if raw is not None:
        path.write_text(raw, encoding="utf-8")
    else:
        _write(path, records)
    with pytest.raises(ValueError, match=match):
        movers.correlate(path, "sentbleu", resamples=10)


@pytest.mark.parametrize("change, match", [
    (lambda r: r.pop("prediction"), r"judgments.jsonl, line 4: the record has no prediction"),
    (lambda r: r.pop("references"), r"line 4: the record has no reference"),
    (lambda r: r.update(references=[]), r"line 4: field `references` must be a text or a non-empty list"),
    (lambda r: r.update(references=["a", " "]), r"line 4: field `references\[1\]` must be a non-empty text"),
    (lambda r: r.update(prediction=7), r"line 4: field `prediction` must be a text, got 7"),
    (lambda r: r.pop("human"), r"line 4: field `human` \(the human score\) is missing"),
    (lambda r: r.update(human=None), r"line 4: field `human` \(the human score\) is missing"),
    (lambda r: r.update(human="high"), r"line 4: field `human` \(the human score\) must be a finite number, got "
                                       r"'high'"),
    (lambda r: r.update(human=True), r"line 4: field `human` .* must be a finite number, got True"),
    (lambda r: r.update(human=[1]), r"line 4: field `human` .* must be a finite number"),
    (lambda r: r.update(human="4.5"), r"line 4: field `human` .* must be a finite number, got '4.5'"),  # JSON text
])
def test_bad_records_are_named_by_line_and_field(tmp_path, change, match):
    records = _records(10)
    change(records[3])
    _refused(tmp_path, records, match=match)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_human_score_that_is_not_finite_is_refused(tmp_path, literal):
    lines = [json.dumps(r) for r in _records(6)]
    lines.insert(2, '{"prediction": "a", "references": ["b"], "human": ' + literal + "}")
    _refused(tmp_path, None, match=r"line 3: field `human` .* must be a finite number", raw="\n".join(lines))


def test_bad_files_are_named(tmp_path):
    good = json.dumps(_records(1)[0])
    _refused(tmp_path, None, match=r"line 3: not valid JSON", raw=f"{good}\n\n{{oops\n")
    _refused(tmp_path, None, match=r"line 2: a record must be an object", raw=f"{good}\n[1, 2]\n")
    _refused(tmp_path, None, match=r"no records", raw="\n \n")
    (tmp_path / "bad.jsonl").write_bytes(good.encode() + b"\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: not UTF-8"):
        movers.correlate(tmp_path / "bad.jsonl", "sentbleu")
    with pytest.raises(ValueError, match=r"does not exist"):
        movers.correlate(tmp_path / "missing.jsonl", "sentbleu")
    (tmp_path / "j.txt").write_text(good + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"unknown format '.txt'"):
        movers.correlate(tmp_path / "j.txt", "sentbleu")
    with pytest.raises(ValueError, match=r"is not a regular file"):
        movers.correlate(tmp_path, "sentbleu")


def test_too_few_points_and_equal_human_scores_are_refused(tmp_path):
    _refused(tmp_path, _records(2), match=r"line 1: the file has 2 records with a human score; a correlation needs "
                                          r"at least 3")
    _refused(tmp_path, _records(1), match=r"line 1: the file has 1 record with a human score; a correlation needs "
                                          r"at least 3")
    records = _records(8, lp=lambda i: "a" if i < 6 else "b")
    path = _write(tmp_path / "groups.jsonl", records)
    with pytest.raises(ValueError, match=r"groups.jsonl, line 7: group 'b' \(--group-by lp\) has 2 records with a "
                                         r"human score; a correlation needs at least 3"):
        movers.correlate(path, "sentbleu", group_by="lp")
    flat = _records(6, lp=lambda i: "ab"[i // 3])
    for r in flat[3:]:
        r["human"] = 2.0
    with pytest.raises(ValueError, match=r"line 4: the human scores \(field `human`\) of group 'b' .* are all equal"):
        movers.correlate(_write(tmp_path / "flat.jsonl", flat), "sentbleu", group_by="lp")


def test_levels_refuse_what_they_cannot_use(tmp_path):
    records = _records(12, system=lambda i: f"S{i % 2}", doc=lambda i: f"d{i // 2}")
    path = _write(tmp_path / "j.jsonl", records)
    with pytest.raises(ValueError, match=r"line 1: the file has 2 systems; a correlation needs at least 3"):
        movers.correlate(path, "sentbleu", level="system", input_field="doc")
    with pytest.raises(ValueError, match=r"line 1: input 'd0' \(field `doc`\) has 2 outputs with a human score"):
        movers.correlate(path, "sentbleu", level="summary", input_field="doc")
    with pytest.raises(ValueError, match=r"the system level resamples inputs .* --input-field"):
        movers.correlate(path, "sentbleu", level="system")
    del records[5]["system"]
    with pytest.raises(ValueError, match=r"line 6: field `system` \(the system\) is missing"):
        movers.correlate(_write(tmp_path / "k.jsonl", records), "sentbleu", level="system", input_field="doc")


def test_a_bad_column_or_metric_is_refused_before_anything_scores(tmp_path, monkeypatch):
    from movers.api import agreement

    def scored(*args, **kwargs):
        raise AssertionError("a metric scored before the input was refused")

    monkeypatch.setitem(agreement.SACREBLEU, "sentbleu", scored)
    records = _records(10)
    records[6]["comet"] = "n/a"
    path = _write(tmp_path / "j.jsonl", records)
    with pytest.raises(ValueError, match=r"line 7: field `comet` must be a finite number, got 'n/a'"):
        movers.correlate(path, ["moverscore", "column:comet"])
    with pytest.raises(ValueError, match=r"line 1: field `nope` is missing"):
        movers.correlate(path, ["moverscore", "column:nope"])
    with pytest.raises(ValueError, match=r"unknown metric 'bleu'; choose a movers metric"):
        movers.correlate(path, ["moverscore", "bleu"])
    with pytest.raises(ValueError, match=r"metric 'moverscore=\{\"idff\": 1\}'.*unexpected keyword argument 'idff'"):
        movers.correlate(path, ['moverscore={"idff": 1}'])
    with pytest.raises(ValueError, match=r"must be a JSON object"):
        movers.correlate(path, ["moverscore={idf}"])
    with pytest.raises(ValueError, match=r"named twice"):
        movers.correlate(path, ["column:comet", "column:comet"])


def test_records_without_a_score_are_left_out_only_when_asked(tmp_path):
    records = _records(12)
    records[4]["human"] = None
    path = _write(tmp_path / "j.jsonl", records)
    with pytest.raises(ValueError, match=r"line 5: field `human` .* is missing; pass skip_missing=True"):
        movers.correlate(path, "column:comet")
    out = movers.correlate(path, "column:comet", skip_missing=True, resamples=10).to_dict()
    kept = [r for r in records if r["human"] is not None]
    assert out["skipped"] == 1 and abs(out["metrics"]["column:comet"]["pearson"]["value"] - stats.pearsonr(
        [r["comet"] for r in kept], [r["human"] for r in kept])[0]) <= EXACT


def test_csv_tsv_and_parquet_read_as_json_lines_do(tmp_path):
    import csv

    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _records(15, lp=lambda i: "ab"[i % 2])
    want = movers.correlate(_write(tmp_path / "j.jsonl", records), ["column:comet", "sentbleu"], group_by="lp",
                            resamples=30).to_dict()
    for suffix, delimiter in ((".csv", ","), (".tsv", "\t")):
        with open(tmp_path / f"j{suffix}", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(records[0]), delimiter=delimiter)
            writer.writeheader()
            writer.writerows({**r, "references": json.dumps(r["references"])} for r in records)
        got = movers.correlate(tmp_path / f"j{suffix}", ["column:comet", "sentbleu"], group_by="lp", resamples=30)
        assert got.to_dict()["metrics"] == want["metrics"]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "j.parquet")
    got = movers.correlate(tmp_path / "j.parquet", ["column:comet", "sentbleu"], group_by="lp", resamples=30)
    assert got.to_dict()["metrics"] == want["metrics"]
    bad = tmp_path / "bad.csv"
    bad.write_text("prediction,reference,human\na,b,1\nc,d,oops\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.csv, line 3: field `human` .* got 'oops'"):
        movers.correlate(bad, "sentbleu")
    pq.write_table(pa.Table.from_pylist([{**r, "human": None if i == 2 else r["human"]}
                                         for i, r in enumerate(records)]), tmp_path / "gap.parquet")
    with pytest.raises(ValueError, match=r"gap.parquet, row 3: field `human`"):
        movers.correlate(tmp_path / "gap.parquet", "sentbleu")


# ------------------------------------------------------------------ the command, as a person runs it


def _env():
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")


def test_the_command_on_the_docs_example_prints_json_and_draws_the_plot(tmp_path):
    run = run_movers(["correlate", str(EXAMPLE), "-m", "sentbleu", "-m", "chrf", "--compare-to", "sentbleu",
                      "--level", "system", "--input-field", "context", "--format", "json", "--plot", "p.png",
                      "--bootstrap", "200"], env=_env(), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["level"] == "system" and out["n"] == 40 and set(out["metrics"]) == {"sentbleu", "chrf"}
    assert set(out["metrics"]["chrf"]) >= {"pearson", "spearman", "kendall", "pairwise_accuracy"}
    assert set(out["williams"]["chrf"]) >= {"t", "p"} and out["compare_to"] == "sentbleu"
    want = movers.correlate(EXAMPLE, ["sentbleu", "chrf"], level="system", input_field="context",
                            compare_to="sentbleu", resamples=200).to_dict()
    assert out == json.loads(json.dumps(want))  # the command is the function
    from PIL import Image

    with Image.open(tmp_path / "p.png") as image:
        assert image.size[0] > 600 and image.size[1] > 300


def test_the_command_prints_tables_and_refuses_bad_input_in_one_line(tmp_path):
    run = run_movers(["correlate", str(EXAMPLE), "-m", "sentbleu", "-m", "chrf", "--compare-to", "sentbleu"],
                     env=_env(), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("judgments.jsonl: 40 records, human score `human`\nsegment level: 40 segments")
    assert "Williams t (df)" in run.stdout and "nan" not in run.stdout.lower()
    records = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
    records[11]["human"] = "NaN"
    _write(tmp_path / "bad.jsonl", records)
    bad = run_movers(["correlate", "bad.jsonl", "-m", "chrf"], env=_env(), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("movers correlate: error: bad.jsonl, line 12: field `human` (the human score) must be a "
                          "finite number, got 'NaN'.\n")
    piped = run_movers(["correlate", "-", "-m", "chrf", "--format", "json"], stdin=EXAMPLE.read_text(encoding="utf-8"),
                       env=_env(), cwd=tmp_path)  # standard input, as JSON Lines
    assert piped.returncode == 0 and json.loads(piped.stdout)["n"] == 40
    bad_pipe = run_movers(["correlate", "-", "-m", "chrf"], stdin='{"prediction": "a"}\n', env=_env(), cwd=tmp_path)
    assert bad_pipe.returncode == 2 and "<stdin>, line 1: the record has no reference" in bad_pipe.stderr
    opt = run_movers(["correlate", str(EXAMPLE), "-m", "moverscore", "--opt", "idff=1"], env=_env(), cwd=tmp_path)
    assert opt.returncode == 2 and opt.stderr.startswith("movers correlate: error: --opt idff=1: unknown option")


def test_the_help_names_the_command_and_its_defaults():
    from movers.cli import USAGE
    from movers.cli.correlate import _parser

    assert "movers correlate JUDGMENTS.jsonl" in USAGE
    text = _parser().format_help()
    assert f"default {core.RESAMPLES}" in text and f"default {core.SEED}" in text
    assert _parser().get_default("level") == core.LEVELS[0] == "segment"


def test_the_page_states_the_declared_defaults():
    """docs/human-judgments.md restates the defaults; they are declared once, in movers.core.agreement."""
    page = (REPO / "docs" / "human-judgments.md").read_text(encoding="utf-8")
    assert f"{core.CONFIDENCE:.0%} percentile bootstrap intervals from {core.RESAMPLES:,} resamples" in page
    assert f"`default_rng({core.SEED})`" in page
    assert f"fewer than {core.MIN_POINTS} points" in page and f"fewer than {core.MIN_POINTS} outputs" in page
    assert f"({core.RESAMPLES} resamples, seed {core.SEED})" in page  # the command's header, as printed
    # the Williams test is defined from 4 points (n - 3 degrees of freedom), as the page says
    assert not math.isnan(core.williams_test(0.5, 0.4, 0.3, 4)[1])
    assert math.isnan(core.williams_test(0.5, 0.4, 0.3, 3)[1])
    assert "at least 4 points" in page


def test_a_progress_bar_while_the_metrics_score(capsys):
    movers.correlate(EXAMPLE, "sentbleu", resamples=10, progress=True)
    err = capsys.readouterr().err
    assert "movers: sentbleu" in err and "40/40" in err
    movers.correlate(EXAMPLE, "sentbleu", resamples=10)  # off by default in Python
    assert capsys.readouterr().err == ""
