"""What the command-line tests' fork server imports once (tests/support/cli_process.py): the command line and the
libraries a ``movers`` command imports, nothing computed (no thread pool, no model weights)."""
import importlib

for name in ("torch", "numpy", "scipy", "ot", "sacrebleu", "transformers", "movers", "movers.cli", "movers.cli.score",
             "movers.cli.explain", "movers.metrics", "movers.pipeline.embedding", "movers.text.embedding",
             "transformers.models.bert.modeling_bert", "transformers.models.auto.modeling_auto",
             "transformers.models.auto.tokenization_auto", "transformers.models.bert.tokenization_bert",
             "transformers.models.bert.tokenization_bert_fast", "tokenizers", "safetensors.torch", "matplotlib",
             "matplotlib.pyplot", "spacy", "nltk"):
    try:
        importlib.import_module(name)
    except ImportError:  # another transformers release lays its modules out otherwise: imported when used
        pass
