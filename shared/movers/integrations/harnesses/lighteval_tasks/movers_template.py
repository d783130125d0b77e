r"""A generation task scored by movers' metrics (LightEval 0.13, a ``--custom-tasks`` file). Run it with
    lighteval accelerate "model_name=MODEL" "movers_template|0" --custom-tasks "$(movers lighteval tasks)" \
        --output-dir results --save-details
on the folder movers_template/ holding test.jsonl: one {"source": ..., "reference": ...} per line ("references":
[...] for several, and ΔBLEU's "reference_weights": [...], one per reference, where they are rated), beside this
file if it is there, else in the working directory. Or copy this file beside your data and change the task's name,
its data folder, its prompt and its metrics."""
from lighteval.tasks.lighteval_task import LightevalTaskConfig

from movers.integrations.harnesses.lighteval import (  # each metric's name: metric("<name>", **options)
    delta_bleu,
    doc_from_record,
    lazy_emd,
    local_data,
    moverscore,
    s_wms,
    sms,
    twmd,
)

TASKS_TABLE = [
    LightevalTaskConfig(
        name="movers_template",
        prompt_function=doc_from_record,  # source: the prompt; reference(s): the gold choices; weights: doc.specific
        hf_repo=local_data(__file__, "movers_template"),  # a folder of JSON lines (test.jsonl: the test split)
        hf_subset="default",
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        generation_size=128,
        stop_sequence=["\n"],
        metrics=[  # movers_<slug>, for any movers metric; keyword arguments: its options
            twmd(),
            moverscore(idf=True),
            sms(),
            s_wms(),
            lazy_emd(),
            delta_bleu(),
        ],
    )
]
