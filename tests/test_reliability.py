"""Reliability where real use goes: one module object shared by threads, Unicode normal forms,
huge single texts and invalid code points through both APIs and the command line, a broken evaluate cache
(HF_HOME), garbage fitted tables, and Lazy-EMD's self-distance bound on long texts.

Expected values come from elsewhere than the code under test: a serial call on the same object (threads),
sacreBLEU on the raw or composed text (ΔBLEU), the originals' rule "a word must be str.isalpha" applied by
hand (SMS family with unicode="none"), the entropic-OT bound eps * ln L (Lazy-EMD), file hashes (cache).
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import time
import unicodedata
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import sacrebleu
import torch

import movers
from movers.core.validation import MAX_TEXT_CHARS
from movers.integrations.hub import loading as hub

from .test_cli import _PATH, one_line_error, run

METRICS = ["moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"]
SENTENCES = [
    "The cat sat on the mat.", "A dog was running in the park.", "Stock markets fell sharply on Monday.",
    "The committee approved the new budget.", "It rained all day in the city.", "She plays the violin well.",
    "Scientists found water on the distant planet.", "The train arrived ten minutes late.",
    "He repaired the old bicycle himself.", "Children were laughing in the garden.",
    "The museum opened a new wing.", "Prices of fresh fruit went up again.",
]


def _env(**extra: str) -> dict:
    return {**os.environ, **_PATH, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"), **extra}


# ------------------------------------------------------------------------------------------ threads


@pytest.mark.slow
@pytest.mark.parametrize("metric", METRICS)
def test_threads_share_one_module_object(metric):
    """4 threads x 5 rounds of compute(predictions=..., references=...) on one evaluate module object: each
    caller gets exactly the result a serial call on that object gives for its own inputs (before the fix:
    SIGBUS/SIGSEGV in pyarrow, or another thread's numbers with no error)."""
    module = movers.load(metric)
    jobs = []
    for t in range(4):  # each thread its own inputs, of another size
        n = 3 + t
        preds = [SENTENCES[(t + i) % len(SENTENCES)] for i in range(n)]
        refs = [SENTENCES[(t + i + 5) % len(SENTENCES)] for i in range(n)]
        jobs.append((preds, refs))
    expected = [module.compute(predictions=p, references=r) for p, r in jobs]
    got: dict[tuple[int, int], object] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work(t: int) -> None:
        try:
            barrier.wait()
            for k in range(5):
                got[t, k] = module.compute(predictions=jobs[t][0], references=jobs[t][1])
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=600)
    assert not errors, errors
    assert len(got) == 20
    for (t, k), out in got.items():
        assert out == expected[t], (metric, t, k)


def test_added_examples_are_kept_apart_from_direct_calls():
    """add_batch accumulates on the object under its lock; a concurrent compute with inputs and nothing added
    does not see them (it never touches the writer), and the accumulated compute equals one direct call."""
    module = movers.load("delta_bleu")
    preds, refs = SENTENCES[:6], SENTENCES[6:]
    module.add_batch(predictions=preds[:3], references=refs[:3])
    module.add_batch(predictions=preds[3:], references=refs[3:])
    assert module.compute()["score"] == sacrebleu.corpus_bleu(preds, [refs]).score
    assert module.compute(predictions=preds[:2], references=refs[:2])["score"] == \
        sacrebleu.corpus_bleu(preds[:2], [refs[:2]]).score


# ------------------------------------------------------------------------------------------ Unicode

NFC = ["Dvořák's résumé was naïve. The café opened.", "Zoë met Søren in Malmö. Crème brûlée followed."]
REFS = ["Dvořák's résumé was naive. The café opened late.", "Zoë met Søren at Malmö. Crème brûlée came next."]
NFD = [unicodedata.normalize("NFD", t) for t in NFC]


