"""The LLM evaluation harnesses: a corpus metric over a harness's samples (:mod:`.common`) and its adapters for
lm-evaluation-harness (:mod:`.lm_eval`), Inspect (:mod:`.inspect_ai`), MLflow (:mod:`.mlflow`) and LightEval
(:mod:`.lighteval`): optional extras, imported only when asked for."""
from pathlib import Path

LIGHTEVAL_TASKS = Path(__file__).resolve().with_name("lighteval_tasks") / "movers_template.py"
"""LightEval's ``--custom-tasks`` file (``movers lighteval tasks``): found without importing LightEval."""
