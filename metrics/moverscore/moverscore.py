"""MoverScore as a Hugging Face `evaluate` module: declaration and plumbing only.

The formula lives in the `movers` package (`movers/metrics/moverscore.py`); this file describes the
inputs and forwards every option unchanged.
"""
import evaluate
import movers  # From: movers

_CITATION = """\
@inproceedings{zhao-etal-2019-moverscore,
    title = "{M}over{S}core: Text Generation Evaluating with Contextualized Embeddings and Earth Mover Distance",
    author = "Zhao, Wei and Peyrard, Maxime and Liu, Fei and Gao, Yang and Meyer, Christian M. and Eger, Steffen",
    booktitle = "Proceedings of EMNLP-IJCNLP 2019",
    year = "2019",
    pages = "563--578",
    url = "https://aclanthology.org/D19-1053",
}
"""

_DESCRIPTION = """\
MoverScore is the earth mover's distance between the IDF-weighted contextual token embeddings of a
prediction and a reference, turned into a similarity. Presets reproduce the three original
implementations: "1.0.3" (default: PyPI moverscore 1.0.3; 1-d), "github" (1/(1+d), in (0, 1]) and
"paper" (p-means of the last five layers, n-grams, squared Euclidean cost). The default encoder is the
bundled all-MiniLM-L6-v2 (no download); any Hugging Face model id or local folder works.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): Hypotheses, one per segment.
    references (`list` of `str`, or `list` of `list` of `str`): One reference per segment, or a
        non-empty list per segment (ragged lists allowed).
    preset (`str`): "1.0.3" (default; score 1-d), "github" (1/(1+d)) or "paper".
    model (`str`): Hugging Face model id or local folder; default the bundled all-MiniLM-L6-v2.
    layer (`int` or `list` of `int`): hidden_states index (0 = embeddings, -1 = last); a list is
        aggregated by power means. Default from the preset.
    n_gram (`int`), cost (`str`: "euclidean", "sqeuclidean", "cosine"),
    transform (`str`: "1-d", "1/(1+d)", "exp(-d)", "d"): override the preset.
    idf (`bool` or `movers.Idf` or a pair of them): False (default) = uniform weights; True = IDF from
        this call's references and predictions separately (the original README's usage); a fitted
        table = fixed weights.
    remove_subwords (`bool`), remove_punctuation (`bool`): default True (the original).
    stop_words (`bool`, `str` or `list` of `str`): None (default), True for the shipped English list.
    reference_aggregation (`str`): "max" (default; the closest reference) or "mean" (the original's example).
    long_texts (`str`): "window" (default: sliding windows), "truncate" (as the original) or "error".
    batch_size (`int`), device (`str`), verbose (`bool`): runtime only; never change a score.
    centering (`str` or `movers.Centering`): subtract a token mean before comparing (Chen et al. 2020):
        "none" (default), "corpus" (one pair of means per call; order-free), "batch" (per run of
        `centering_batch` consecutive segments; order dependent) or a table from `movers.fit_centering`.
    centering_batch (`int`): segments per centring batch (default 32).
    empty_predictions (`str`): "worst" (default): an empty or whitespace-only prediction gets the
        metric's worst value, with a warning; "error": rejected. Empty references are always an error.
    baseline (`float` or `str`): None (default); "fit" (random pairs of this call's texts), "bundled"
        (shipped for the default settings) or a number b: scores become (s - b) / (1 - b).
Returns:
    score (`float`): mean of `scores`.
    scores (`list` of `float`): one score per segment, in input order; higher is better.
    distances (`list` of `float`): the earth mover's distance per segment.
    per_reference (`list` of `list` of `float`): only with several references per segment.
    signature (`str`): reproducibility signature; report it with the score.
Examples:
    >>> moverscore = evaluate.load("moverscore")
    >>> results = moverscore.compute(predictions=["The cat sat on the mat."],
    ...                              references=["A cat was sitting on the mat."])
    >>> round(results["score"], 4)
    0.5995
    >>> results["signature"].split("|")[:4]
    ['MoverScore', 'preset:1.0.3', 'nrefs:1', 'agg:max']
    >>> results = moverscore.compute(predictions=["The cat sat on the mat."],
    ...                              references=[["A cat was sitting on the mat.", "The cat sat on the mat."]],
    ...                              reference_aggregation="max")
    >>> results["scores"]
    [1.0]
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Moverscore(movers.MoversMetric):  # movers' input checks before evaluate's
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=movers.text_features(),
            codebase_urls=["https://github.com/AIPHES/emnlp19-moverscore"],
            reference_urls=["https://aclanthology.org/D19-1053"],
        )

    def _compute(self, predictions, references, preset="1.0.3", model=None, layer=None, n_gram=None,
                 cost=None, transform=None, idf=False, remove_subwords=True, remove_punctuation=True,
                 stop_words=None, reference_aggregation="max", long_texts="window", batch_size=64,
                 device=None, verbose=False, centering="none", centering_batch=32, empty_predictions="worst",
                 baseline=None):
        return movers.moverscore(
            predictions, references, preset=preset, model=model, layer=layer, n_gram=n_gram, cost=cost,
            transform=transform, idf=idf, remove_subwords=remove_subwords,
            remove_punctuation=remove_punctuation, stop_words=stop_words,
            reference_aggregation=reference_aggregation, long_texts=long_texts, batch_size=batch_size,
            device=device, verbose=verbose, centering=centering,
            centering_batch=centering_batch,
            empty_predictions=empty_predictions, baseline=baseline,
        ).to_dict()
