"""The command line, run for real: ``python -m movers ...`` in a subprocess on files written here.

Texts are WMT15/16 pairs of the committed fixtures (tests/reference) or are written by the test. Expected scores come from the Python API on the same texts (equal to 1e-9); error cases
must print exactly one line on stderr and nothing on stdout.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import movers

from .support.cli_process import run_movers, run_python
from .helpers import real_pairs, regrouped

_ROOT = Path(movers.__file__).resolve().parents[1]  # the movers this process imported
# A source checkout (shared/) goes on the subprocess's path; an installed movers is found by the same
# interpreter anyway, and putting site-packages first would shadow the standard library (moverscore 1.0.3
# installs the old `typing` backport there).
_PATH = {"PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH", "")) if p)} \
    if "site-packages" not in _ROOT.parts else {}


def run(*args: str, stdin: str | None = None, env: dict | None = None, cwd: Path | None = None, real: bool = False):
    """``movers ARGS`` as a process of its own: forked from the tests' fork server (tests/support/cli_process.py), or
    ``python -m movers`` itself with `real` (and where `env` changes what libraries read when imported)."""
    full_env = {**os.environ, **_PATH,
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"), **(env or {})}
    return run_movers(list(args), stdin=stdin if stdin is not None else "", env=full_env, cwd=cwd, real=real)


def one_line_error(proc, prefix: str = "movers score: error: ") -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def wmt(tmp_path_factory):
    """12 WMT15/16 (development) hypotheses, their references, and a second reference stream."""
    hyps, refs = real_pairs("wmt15_16", 12)
    refs2 = [refs[(i + 1) % len(refs)] for i in range(len(refs))]
    folder = tmp_path_factory.mktemp("wmt")
    for name, lines in (("hyps.txt", hyps), ("refs.txt", refs), ("refs2.txt", refs2)):
        (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder, hyps, refs, refs2


@pytest.mark.invariance
@pytest.mark.slow
def test_json_per_segment_equals_the_python_api_for_several_metrics_and_references(wmt):
    folder, hyps, refs, refs2 = wmt
    proc = run("score", "-m", "moverscore", "-m", "twmd", "-m", "delta_bleu", "-r", str(folder / "refs.txt"),
               "-r", str(folder / "refs2.txt"), "-c", str(folder / "hyps.txt"), "--format", "json",
               "--per-segment", "--opt", "moverscore.preset=1.0.3", "--opt", "reference_aggregation=max")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == ["moverscore", "twmd", "delta_bleu"]
    groups = [[a, b] for a, b in zip(refs, refs2)]
    expected = {"moverscore": movers.moverscore(hyps, groups, preset="1.0.3", reference_aggregation="max"),
                "twmd": movers.twmd(hyps, groups, reference_aggregation="max"),
                "delta_bleu": movers.delta_bleu(hyps, groups)}
    for slug, api in expected.items():
        assert set(out[slug]) == {"score", "signature", "scores"}
        assert out[slug]["signature"] == api.signature
        # the command embeds the texts once for all metrics, in other batches than each call alone
        assert out[slug]["score"] == regrouped(api.score) and out[slug]["scores"] == regrouped(api.scores)
    assert out["delta_bleu"]["scores"] == expected["delta_bleu"].scores  # counts: bit for bit
    assert "|nrefs:2|" in out["moverscore"]["signature"] and "preset:1.0.3" in out["moverscore"]["signature"]


@pytest.mark.invariance
@pytest.mark.slow
def test_stdin_and_a_bootstrap_interval_of_the_mean(wmt, torch_threads):
    folder, hyps, refs, _ = wmt
    api = movers.moverscore(hyps, refs)
    # the command reading its standard input, in a process forked from the fork server (python -m movers itself
    # reads a pipe in tests/test_reliability.py); the re-runs under other kernels and thread counts
    # (tests/test_any_cpu.py, torch_threads set) check the numbers, in a process forked with their settings
    ci = run("score", "-m", "moverscore", "-r", str(folder / "refs.txt"), "-f", "csv", "--confidence",
             "--confidence-n", "200", "--seed", "7", stdin=(folder / "hyps.txt").read_text(encoding="utf-8"))
    assert ci.returncode == 0, ci.stderr
    header, row = list(csv.reader(io.StringIO(ci.stdout)))
    got = dict(zip(header, row))
    # the documented procedure, written out: resample segments with replacement, mean, 2.5/97.5 percentiles
    idx = np.random.default_rng(7).integers(0, len(hyps), size=(200, len(hyps)))
    means = np.asarray(api.scores)[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    # another process and other encoder batches: the reproducibility rule (means and percentiles of scores
    # that each move by at most the bound move by at most the bound)
    assert float(got["score"]) == regrouped(api.score) and float(got["mean"]) == regrouped(means.mean())
    assert float(got["low"]) == regrouped(low) and float(got["high"]) == regrouped(high)
    assert float(got["half_width"]) == regrouped((high - low) / 2)
    assert low < api.score < high and got["signature"] == api.signature


def test_text_and_tsv_output(wmt):
    folder, hyps, refs, _ = wmt
    api = movers.delta_bleu(hyps, refs)
    args = ("score", "-m", "delta_bleu", "-r", str(folder / "refs.txt"), "-c", str(folder / "hyps.txt"))
    text = run(*args)
    assert text.returncode == 0, text.stderr
    assert text.stdout == f"{api.signature} = {api.score:.4f}\n"  # sacreBLEU's '<signature> = <score>'
    tsv = run(*args, "-f", "tsv", "--per-segment")
    rows = list(csv.reader(io.StringIO(tsv.stdout), delimiter="\t"))
    assert rows[0] == ["segment", "delta_bleu"] and [r[0] for r in rows[1:]] == [str(i + 1) for i in range(len(hyps))]
    np.testing.assert_allclose([float(r[1]) for r in rows[1:]], api.scores, atol=1e-9, rtol=0)
    corpus = run(*args, "-f", "tsv")
    assert list(csv.reader(io.StringIO(corpus.stdout), delimiter="\t")) == [
        ["metric", "score", "signature"], ["delta_bleu", repr(api.score), api.signature]]


def test_delta_bleu_confidence_recomputes_the_corpus_score_per_resample(tmp_path):
    hyps = ["the cat sat on the mat", "a dog barked", "it rains today", "he went home", "we ate fish"]
    refs = ["the cat sat on a mat", "the dog barked", "it is raining today", "he walked home", "they ate fish"]
    (tmp_path / "h.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    proc = run("score", "-m", "delta_bleu", "-r", str(tmp_path / "r.txt"), "-c", str(tmp_path / "h.txt"),
               "-f", "json", "--confidence", "--confidence-n", "50")
    out = json.loads(proc.stdout)["delta_bleu"]
    idx = np.random.default_rng(12345).integers(0, 5, size=(50, 5))
    corpus = [movers.delta_bleu([hyps[i] for i in row], [refs[i] for i in row]).score for row in idx]
    assert out["confidence"]["mean"] == pytest.approx(np.mean(corpus), abs=1e-9)
    assert out["confidence"]["samples"] == 50 and out["confidence"]["seed"] == 12345
    assert out["score"] == pytest.approx(movers.delta_bleu(hyps, refs).score, abs=1e-9)


@pytest.fixture()
def small(tmp_path):
    (tmp_path / "h.txt").write_text("The cat sat on the mat.\nA dog barked.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("A cat was on the mat.\nThe dog barked loudly.\n", encoding="utf-8")
    (tmp_path / "r3.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "blank_ref.txt").write_text("A cat.\n \n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("args, message", [
    (["-r", "missing.txt", "-c", "h.txt"], "reference file 'missing.txt' does not exist."),
    (["-r", "r.txt", "-c", "nothere.txt"], "hypothesis file 'nothere.txt' does not exist."),
    (["-r", "r.txt", "-c", "empty.txt"], "hypothesis 'empty.txt' is empty; expected one text per line."),
    (["-r", "empty.txt", "-c", "h.txt"], "reference 'empty.txt' is empty"),
    (["-r", "r.txt", "-r", "r3.txt", "-c", "h.txt"],
     "files must have the same number of lines, got h.txt: 2, r.txt: 2, r3.txt: 3."),
    (["-r", "r.txt", "-c", "h.txt", "--opt", "colour=red"], "--opt colour=red: unknown option 'colour' for moverscore; accepted: "),
    (["-r", "r.txt", "-c", "h.txt", "--opt", "n_gram=two"], "--opt n_gram=two: expected an integer, got 'two'."),
    (["-r", "r.txt", "-c", "h.txt", "--opt", "n_gram"], "--opt 'n_gram': expected key=value"),
    (["-r", "r.txt", "-c", "h.txt", "--opt", "twmd.temperature=0.1"], "--opt twmd.temperature=0.1: 'twmd' is not among"),
    (["-r", "r.txt", "-c", "h.txt", "--opt", "preset=newest"], "moverscore: `preset` must be one of ['1.0.3', 'github', 'paper'], got 'newest'."),
    (["-r", "blank_ref.txt", "-c", "h.txt"], "(line 2 of blank_ref.txt)"),
    (["-c", "h.txt"], "pass reference files (-r FILE, repeatable), or a data set with --ray DATA."),
    (["--ray", "nothere.parquet"], "--ray 'nothere.parquet' does not exist."),
    (["--ray", "h.txt", "--per-segment"], "--ray writes the per-row scores with --output DIR; --per-segment, "),
    (["--ray", "h.txt"], "--ray 'h.txt': expected Parquet, JSONL or CSV files (.parquet, .jsonl/.json, .csv)"),
    (["--shard", "-r", "r.txt", "-c", "h.txt", "r.txt"], "--shard keeps each rank's segment scores on that rank"),
    (["-r", "r.txt", "-c", "h.txt", "--weights-column", "w"],
     "--weights-column acts on a data set scored on Ray only: pass --ray DATA, or leave it out"),
    (["-r", "r.txt", "-c", "h.txt", "--address", "auto", "--actors", "2"],
     "--address, --actors act on a data set scored on Ray only"),
    (["-r", "r.txt", "-c", "h.txt", "--output", "out", "--ray-logs"], "--output, --ray-logs act on a data set"),
    (["--ray", "h.txt", "-r", "r.txt"], "--ray DATA scores a data set's columns; -r FILE is for line files"),
    (["--ray", "h.txt", "-c", "h.txt"], "--ray DATA scores a data set's columns; -c FILE is for line files"),
    (["--ray", "h.txt", "--shard"], "--ray DATA scores a data set's columns; --shard is for line files"),
])
def test_bad_paths_options_and_files_give_one_line_errors(small, args, message, monkeypatch, capsys):
    """In process (the same main() as the console script; a subprocess per case would mostly time imports)."""
    from movers.cli import main

    monkeypatch.chdir(small)
    status = main(["score", "-m", "moverscore", *args])
    out, err = capsys.readouterr()
    line = one_line_error(subprocess.CompletedProcess([], status, out, err))
    assert message in line


@pytest.mark.parametrize("args, message", [
    (["-r", "missing.txt", "-c", "h.txt"], "reference file 'missing.txt' does not exist."),
    (["-r", "r.txt", "-c", "empty.txt"], "hypothesis 'empty.txt' is empty; expected one text per line."),
    (["-r", "r.txt", "-c", "h.txt", "--opt", "colour=red"], "--opt colour=red: unknown option 'colour'"),
])
def test_one_line_errors_from_the_real_command(small, args, message):
    line = one_line_error(run("score", "-m", "moverscore", *args, cwd=small, real=True))  # python -m movers
    assert message in line


def test_no_hypotheses_on_an_empty_stdin(small):
    line = one_line_error(run("score", "-m", "moverscore", "-r", "r.txt", cwd=small, stdin=""))
    assert "'<stdin>' is empty" in line


def test_unknown_metric_is_a_usage_error(small):
    proc = run("score", "-m", "bleu", "-r", "r.txt", "-c", "h.txt", cwd=small)
    assert proc.returncode == 2 and "invalid choice: 'bleu'" in proc.stderr and proc.stdout == ""


def test_version_and_plain_text_help():
    proc = run("--version", real=True)  # python -m movers itself
    assert proc.returncode == 0 and proc.stdout == f"movers {movers.__version__}\n"
    helptext = run("--help")
    assert helptext.returncode == 0 and "movers score" in helptext.stdout
    assert "`" not in helptext.stdout  # plain text, no reStructuredText markup
    score_help = run("score", "--help")
    assert score_help.returncode == 0 and "--confidence" in score_help.stdout


def test_the_studies_and_the_site_point_to_the_checkout():
    """The studies and the documentation site need the repository (its data, pages and cards), so they are no
    commands of the installed package: `movers bench` and `movers docs` say in one line where they run."""
    for command in ("bench", "docs"):
        line = one_line_error(run(command, "correlation"), prefix=f"movers: error: `movers {command}` runs from a "
                                                                  f"checkout of the repository")
        assert "python -m shared.bench" in line


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["moverscore", "sms", "s_wms", "twmd", "lazy_emd"])
def test_explain_writes_the_plan_of_the_scored_pair(tmp_path, metric, capsys):
    """In process for all five (same main() as the console script); the real command once, below."""
    from movers.cli import main

    hyp, ref = "The cat sat on the mat.", "A cat was sitting on the mat."
    png = tmp_path / "plan.png"
    assert main(["explain", "-m", metric, hyp, ref, "-o", str(png), "-f", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    api = getattr(movers, metric)([hyp], [ref])
    assert got["score"] == pytest.approx(api.scores[0], abs=1e-9) and got["signature"] == api.signature
    plan = np.asarray(got["plan"])
    assert plan.shape == (len(got["prediction_labels"]), len(got["reference_labels"])) and plan.sum() > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@pytest.mark.slow
def test_explain_command_text_output(tmp_path):
    hyp, ref = "The cat sat on the mat.", "A cat was sitting on the mat."
    proc = run("explain", "-m", "moverscore", hyp, ref, "-o", str(tmp_path / "plan.png"))
    assert proc.returncode == 0, proc.stderr
    e = movers.explain("moverscore", hyp, ref)
    lines = proc.stdout.splitlines()
    assert lines[0] == f"moverscore = {e.score:.4f} (distance {e.distance:.4f}, cost euclidean)"
    assert lines[-2] == e.signature and lines[-1] == f"wrote {tmp_path / 'plan.png'}"
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"


def test_explain_errors_are_one_line(capsys):
    from movers.cli import main

    for args, message in ((["  ", "A cat."], "the prediction is empty"),
                          (["A cat.", "A dog.", "--opt", "colour=red"], "unknown option 'colour'")):
        status = main(["explain", "-m", "moverscore", *args])
        out, err = capsys.readouterr()
        line = one_line_error(subprocess.CompletedProcess([], status, out, err), prefix="movers explain: error: ")
        assert message in line
    proc = run("explain", "-m", "delta_bleu", "A cat.", "A dog.")
    assert proc.returncode == 2 and "invalid choice: 'delta_bleu'" in proc.stderr


COUNTING = """
import sys
from transformers.models.bert import modeling_bert
rows = [0]
forward = modeling_bert.BertModel.forward
def counted(self, *args, **kwargs):
    rows[0] += len({tuple(row.tolist()) for row in kwargs["input_ids"]})
    return forward(self, *args, **kwargs)
