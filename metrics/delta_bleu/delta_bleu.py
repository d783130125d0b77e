"""ΔBLEU (discriminative BLEU) as a Hugging Face `evaluate` module: declaration and plumbing only.

The formula lives in the `movers` package (`movers/metrics/delta_bleu.py`); this file describes the
inputs and forwards every option unchanged.
"""
import datasets
import evaluate
import movers  # From: movers

_CITATION = """\
@inproceedings{galley-etal-2015-deltableu,
    title = "delta{BLEU}: A Discriminative Metric for Generation Tasks with Intrinsically Diverse Targets",
    author = "Galley, Michel and Brockett, Chris and Sordoni, Alessandro and Ji, Yangfeng and Auli, Michael and
              Quirk, Chris and Mitchell, Margaret and Gao, Jianfeng and Dolan, Bill",
    booktitle = "Proceedings of ACL-IJCNLP 2015 (Volume 2: Short Papers)",
    year = "2015",
    pages = "445--450",
    url = "https://aclanthology.org/P15-2073",
    doi = "10.3115/v1/P15-2073",
}
"""

_DESCRIPTION = """\
ΔBLEU (discriminative BLEU, Galley et al. 2015) is multi-reference BLEU in which every reference carries
a human quality weight in [-1, +1]: an n-gram earns the best weighted clipped count over the references
that contain it, so matching a good reference is rewarded and matching a bad one penalised. Without
weights it is exactly sacreBLEU's multi-reference BLEU. `variant="paper"` (default) follows the paper's
formula; `variant="galley"` reproduces Galley's sacreBLEU fork. Scores are 0-100, higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): Hypotheses, one per segment.
    references (`list` of `str`, or `list` of `list` of `str`): One reference per segment, or a
        non-empty list per segment (ragged lists allowed).
    reference_weights (`list` of `list` of `float`, optional): Same shape as `references`; each weight
        in [-1, 1], at least one > 0 per segment. None (default) = all 1 = plain BLEU. With the default
        configuration it is a compute argument; load the "weighted" configuration
        (`evaluate.load("delta_bleu", "weighted")`) to pass it through `add`/`add_batch` instead.
    variant (`str`): "paper" (default) or "galley" (Galley's sacreBLEU fork).
    tokenize (`str`): sacreBLEU tokenizer, "13a" (default), "intl", "zh", "char", "none", ...
    lowercase (`bool`): lowercase the texts (default False).
    max_ngram_order (`int`): N, default 4 (the paper's experiments used 2).
    smooth_method (`str`): sacreBLEU smoothing, "exp" (default), "floor", "add-k" or "none".
    smooth_value (`float`, optional): for "floor" / "add-k"; None = sacreBLEU's default.
    effective_order (`bool`): sacreBLEU's effective order (default False; True for sentence-level use).
Returns:
    score (`float`): corpus ΔBLEU, 0-100, higher is better.
    scores (`list` of `float`): ΔBLEU of each segment scored on its own, input order.
    precisions (`list` of `float`): corpus n-gram precisions, 0-100.
    bp (`float`), sys_len (`int`), ref_len (`int`): brevity penalty and the lengths behind it.
    counts, totals (`list` of `float`): weighted matched and total n-gram counts of the corpus.
    signature (`str`): reproducibility signature; report it with the score.
Examples:
    >>> delta_bleu = evaluate.load("delta_bleu")
    >>> predictions = ["i 'm not sure , let me look .", "yes , i think so ."]
    >>> references = [["i 'm not sure , let me look for you .", "we do n't have it ."],
    ...               ["yes , we have one copy left .", "i do n't think so ."]]
    >>> results = delta_bleu.compute(predictions=predictions, references=references)
    >>> round(results["score"], 2), [round(s, 2) for s in results["scores"]]
    (63.2, [71.2, 39.76])
    >>> results = delta_bleu.compute(predictions=predictions, references=references,
    ...                              reference_weights=[[0.9, -0.4], [0.7, -0.8]])
    >>> round(results["score"], 2), [round(s, 2) for s in results["scores"]]
    (48.85, [71.2, 0.0])
    >>> results["signature"]  # doctest: +ELLIPSIS
    'DeltaBLEU|variant:paper|nrefs:2|w:rated|order:4|case:mixed|eff:no|tok:13a|smooth:exp|v:[...]|sacrebleu:[...]'
"""

_CONFIGS = ("default", "weighted")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DeltaBleu(movers.MoversMetric):  # movers' input checks before evaluate's
    def _info(self):
        if self.config_name not in _CONFIGS:
            raise ValueError(f"delta_bleu: unknown configuration {self.config_name!r}; choose one of "
                             f"{list(_CONFIGS)}.")
        string = datasets.Value("string", id="sequence")
        multi = {"predictions": string, "references": datasets.Sequence(string, id="references")}
        single = {"predictions": string, "references": string}
        if self.config_name == "weighted":
            # float64: a float32 column would turn 0.2 into 0.20000000298.
            multi["reference_weights"] = datasets.Sequence(datasets.Value("float64"), id="reference_weights")
            single["reference_weights"] = datasets.Value("float64")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[datasets.Features(multi), datasets.Features(single)],
            codebase_urls=["https://github.com/mgalley/sacreBLEU", "https://github.com/mjpost/sacrebleu"],
            reference_urls=["https://aclanthology.org/P15-2073"],
        )

    def _compute(self, predictions, references, reference_weights=None, variant="paper", tokenize="13a",
                 lowercase=False, max_ngram_order=4, smooth_method="exp", smooth_value=None,
                 effective_order=False):
        return movers.delta_bleu(
            predictions, references, reference_weights, variant=variant, tokenize=tokenize,
            lowercase=lowercase, max_ngram_order=max_ngram_order, smooth_method=smooth_method,
            smooth_value=smooth_value, effective_order=effective_order,
        ).to_dict()