def _without_decomposed_words(text: str) -> str:
    """The originals' view of an NFD text: a word holding a combining mark fails str.isalpha and is dropped
    (its punctuation stays, so sentences end where they did)."""
    def keep(word: str) -> str:
        return word if unicodedata.normalize("NFD", word) == word else "".join(c for c in word if not c.isalpha())
    return " ".join(keep(w) for w in text.split())


@pytest.mark.parametrize("metric", METRICS)
def test_nfd_text_scores_as_its_nfc_form(metric):
    """unicode="nfc" (the default): the decomposed text scores exactly as the composed one, in both APIs,
    and the signature says so."""
    fn = getattr(movers, metric)
    composed, decomposed = fn(NFC, REFS), fn(NFD, REFS)
    assert decomposed.scores == composed.scores
    assert "|unicode:nfc|" in composed.signature
    module = movers.load(metric).compute(predictions=NFD, references=[unicodedata.normalize("NFD", r) for r in REFS])
    assert module["scores"] == composed.scores


def test_unicode_none_is_the_originals_behaviour():
    # ΔBLEU: sacreBLEU does not normalise; "none" is sacreBLEU on the raw text, "nfc" on the composed text
    assert movers.delta_bleu(NFD, REFS, unicode="none").score == sacrebleu.corpus_bleu(NFD, [REFS]).score
    assert movers.delta_bleu(NFD, REFS).score == sacrebleu.corpus_bleu(NFC, [REFS]).score
    assert sacrebleu.corpus_bleu(NFD, [REFS]).score < sacrebleu.corpus_bleu(NFC, [REFS]).score - 10
    # SMS family: the original drops words that are not str.isalpha, which decomposed words are not
    for metric in ("sms", "s_wms", "wms"):
        fn = getattr(movers, metric)
        raw = fn(NFD, REFS, unicode="none")
        assert raw.scores == fn([_without_decomposed_words(t) for t in NFC], REFS, unicode="none").scores
        assert all(a < b for a, b in zip(raw.scores, fn(NFC, REFS).scores, strict=True))
        assert "|unicode:none|" in raw.signature
    # Contextual metrics: MiniLM's uncased tokenizer strips accents itself, so both forms give one score
    for metric in ("moverscore", "twmd", "lazy_emd"):
        fn = getattr(movers, metric)
        assert fn(NFD, REFS, unicode="none").scores == fn(NFC, REFS).scores


def test_unicode_option_is_checked():
    with pytest.raises(ValueError, match=r"`unicode` must be one of \['nfc', 'none'\], got 'nfkc'"):
        movers.sms(NFC, REFS, unicode="nfkc")


# ------------------------------------------------------------------------------------------ one text's size