modeling_bert.BertModel.forward = counted
from movers.cli import main
status = main(sys.argv[1:])
print(f"forward rows: {rows[0]}", file=sys.stderr)
sys.exit(status)
"""


@pytest.mark.invariance
@pytest.mark.slow
def test_several_metrics_share_one_encoder_pass(wmt):
    """moverscore, twmd and lazy_emd use the same encoder: the model sees each unique text once."""
    folder, hyps, refs, _ = wmt
    env = {**os.environ, **_PATH}
    proc = run_python(COUNTING, ["score", "-m", "moverscore", "-m", "twmd", "-m", "lazy_emd", "-r",
                                 str(folder / "refs.txt"), "-c", str(folder / "hyps.txt"), "-f", "json",
                                 "--per-segment"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"forward rows: {len(set(hyps + refs))}"  # not 3x
    out = json.loads(proc.stdout)
    for slug in ("moverscore", "twmd", "lazy_emd"):
        api = getattr(movers, slug)(hyps, refs)
        assert out[slug]["scores"] == regrouped(api.scores)  # one encoder pass for three metrics: other batches
        assert out[slug]["signature"] == api.signature


def test_score_help_prints_percent_signs_once(capsys):
    """argparse %-formats help strings but prints the epilog as written: one '%' each in the output."""
    from movers.cli import main

    assert main(["score", "--help"]) == 0
    out = capsys.readouterr().out
    assert "95% percentile interval" in " ".join(out.split()) and "%%" not in out


def test_crlf_cr_and_lf_files_give_the_same_lines(tmp_path):
    """Old Mac (CR) and Windows (CRLF) line ends read as LF does: the same lines, the same scores."""
    hyps, refs = ["The cat sat.", "A dog ran away.", "Rain."], ["A cat sat.", "The dog ran.", "It rained."]
    for name, end in (("lf", "\n"), ("crlf", "\r\n"), ("cr", "\r")):
        (tmp_path / f"h_{name}.txt").write_bytes(end.join(hyps).encode() + end.encode())
        (tmp_path / f"r_{name}.txt").write_bytes(end.join(refs).encode())  # no final line end
    outs = {}
    for name in ("lf", "crlf", "cr"):
        proc = run("score", "-m", "delta_bleu", "-r", f"r_{name}.txt", "-c", f"h_{name}.txt", "-f", "json",
                   "--per-segment", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        outs[name] = json.loads(proc.stdout)["delta_bleu"]
    want = movers.delta_bleu(hyps, refs)
    assert outs["lf"] == outs["crlf"] == outs["cr"] and outs["lf"]["scores"] == want.scores
    from movers.cli.common import read_lines

    (tmp_path / "bad.txt").write_bytes(b"ok\rok\r\xff\r")
    with pytest.raises(Exception, match="line 3 has invalid start byte"):
        read_lines(str(tmp_path / "bad.txt"), "hypothesis")


def test_help_texts_unknown_commands_and_option_lists():
    score_help = run("score", "--help").stdout
    flat = " ".join(score_help.split())
    assert "-f {text,json,tsv,csv,latex}, --format {text,json,tsv,csv,latex} text (default:" in flat
    assert "--list-options SLUG" in flat
    demo = " ".join(run("demo", "--help").stdout.split())
    assert "--metric SLUG the evaluate module loaded by its bare name" in demo and "delta_bleu" in demo
    unknown = run("foo")
    assert unknown.returncode == 2 and unknown.stderr.startswith("movers: error: unknown command 'foo'")
    assert "movers score -m SLUG" in unknown.stdout
    listed = run("score", "--list-options", "twmd")
    assert listed.returncode == 0 and listed.stdout.startswith("twmd (--opt KEY=VALUE or --opt twmd.KEY=VALUE):")
    # every option --opt accepts is listed, with its default, and nothing else
    from movers.cli.common import cli_options

    names = re.findall(r"^  (\w+)=", listed.stdout, re.M)
    assert names and sorted(names) == sorted(cli_options(movers.metrics.get("twmd")))
    assert '  temperature=NUMBER  (default null)' in listed.stdout and "  variant=twmd|trwmd  (default \"twmd\")" \
        in listed.stdout


def test_width_rounds_the_data_formats(tmp_path):
    (tmp_path / "h.txt").write_text("The cat sat.\nA dog ran.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("A cat sat.\nThe dog ran away.\n", encoding="utf-8")
    args = ("score", "-m", "delta_bleu", "-r", "r.txt", "-c", "h.txt", "--per-segment")
    full = json.loads(run(*args, "-f", "json", cwd=tmp_path).stdout)["delta_bleu"]
    short = json.loads(run(*args, "-f", "json", "-w", "2", cwd=tmp_path).stdout)["delta_bleu"]
    assert short["scores"] == [round(s, 2) for s in full["scores"]] and short["score"] == round(full["score"], 2)
    assert full["scores"] == movers.delta_bleu(["The cat sat.", "A dog ran."], ["A cat sat.", "The dog ran away."]).scores
    rows = list(csv.reader(io.StringIO(run(*args, "-f", "csv", "-w", "1", cwd=tmp_path).stdout)))
    assert rows[1][1] == repr(round(full["scores"][0], 1))


def _data_files(folder: Path) -> dict[str, Path]:
    """Files of 12 WMT pairs with one problem each, for ``movers score --ray`` (the good one has none)."""
    import pandas as pd

    hyps, refs = real_pairs("wmt15_16", 12)
    rows = [{"prediction": h, "reference": [r], "i": i} for i, (h, r) in enumerate(zip(hyps, refs, strict=True))]

    def jsonl(name: str, lines: list) -> Path:
        path = folder / name
        path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                        encoding="utf-8")
        return path

    files = {"good": jsonl("good.jsonl", rows), "empty": jsonl("empty.jsonl", [])}
    files["cut"] = jsonl("cut.jsonl", [*rows[:7], json.dumps(rows[7])[:30], *rows[8:]])
    files["kinds"] = jsonl("kinds.jsonl", [dict(r, reference=r["reference"][0]) if k % 2 else r
                                           for k, r in enumerate(rows)])
    files["null"] = jsonl("null.jsonl", [dict(r, prediction=None) if k == 5 else r for k, r in enumerate(rows)])
    files["int"] = jsonl("int.jsonl", [dict(r, prediction=7) if k == 5 else r for k, r in enumerate(rows)])
    files["noref"] = jsonl("noref.jsonl", [{"prediction": r["prediction"]} if k == 5 else r for k, r in enumerate(rows)])
    files["array"] = jsonl("array.jsonl", [[r["prediction"]] if k == 5 else r for k, r in enumerate(rows)])
    raw = files["good"].read_bytes().split(b"\n")
    raw[6] = raw[6][:20] + b"\xff" + raw[6][20:]
    files["utf8"] = folder / "utf8.jsonl"
    files["utf8"].write_bytes(b"\n".join(raw))
    files["header"] = folder / "header.csv"
    files["header"].write_text("prediction,reference\n", encoding="utf-8")
    files["numbers"] = folder / "numbers.csv"
    frame = pd.DataFrame({"prediction": hyps, "reference": refs})
    frame.assign(prediction=range(len(hyps))).to_csv(files["numbers"], index=False)
    files["csv_utf8"] = folder / "bytes.csv"
    files["csv_utf8"].write_bytes(b"prediction,reference\nok,fine\nbad \xff,fine\n")
    files["parquet_int"] = folder / "int.parquet"
    frame.assign(prediction=range(len(hyps))).to_parquet(files["parquet_int"])
    files["parquet_null"] = folder / "null.parquet"
    frame.assign(prediction=[None if k == 5 else h for k, h in enumerate(hyps)]).to_parquet(files["parquet_null"])
    return files


RAY_FILE_PROBLEMS = [  # (file, extra arguments, the one line's text after "--ray file '<path>'")
    ("empty", [], r" is empty; expected one JSON object per line\."),
    ("cut", [], r": line 8 is not JSON \(.*\); expected one JSON object per line\."),
    ("utf8", [], r" is not UTF-8 text: line 7 has invalid start byte .*"),
    ("kinds", [], r", line 2: 'reference' is a string, but --ray file '.*', line 1 has a list; Ray's readers need one "
                  r"type per column: make it a list in every row\."),
    ("null", [], r", line 6: 'prediction' is null; expected a string \(the prediction\)\."),
    ("int", [], r", line 6: 'prediction' is 7; expected a string \(the prediction\)\."),
    ("noref", [], r", line 6 has no reference in 'reference'; every row needs one\."),
    ("array", [], r": line 6 is a JSON list, not an object; expected one JSON object per line\."),
    ("good", ["--prediction-column", "hyp"], r", line 1 has no 'hyp' \(its keys: i, prediction, reference\); "
                                             r"every row needs one\."),
    ("good", ["--index-column", "prediction", "-m", "twmd"], r", line 1: the index column 'prediction' is '.*; "
                                                             r"expected each row's position, an int 0, 1, \.\.\."),
    ("header", [], r" has a header only; expected a header and one row per pair\."),
    ("numbers", [], r", line 2: 'prediction' is 0; expected a string \(the prediction\)\."),
    ("csv_utf8", [], r" is not UTF-8 text: line 3 has invalid start byte .*"),
    ("parquet_int", [], r", row 1: 'prediction' is 0; expected a string \(the prediction\)\."),
    ("parquet_null", [], r", row 6: 'prediction' is null; expected a string \(the prediction\)\."),
]


@pytest.mark.parametrize("name,extra,said", RAY_FILE_PROBLEMS,
                         ids=[f"{name}{'-' + extra[0].strip('-') if extra else ''}" for name, extra, _ in
                              RAY_FILE_PROBLEMS])
def test_ray_file_problems_are_one_line_naming_the_file_and_line_before_any_cluster(tmp_path, name, extra, said):
    """Every file problem of ``--ray`` is one line naming the file and the line (JSONL, CSV) or row (Parquet), read
    before a cluster is started or joined: $RAY_ADDRESS names a closed port, which a command that got that far
    would fail to reach with another message. Before: tracebacks of 31 to 304 lines from inside Ray's readers."""
    files = _data_files(tmp_path)
    slug = [] if "-m" in extra else ["-m", "delta_bleu"]
    proc = run("score", "--ray", str(files[name]), *slug, *extra, env={"RAY_ADDRESS": "127.0.0.1:9"})
    line = one_line_error(proc)
    assert re.fullmatch(r"movers score: error: --ray file " + re.escape(repr(str(files[name]))) + said, line), line


