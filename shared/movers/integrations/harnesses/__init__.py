"""The LLM evaluation harnesses: a corpus metric over a harness's samples (:mod:`.common`) and its adapters for
lm-evaluation-harness (:mod:`.lm_eval`), Inspect (:mod:`.inspect_ai`) and MLflow (:mod:`.mlflow`): optional extras,
imported only when asked for."""
