"""The harness pages' commands, run in an environment that has only movers and one harness extra: .ci/run
installs ``movers[lm-eval]`` (then ``movers[inspect]``, ``movers[lighteval]``) alone into a fresh virtual environment
and runs

    python .ci/harness_pages.py lm-eval     # or: inspect, lighteval

which runs the ``bash`` commands of that harness's section of docs/harnesses.md in a temporary folder on a tiny local
language model (for LightEval the one the page's own script makes; for the others tests/support/tiny_lm.py's), and
checks their results against one ``movers.<slug>`` call on the generations the harness logged. Exit status 0 when
they agree."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from tiny_lm import build_tiny_lm  # noqa: E402

PAIRS = [("The cat", "The cat sat on the mat."), ("A dog", "A dog barked at the postman."),
         ("The weather", "The weather is nice today."), ("My friend", "My friend came home late.")]
ATOL = 1e-5  # movers.REGROUPING_ATOL: the harness's in-memory cache holds vectors of earlier calls


def page_commands(harness: str) -> list[str]:
    """The ``bash`` blocks of `harness`'s part of docs/harnesses.md, continuation lines joined; a set-up line
    (LightEval's offline ``touch``) before the harness's commands."""
    page = (REPO / "docs" / "harnesses.md").read_text(encoding="utf-8")
    first = {"lm-eval": ("lm-eval ",), "inspect": ("inspect ",), "lighteval": ("touch ", "lighteval ")}[harness]
    text = "\n".join(re.findall(r"```bash\n(.*?)```", page, re.S)).replace("\\\n", " ")
    chosen = sorted((" ".join(line.split()) for line in text.splitlines() if line.startswith(first)),
                    key=lambda line: [line.startswith(prefix) for prefix in first].index(True))
    if not any(line.startswith(first[-1]) for line in chosen):
        raise SystemExit(f"docs/harnesses.md has no `{first[-1].strip()}` command")
    return chosen


def page_scripts(section: str) -> list[str]:
    """The ``python`` blocks of docs/harnesses.md's section `section` that are scripts (no ``>>>``), as a reader
    copies them into a file."""
    page = (REPO / "docs" / "harnesses.md").read_text(encoding="utf-8")
    start = page.index(f"\n## {section}\n")
    end = page.find("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", page[start:end if end != -1 else len(page)], re.S)
    return [block for block in blocks if ">>>" not in block]


def run(command: str, cwd: Path, **values: str) -> subprocess.CompletedProcess:
    for name, value in values.items():
        command = command.replace(name, value)
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    print("$", command, flush=True)
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def lm_eval(folder: Path, model: Path) -> None:
    import movers

    (folder / "movers_template.jsonl").write_text(
        "".join(json.dumps({"source": s, "reference": r}) + "\n" for s, r in PAIRS), encoding="utf-8")
    (command,) = page_commands("lm-eval")
    done = run(command + " --device cpu", folder, MODEL=str(model))
    if "aggregation is not" in done.stdout + done.stderr:
        raise SystemExit("lm-eval warned that an aggregation is missing")
    results = json.loads(next((folder / "results").rglob("results_*.json")).read_text())["results"]["movers_template"]
    samples = sorted((json.loads(line) for line in next((folder / "results").rglob("samples_*.jsonl")).open()),
                     key=lambda s: s["doc_id"])
    preds, refs = [s["filtered_resps"][0] for s in samples], [s["target"] for s in samples]
    check("movers_twmd", results["movers_twmd,none"], movers.twmd(preds, refs).score)
    check("movers_moverscore", results["movers_moverscore,none"], movers.moverscore(preds, refs, idf=True).score)


def inspect(folder: Path, model: Path) -> None:
    from inspect_ai.log import list_eval_logs, read_eval_log

    import movers

    (folder / "task.py").write_text(
        "from inspect_ai import Task, task\nfrom inspect_ai.dataset import Sample\n\n\n@task\ndef pairs():\n"
        f"    return Task(dataset=[Sample(input=s, target=r) for s, r in {PAIRS!r}])\n", encoding="utf-8")
    for command in page_commands("inspect"):
        log = list_eval_logs(str(folder / "logs"))
        run(command, folder, MODEL=str(model), TASK="task.py", LOG=log[0].name if log else "LOG")
    (log,) = list_eval_logs(str(folder / "logs"))
    scored = read_eval_log(log.name)
    samples = sorted(scored.samples, key=lambda s: s.id)
    preds, refs = [s.output.completion for s in samples], [s.target for s in samples]
    (score,) = [s for s in scored.results.scores if s.name == "twmd"]
    check("movers/twmd", score.metrics["corpus"].value, movers.twmd(preds, refs, centering="none").score)


def lighteval(folder: Path) -> None:
    """The page's script (its data and its tiny model), then its commands; the task file's six metrics, each equal
    to one movers call on the generations and golds of LightEval's details (to 1e-9: every metric's texts are the
    same, so the vectors the cache holds are the ones a call makes)."""
    import datasets

    import movers

    (script,) = page_scripts("LightEval")
    (folder / "first_run.py").write_text(script, encoding="utf-8")
    run("python first_run.py", folder)
    for command in page_commands("lighteval"):
        run(command, folder)
    results = json.loads(next((folder / "results").rglob("results_*.json")).read_text())["results"]
    details = datasets.load_dataset("parquet", data_files=str(next((folder / "results").rglob("details_*.parquet"))),
                                    split="train")
    preds = [row["model_response"]["text"][0] for row in details]
    refs = [[row["doc"]["choices"][i] for i in row["doc"]["gold_index"]] for row in details]
    refs = [golds[0] if len(golds) == 1 else golds for golds in refs]
    options = {"moverscore": {"idf": True}}
    for slug in ("twmd", "moverscore", "sms", "s_wms", "lazy_emd", "delta_bleu"):
        want = getattr(movers, slug)(preds, refs, **options.get(slug, {})).score
        check(f"movers_{slug}", results["movers_template|0"][f"movers_{slug}"], want, atol=1e-9)


def check(name: str, got: float, want: float, atol: float = ATOL) -> None:
    if not abs(got - want) <= atol:
        raise SystemExit(f"{name}: the harness reported {got}, one movers call gives {want}")
    print(f"{name}: {got:.6f} = one movers call ({want:.6f})")


def main(harness: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if harness == "lighteval":
            lighteval(folder)
        else:
            model = build_tiny_lm(folder / "tiny", [t for pair in PAIRS for t in pair])
            {"lm-eval": lm_eval, "inspect": inspect}[harness](folder, model)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