@pytest.mark.parametrize("extra,said", [
    (["--actors", "0"], r"--actors must be >= 1, got 0\."),
    (["--actors", "-2"], r"--actors must be >= 1, got -2\."),
    (["-m", "twmd"], r"twmd: centering='batch' averages runs of 32 consecutive rows of the input, and a Ray dataset "
                     r"keeps no row order .*; pass --index-column NAME \(index=\)<a column with each row's position "
                     r"0, 1, \.\.\.>, or use centering='corpus' or a fitted table\."),
    (["-m", "moverscore", "--opt", "baseline=fit"], r"moverscore: baseline='fit' is fitted on random pairs of the whole "
                                                    r"call's texts, which no block holds; .*"),
    (["--opt", "max_ngram_order=0"], r"delta_bleu: `max_ngram_order` must be .*"),
])
def test_ray_refusals_of_the_options_come_before_any_cluster(tmp_path, extra, said):
    """A refusal that depends on the options alone is one line before a cluster is started or joined (before: TWMD
    without an index column was refused after 36.6 s, once a local cluster had started; --actors 0 printed a
    Python tuple)."""
    files = _data_files(tmp_path)
    slug = [] if "-m" in extra else ["-m", "delta_bleu"]
    proc = run("score", "--ray", str(files["good"]), *slug, *extra, env={"RAY_ADDRESS": "127.0.0.1:9"})
    assert re.fullmatch(r"movers score: error: " + said, one_line_error(proc)), proc.stderr