@pytest.mark.parametrize("metric", METRICS)
def test_a_text_over_the_limit_is_refused_in_seconds(metric):
    """Refused before tokenisation in both APIs (a 4.4 MB line ran the encoder out of memory after 369 s,
    a 50 MB line aborted the process in the tokenizer)."""
    huge = "word " * (MAX_TEXT_CHARS // 5 + 1)
    fn, module = getattr(movers, metric), movers.load(metric)
    for call in (lambda: fn([huge], [SENTENCES[0]]),
                 lambda: module.compute(predictions=[SENTENCES[0]], references=[[SENTENCES[1], huge]])):
        start = time.monotonic()
        with pytest.raises(ValueError, match=rf"above the limit of {MAX_TEXT_CHARS:,}; .*MOVERS_MAX_TEXT_CHARS"):
            call()
        assert time.monotonic() - start < 5


def test_the_limit_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("MOVERS_MAX_TEXT_CHARS", "10")
    with pytest.raises(ValueError, match=r"`references\[1\]\[0\]` has 11 characters, above the limit of 10"):
        movers.delta_bleu(["a", "b"], ["a", "x" * 11])
    assert movers.delta_bleu(["a"], ["x" * 10]).score == sacrebleu.corpus_bleu(["a"], [["x" * 10]]).score
    monkeypatch.setenv("MOVERS_MAX_TEXT_CHARS", "lots")
    with pytest.raises(ValueError, match=r"MOVERS_MAX_TEXT_CHARS must be a positive integer, got 'lots'"):
        movers.delta_bleu(["a"], ["b"])


def test_streaming_errors_name_the_row_of_the_stream():
    rows = SENTENCES[:5] + ["a\ud800b"]
    with pytest.raises(ValueError, match=r"`predictions\[5\]` must be valid Unicode text"):
        movers.score_stream("sms", rows, SENTENCES[:6], block_size=2)


def test_cli_refuses_a_huge_line_and_invalid_utf8_in_one_line(tmp_path):
    (tmp_path / "r.txt").write_text("A ref.\nAnother ref.\n", encoding="utf-8")
    (tmp_path / "huge.txt").write_text("Fine.\n" + "word " * (MAX_TEXT_CHARS // 5 + 1) + "\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"Fine.\nnot \xff utf-8\n")
    start = time.monotonic()
    line = one_line_error(run("score", "-m", "moverscore", "-r", "r.txt", "-c", "huge.txt", cwd=tmp_path))
    assert f"`predictions[1]` has {MAX_TEXT_CHARS + 5:,} characters, above the limit" in line
    assert "MOVERS_MAX_TEXT_CHARS" in line and line.endswith("(line 2 of huge.txt)")
    assert time.monotonic() - start < 60  # a process start and an import; the model never loads
    line = one_line_error(run("score", "-m", "delta_bleu", "-r", "r.txt", "-c", "bad.txt", cwd=tmp_path))
    assert line.endswith("hypothesis file 'bad.txt' is not UTF-8 text: line 2 has invalid start byte at byte 10 "
                         "of the input.")
    # standard input follows the same rule (it was decoded with surrogateescape and scored)
    for data, reason in ((b"Fine.\nnot \xff utf-8\n", "invalid start byte"),
                         (b"Fine.\n\xed\xa0\x80 surrogate\n", "invalid continuation byte")):
        proc = subprocess.run([sys.executable, "-m", "movers", "score", "-m", "delta_bleu", "-r", "r.txt", "-c",
                               "-"], input=data, capture_output=True, env=_env(), cwd=tmp_path, timeout=300)
        line = one_line_error(subprocess.CompletedProcess([], proc.returncode, proc.stdout.decode(),
                                                          proc.stderr.decode()))
        assert f"hypothesis <stdin> is not UTF-8 text: line 2 has {reason}" in line


# ------------------------------------------------------------------------------------------ fitted tables


def test_garbage_idf_tables_are_refused():
    table = movers.Idf.fit(SENTENCES)
    token = next(iter(table.weights))
    garbage = {
        "NaN weight": replace(table, weights={**table.weights, token: math.nan}),
        "all negative": replace(table, weights={t: -w - 1 for t, w in table.weights.items()}),
        "one negative": replace(table, weights={**table.weights, token: -0.5}),
        "infinite default": replace(table, default=math.inf),
    }
    for what, bad in garbage.items():
        for metric in ("moverscore", "lazy_emd"):
            with pytest.raises(ValueError, match=r"`idf` must hold finite, non-negative weights"):
                getattr(movers, metric)(SENTENCES[:2], SENTENCES[2:4], idf=bad)
    with pytest.raises(ValueError, match=r"Idf.fit: `texts\[1\]` must be valid Unicode text"):
        movers.Idf.fit(["fine", "a\ud800"])
    assert movers.Idf.fit(NFD).weights == movers.Idf.fit(NFC).weights  # fitted after the same NFC rule


def test_garbage_centring_tables_are_refused():
    table = movers.TwmdCentering.fit(SENTENCES[:4], SENTENCES[4:8])
    for bad in (replace(table, prediction_mean=torch.full_like(table.prediction_mean, math.nan)),
                replace(table, reference_mean=table.reference_mean[:10]),
                replace(table, reference_mean=table.reference_mean.clone().fill_(math.inf))):
        with pytest.raises(ValueError, match=r"`centering` must hold two finite mean vectors"):
            movers.twmd(SENTENCES[:2], SENTENCES[2:4], centering=bad)
    fitted = movers.fit_centering("moverscore", SENTENCES[:4], SENTENCES[4:8])
    with pytest.raises(ValueError, match=r"`centering` must hold two finite mean vectors"):
        movers.moverscore(SENTENCES[:2], SENTENCES[2:4],
                          centering=replace(fitted, prediction_mean=fitted.prediction_mean * math.nan))


# ------------------------------------------------------------------------------------------ Lazy-EMD bound


@pytest.mark.slow
@pytest.mark.parametrize("text", ["cat " * 2000, "the cat sat on the mat . " * 120, " ".join(SENTENCES * 6)])
def test_lazy_emd_self_distance_is_within_the_entropic_bound(text):
    """The card's bound for a text against itself: eps * ln L with L its real tokens (one word 2,000 times
    scored 0.0182, five times the old flat statement); the whole text read."""
    out = movers.lazy_emd([text], [text], long_texts="window")
    encoder = movers.text.embedding.load_encoder(None)
    length = len(encoder.tokenize([text])[0])
    assert 0.0 <= out.scores[0] <= 0.009 * math.log(length), (length, out.scores[0])


# ------------------------------------------------------------------------------------------ HF_HOME faults

BROKEN_HOME = r"""
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import movers
    direct = movers.load("delta_bleu").compute(predictions=["a b c d"], references=["a b c e"])["score"]
    module = movers.load("delta_bleu")
    module.add_batch(predictions=["a b c d"], references=["a b c e"])
    added = module.compute()["score"]
print(json.dumps({"direct": direct, "added": added,
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}))
"""


@pytest.mark.system
@pytest.mark.slow
def test_a_broken_hf_home_still_scores_and_says_where(tmp_path):
    """HF_HOME is a file (as broken as it gets; root ignores read-only modes): import movers says once that it
    cannot register, movers.load builds the module in memory, added examples stay in memory; `movers register`
    answers in one line. HF_HOME is read when evaluate is imported, so each step is a fresh process: a system
    test; a plain run checks the registration's two answers in this process (below)."""
    broken = tmp_path / "hf-home"
    broken.write_text("not a folder")
    env = _env(HF_HOME=str(broken))
    env.pop("HF_MODULES_CACHE", None)
    env.pop("MOVERS_NO_AUTOREGISTER", None)
    proc = subprocess.run([sys.executable, "-c", BROKEN_HOME], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    want = sacrebleu.corpus_bleu(["a b c d"], [["a b c e"]]).score
    assert out["direct"] == out["added"] == want
    messages = out["warnings"]
    assert any(m.startswith(f"movers: could not register the evaluate modules in {broken / 'modules'}")
               for m in messages), messages
    assert any("built in memory instead" in m for m in messages), messages
    assert all("\n" not in m for m in messages)
    proc = subprocess.run([sys.executable, "-m", "movers", "register"], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    line = one_line_error(proc, prefix="movers register: error: ")
    assert str(broken) in line


def test_a_modules_folder_below_a_file_warns_once_and_register_says_where(tmp_path, monkeypatch, capsys):
    """The broken HF_HOME of the test above, in this process: the registration's folder lies below a regular file;
    the import's registration warns once, in one line naming the folder, and `movers register` answers in one line
    naming it (through the same main() as the console script)."""
    from movers.cli import main

    broken = tmp_path / "hf-home"
    broken.write_text("not a folder")
    monkeypatch.delenv("MOVERS_NO_AUTOREGISTER", raising=False)
    monkeypatch.setattr(hub, "_cache_root", lambda _=None: broken / "modules")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hub.autoregister()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "\n" not in messages[0], messages
    assert messages[0].startswith(f"movers: could not register the evaluate modules in {broken / 'modules'}")
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # main() sets its one-line form
    status = main(["register"])
    out, err = capsys.readouterr()
    line = one_line_error(subprocess.CompletedProcess([], status, out, err), prefix="movers register: error: ")
    assert str(broken) in line


def test_a_full_disk_leaves_no_temporary_file_and_warns_once(tmp_path, monkeypatch):
    real_fdopen = os.fdopen

    def full(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)

        class Full:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()

            def write(self, data):
                raise OSError(errno.ENOSPC, "No space left on device")
        return Full()

    monkeypatch.setattr(hub.os, "fdopen", full)
    monkeypatch.delenv("MOVERS_NO_AUTOREGISTER", raising=False)
    monkeypatch.setattr(hub, "_cache_root", lambda _=None: tmp_path / "modules")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hub.autoregister()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "No space left on device" in messages[0], messages
    assert f"could not register the evaluate modules in {tmp_path / 'modules'}" in messages[0]
    assert not [p for p in (tmp_path / "modules").rglob("*") if p.name.startswith(".movers-")]


def test_a_truncated_registered_script_is_rewritten_by_the_registration(tmp_path, monkeypatch):
    """The repair of the test below, in this process: a registered copy cut in half is not a current registration,
    and the registration that `import movers` runs writes it whole again."""
    monkeypatch.delenv("MOVERS_NO_AUTOREGISTER", raising=False)
    monkeypatch.setattr(hub, "_cache_root", lambda _=None: tmp_path / "modules")
    hub.autoregister()
    assert hub.is_registered()
    scripts = sorted((tmp_path / "modules" / "evaluate_modules" / "metrics").glob("*--delta_bleu/*/delta_bleu.py"))
    whole = (Path(movers.module_dir("delta_bleu")) / "delta_bleu.py").read_bytes()
    assert scripts
    scripts[0].write_bytes(whole[: len(whole) // 2])
    assert not hub.is_registered()
    hub.autoregister()
    assert hub.is_registered() and scripts[0].read_bytes() == whole


@pytest.mark.system
@pytest.mark.slow
def test_a_truncated_registered_script_is_repaired_on_import(tmp_path):
    """Fresh processes in a fresh HF_HOME (the registration of `import movers`, then evaluate's load by name): a
    system test; a plain run checks the repair in this process (above)."""
    home = tmp_path / "hf"
    env = _env(HF_HOME=str(home))
    env.pop("HF_MODULES_CACHE", None)
    env.pop("MOVERS_NO_AUTOREGISTER", None)
    register = subprocess.run([sys.executable, "-c", "import movers"], capture_output=True, text=True, env=env,
                              timeout=300)
    assert register.returncode == 0, register.stderr
    scripts = sorted((home / "modules" / "evaluate_modules" / "metrics").glob("*--delta_bleu/*/delta_bleu.py"))
    assert scripts
    source = Path(movers.module_dir("delta_bleu")) / "delta_bleu.py"
    whole = source.read_bytes()
    scripts[0].write_bytes(whole[: len(whole) // 2])  # a full disk or a killed process mid-write
    load = subprocess.run([sys.executable, "-c", "import evaluate, movers; print(evaluate.load('delta_bleu')"
                           ".compute(predictions=['a b c d'], references=['a b c e'])['score'])"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert load.returncode == 0, load.stderr[-3000:]
    assert float(load.stdout.strip().splitlines()[-1]) == sacrebleu.corpus_bleu(["a b c d"], [["a b c e"]]).score
    assert hashlib.sha256(scripts[0].read_bytes()).hexdigest() == hashlib.sha256(whole).hexdigest()


def test_the_docs_state_the_limit_in_force():
    rules = (Path(__file__).resolve().parents[1] / "docs" / "inputs.md").read_text(encoding="utf-8")
    assert f"longer than {MAX_TEXT_CHARS:,} characters (`movers.core.validation.MAX_TEXT_CHARS`" in rules
