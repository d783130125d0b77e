"""Hub Spaces: the cards' Space YAML, `movers space build`, the page's input handling, ΔBLEU's n-gram view,
and (marked `browser`) each of the six built Spaces installed in a fresh venv and used in headless Chromium.

The browser test is what a person does: build the folder, install its requirements.txt the way a Space
does (the file alone, before the folder is copied in), start app.py on 127.0.0.1, click an example in
Debian's chromium, wait for the result and check the score, the signature and the alignment picture.
Screenshots go to $MOVERS_SCREENSHOTS (default: a pytest tmp folder); they are not committed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from movers.integrations.spaces.page import InputError, parse_inputs
from movers.integrations.spaces.page import page as metric_page
from movers.metrics.delta_bleu import delta_bleu_ngrams
from movers import __version__ as _version
from movers.integrations import TORCH_VERSION
from movers.integrations.spaces.build import GRADIO_VERSION, build

from .helpers import venv_with_our_dependencies as _venv_with_our_dependencies

REPO = Path(__file__).resolve().parents[1]
SLUGS = ["moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


# ------------------------------------------------------------------------------------------ cards

@pytest.mark.parametrize("slug", SLUGS)
def test_card_yaml_loads_as_space_card(slug):
    """huggingface_hub's own SpaceCard loader parses the front matter into typed Space fields.

    (huggingface_hub has Model/Dataset/SpaceCard loaders; there is no MetricCard class.)"""
    from huggingface_hub import SpaceCard

    card = SpaceCard.load(REPO / "cards" / f"{slug}.md", ignore_metadata_errors=False)
    data = card.data
    assert data.sdk == "gradio"
    assert str(data.sdk_version) == GRADIO_VERSION, "sdk_version must be the gradio the Space is tested with"
    assert data.app_file == "app.py"
    assert str(data.python_version) == "3.11"
    assert data.title and data.emoji and data.to_dict()["description"].strip()
    assert {"evaluate", "metric"} <= set(data.tags)
    assert card.text.lstrip().startswith("# Metric Card for"), "the body after the YAML must be the card"
    # The module folder's requirements.txt is what the built Space installs, gradio = sdk_version.
    req = (REPO / "metrics" / slug / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert f"gradio=={data.sdk_version}" in req and f"torch=={TORCH_VERSION}" in req


# ------------------------------------------------------------------------------ the page's inputs

def test_parse_inputs_names_the_field():
    preds, refs, w = parse_inputs("a b\nc d\n", "x ||| y\nz", "0.5 ||| -1\n1")
    assert preds == ["a b", "c d"] and refs == [["x", "y"], ["z"]] and w == [[0.5, -1.0], [1.0]]
    cases = [(("", "x", None), "predictions", "at least one"),
             (("a\nb", "x", None), "references", "1 line(s) for 2"),
             (("a", "x |||  ", None), "references", "empty reference"),
             (("a", "x ||| y", "0.5"), "reference weights", "1 weight(s) for 2"),
             (("a", "x ||| y", "0.5 ||| abc"), "reference weights", "'abc' is not a number")]
    for args, field, words in cases:
        with pytest.raises(InputError) as err:
            parse_inputs(*args)
        assert err.value.field == field and words in err.value.message, (args, str(err.value))


def test_every_widget_default_is_the_metrics_default():
    """The option widgets start at the metric function's own defaults (read from its signature)."""
    import inspect

    import movers

    for slug in SLUGS:
        params = inspect.signature(getattr(movers, slug)).parameters
        for o in metric_page(slug).options:
            assert o.name in params, f"{slug}: widget {o.name!r} is no option of movers.{slug}"
            want = params[o.name].default
            got = o.value(o.default)
            assert got == want or (want is None and got is None), f"{slug}.{o.name}: widget {got!r} != {want!r}"


# ---------------------------------------------------------------------------------- ΔBLEU n-grams

def test_delta_bleu_ngrams_by_hand():
    """Galley et al.'s rated references, counted by hand: hypothesis `yes , we have it`, references
    `yes , we have one copy` (w = 0.8) and `no .` (w = -0.5). The 4 unigrams, 3 bigrams, 2 trigrams and
    1 4-gram shared with the good reference earn 0.8 each (`it` and every n-gram with `it` earn 0), so the
    credits per order are 3.2, 2.4, 1.6, 0.8; totals are 0.8 × count: 4.0, 3.2, 2.4, 1.6."""
    import movers

    rows = delta_bleu_ngrams("yes , we have it", ["yes , we have one copy", "no ."], [0.8, -0.5])
    by = {r["ngram"]: r for r in rows}
    assert by["yes"]["reference"] == 1 and by["yes"]["weight"] == 0.8 and by["it"]["reference"] == 0
    credit = [sum(r["credit"] for r in rows if r["n"] == n) for n in range(1, 5)]
    total = [sum(r["total"] for r in rows if r["n"] == n) for n in range(1, 5)]
    assert credit == pytest.approx([3.2, 2.4, 1.6, 0.8], abs=1e-12)
    assert total == pytest.approx([4.0, 3.2, 2.4, 1.6], abs=1e-12)
    out = movers.delta_bleu(["yes , we have it"], [["yes , we have one copy", "no ."]], [[0.8, -0.5]])
    assert out.extra["counts"] == pytest.approx(credit, abs=1e-12)
    # Only in the badly rated reference: the n-gram takes that (negative) weight.
    rows = delta_bleu_ngrams("no .", ["yes , we have one copy", "no ."], [0.8, -0.5])
    assert [(r["ngram"], r["reference"], r["credit"]) for r in rows] == [
        (".", 2, -0.5), ("no", 2, -0.5), ("no .", 2, -0.5)]


# ------------------------------------------------------------------------------------- the build


@pytest.fixture(scope="session")
def spaces(wheel, tmp_path_factory):
    out = tmp_path_factory.mktemp("spaces")
    return {slug: build(slug, out, wheel=wheel) for slug in SLUGS}


@pytest.mark.parametrize("slug", SLUGS)
def test_space_folder_holds_what_the_space_runs(slug, spaces, wheel):
    folder = spaces[slug]
    images = {"lazy_emd_matching.png"} if slug == "lazy_emd" else set()
    assert {p.name for p in folder.iterdir()} == {"app.py", "README.md", "requirements.txt", f"{slug}.py",
                                                   wheel.name, *images}
    assert (folder / "README.md").read_bytes() == (REPO / "metrics" / slug / "README.md").read_bytes()
    for image in images:
        assert (folder / image).read_bytes() == (REPO / "cards" / image).read_bytes()
    assert (folder / "requirements.txt").read_text() == (REPO / "metrics" / slug / "requirements.txt").read_text()
    app = (folder / "app.py").read_text()
    compile(app, "app.py", "exec")
    assert f'launch("{slug}", card=HERE / "README.md")' in app


@pytest.mark.system
@pytest.mark.slow
@pytest.mark.parametrize("install", ["source", "wheel"])
def test_readme_space_build_command_after_a_plain_install(install, wheel, tmp_path):
    """The README's command as written (`.venv/bin/movers space build moverscore spaces/`) after a plain,
    non-editable install (`pip install .`, or of a wheel): no source tree beside movers, so the installed files
    are packed back into the wheel, which must hold exactly the files of a wheel built from the source."""
    python = _venv_with_our_dependencies(tmp_path / ".venv")
    target = str(REPO) if install == "source" else str(wheel)
    # --ignore-installed: the linked site-packages may hold a movers of the same version (CI's non-editable
    # install), which pip would otherwise count as installed and skip the wheel
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--ignore-installed", "--quiet", target],
                   check=True, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import movers; print(movers.__file__)"], env=env, check=True,
                           capture_output=True, text=True, cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / ".venv")
    proc = subprocess.run([str(tmp_path / ".venv" / "bin" / "movers"), "space", "build", "moverscore", "spaces/"],
                          env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "built spaces/moverscore"
    built = tmp_path / "spaces" / "moverscore" / wheel.name
    with zipfile.ZipFile(built) as got, zipfile.ZipFile(wheel) as want:
        record = f"movers-{_version}.dist-info/RECORD"
        assert sorted(got.namelist()) == sorted(want.namelist())
        assert [n for n in want.namelist() if n != record and got.read(n) != want.read(n)] == []
        assert sorted(got.read(record).decode().splitlines()) == sorted(want.read(record).decode().splitlines())
    assert (tmp_path / "spaces" / "moverscore" / "requirements.txt").read_text() == \
        (REPO / "metrics" / "moverscore" / "requirements.txt").read_text()
    if install == "wheel":
        _every_command_works_from_the_wheel(tmp_path, env)


def _every_command_works_from_the_wheel(folder: Path, env: dict[str, str]) -> None:
    """The commands of the installed wheel (`movers --help` lists them), each as a user runs it, on files of the
    user's own: their outputs equal the Python API's on the same texts. The studies and the site, which need the
    repository, are no commands of the wheel: `movers bench` and `movers docs` say where they run."""
    import movers
    from movers.cli import DEMO_PAIRS

    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(folder / ".venv" / "bin" / "movers"), *args], env=env, capture_output=True,
                              text=True, cwd=folder, timeout=600)

    hyps, refs = ["The cat sat on the mat.", "A quick brown fox jumps."], ["A cat was sitting on the mat.", "A fox."]
    (folder / "hyps.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    (folder / "refs.txt").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    (folder / "cache").mkdir()  # an embedding cache folder of the user's, nothing in it yet
    assert command("--version").stdout == f"movers {_version}\n"
    listed = command("--help").stdout
    assert all(f"movers {name}" in listed for name in ("score", "explain", "demo", "register", "space", "cache",
                                                       "lm-eval"))
    score = command("score", "-m", "delta_bleu", "-r", "refs.txt", "-c", "hyps.txt")
    api = movers.delta_bleu(hyps, refs)
    assert score.returncode == 0 and score.stdout == f"{api.signature} = {api.score:.4f}\n", score.stderr[-3000:]
    info = command("cache", "info", "--cache", "cache")
    assert info.returncode == 0 and info.stdout.startswith("cache: 0 entries"), info.stdout + info.stderr
    explain = command("explain", "-m", "sms", hyps[0], refs[0], "-o", "plan.png", "-f", "json")
    assert explain.returncode == 0 and (folder / "plan.png").stat().st_size > 1000, explain.stderr[-3000:]
    assert json.loads(explain.stdout)["score"] == pytest.approx(movers.sms(hyps[:1], refs[:1]).scores[0], abs=1e-9)
    demo = command("demo")
    assert demo.returncode == 0 and demo.stdout.splitlines()[0].startswith(f"0.5995  {DEMO_PAIRS[0][0]!r}")
    registered = command("register").stdout.splitlines()
    assert len(registered) >= 6 and all(line.startswith("registered ") for line in registered)
    tasks = command("lm-eval", "tasks")
    assert tasks.returncode == 0 and Path(tasks.stdout.strip()).is_relative_to(folder / ".venv"), tasks.stderr
    assert (Path(tasks.stdout.strip()) / "utils.py").is_file()
    for moved in ("bench", "docs"):
        proc = command(moved, "--help")
        assert proc.returncode == 2 and "python -m shared.bench" in proc.stderr and proc.stdout == ""


def test_a_failed_build_leaves_no_folder(tmp_path, monkeypatch):
    import movers.integrations.spaces.build as space

    def no_wheel(dest, source=None):
        raise FileNotFoundError("no wheel here")

    monkeypatch.setattr(space, "build_wheel", no_wheel)
    with pytest.raises(FileNotFoundError, match="no wheel here"):
        space.build("moverscore", tmp_path / "spaces")
    assert not (tmp_path / "spaces" / "moverscore").exists()


# -------------------------------------------------------------------------------- in a real browser

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"app.py exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"app.py did not serve {url} within {timeout:.0f} s:\n{log.read_text()[-4000:]}")


# What the first example of each page must show: signature prefix, and where the papers give numbers,
# the per-segment values (Lazy-EMD: the default "tuned" preset's 0.5726 / 0.4751 in the card; the
# original code's 0.1999 / 0.1795 are pinned with preset="original" by the module's doctest; ΔBLEU: 54.75 by hand).
EXPECT = {
    "moverscore": ("MoverScore|", None),
    "sms": ("SMS|", None),
    "s_wms": ("S+WMS|", None),
    "twmd": ("TWMD|", None),
    "lazy_emd": ("LazyEMD|", ["0.5726", "0.4751"]),
    "delta_bleu": ("DeltaBLEU|", ["54.75"]),
}


@pytest.mark.system
@pytest.mark.browser
def test_six_spaces_install_and_work_in_chromium(spaces, tmp_path_factory):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; .ci/run installs it with apt-get")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    shots = Path(os.environ.get("MOVERS_SCREENSHOTS") or tmp_path_factory.mktemp("screens"))
    shots.mkdir(parents=True, exist_ok=True)
    work = tmp_path_factory.mktemp("space-venv")
    venv = work / "venv"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    # One venv for the six Spaces: each distinct requirements.txt of their folders (today the six are one
    # text) is installed into it, alone, from a folder holding only that file (a Space installs it before the
    # rest of its folder is copied in); installing the same text again would change nothing.
    # --retries 0: the PyTorch CPU index is unreachable here; pip skips it and takes the same
    # torch==2.13.0+cpu from this machine's wheel folder. --no-compile: no .pyc for torch's thousands of
    # files at install time (Python writes them on import); it changes nothing that is installed.
    distinct = {(folder / "requirements.txt").read_text(encoding="utf-8"): slug for slug, folder in spaces.items()}
    for slug in distinct.values():
        alone = work / f"req-{slug}"
        alone.mkdir()
        shutil.copy2(spaces[slug] / "requirements.txt", alone / "requirements.txt")
        done = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-compile", "--retries", "0", "-r",
                               "requirements.txt"], cwd=alone, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{slug}: pip install -r requirements.txt failed:\n{done.stderr[-4000:]}"
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            env=env, check=True).stdout
    assert f"torch=={TORCH_VERSION}" in listed and f"gradio=={GRADIO_VERSION}" in listed
    assert not re.search(r"^nvidia-", listed, re.M), "a CUDA package was installed"
    assert subprocess.run([str(py), "-c", "import movers"], env=env, capture_output=True).returncode != 0, \
        "movers must come from the Space folder's wheel, not from the venv"
    install_s = time.monotonic() - t0

    timings = {}
    with playwright.sync_playwright() as pw:
        # Playwright starts chromium with a fresh temporary --user-data-dir of its own on every launch.
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"])
        # The six apps start together (their imports overlap; they share one temp folder, so the
        # wheel is unpacked concurrently too), then each page is driven in turn.
        apps = {slug: _start(slug, folder, py, env, work) for slug, folder in spaces.items()}
        try:
            for slug, app in apps.items():
                t = time.monotonic()
                timings[slug] = _drive(browser, slug, *app, work, shots)
                timings[slug]["total_s"] = round(time.monotonic() - t, 1)
        finally:
            browser.close()
            for proc, _, _ in apps.values():
                proc.terminate()
            for proc, _, _ in apps.values():
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    print(f"\nspace venv install {install_s:.0f} s; per Space: {timings}; screenshots in {shots}")


def _start(slug: str, folder: Path, py: Path, env: dict, work: Path) -> tuple[subprocess.Popen, str, Path]:
    """`python app.py` in the Space folder, on 127.0.0.1 and a free port, as a Space runs it."""
    port = _free_port()
    log = work / f"{slug}.log"
    (work / "tmp").mkdir(exist_ok=True)
    app_env = dict(env, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False",
                   HF_HOME=str(work / "hf-home"), MPLBACKEND="Agg", OMP_NUM_THREADS="1", TMPDIR=str(work / "tmp"))
    with open(log, "w") as out:
        proc = subprocess.Popen([str(py), "app.py"], cwd=folder, env=app_env, stdout=out, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}/", log


def _drive(browser, slug: str, proc: subprocess.Popen, url: str, log: Path, work: Path, shots: Path) -> dict:
    t = time.monotonic()
    _wait_http(url, proc, log, timeout=300)
    start_s = time.monotonic() - t
    assert list((work / "tmp").glob("movers-*/movers/__init__.py")), "app.py did not unpack the folder's wheel"
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#examples button", timeout=60_000)
    t = time.monotonic()
    page.locator("#examples button").first.click()
    page.wait_for_selector("#signature-value", timeout=240_000)
    result_s = time.monotonic() - t
    prefix, values = EXPECT[slug]
    score_text = page.locator("#score").inner_text()
    assert re.search(r"^\s*-?\d+\.\d{4}\b", score_text), score_text
    signature = page.locator("#signature-value").inner_text().strip()
    assert signature.startswith(prefix), signature
    table = page.locator("#segments").inner_text()
    for value in values or []:
        assert value in table or value in score_text, f"{slug}: {value} not on the page:\n{table}"
    if metric_page(slug).explain:
        img = page.locator("#heatmap img")
        img.wait_for(timeout=120_000)
        page.wait_for_function("el => el.complete && el.naturalWidth > 200", arg=img.element_handle(),
                               timeout=60_000)
        caption = page.locator("#caption").inner_text()
        # the plan the call scored: its number is segment 1's in the table (one segment, one number)
        shown = re.search(r"Transport plan .* as scored in this call: (-?\d+\.\d{4})", caption)
        assert shown and caption.startswith("Segment 1, reference 1 of "), caption
        # Gradio draws its table as a grid of cells (no <tr> rows): in the text, the header ends with
        # "reference(s)", then come segment 1's cells: "1", its score, ...
        cells = [c.strip() for c in table.split("\n") if c.strip()]
        start = cells.index("reference(s)") + 1 if "reference(s)" in cells else -1
        assert 0 < start < len(cells) - 1 and cells[start] == "1", f"{slug}: no segment 1 in the table:\n{table}"
        first_row = cells[start + 1]  # segment 1's score
        if caption.startswith("Segment 1, reference 1 of 1."):
            assert shown.group(1) == first_row, f"{slug}: the plan's {shown.group(1)} is not segment 1's ({first_row})"
        else:  # several references: the caption names the segment's combined score, the table's
            combined = re.search(r"The segment's score, (-?\d+\.\d{4}), combines its \d+ references", caption)
            assert combined and combined.group(1) == first_row, (caption, first_row)
    else:
        ngrams = page.locator("#ngrams").inner_text()
        assert "yes ," in ngrams and "0.8" in ngrams, ngrams
    page.screenshot(path=str(shots / f"{slug}.png"))
    if slug == "lazy_emd":  # the card's image is served from the Space folder, not a 404
        card_img = page.locator("#card img").first
        card_img.scroll_into_view_if_needed()
        page.wait_for_function("el => el.complete && el.naturalWidth > 100", arg=card_img.element_handle(),
                               timeout=30_000)
        page.screenshot(path=str(shots / "lazy_emd_card.png"))
    if slug == "delta_bleu":  # a malformed weight: a message naming the field, no score
        page.locator("#weights textarea").fill("0.8 ||| abc")
        page.locator("#score-button").click()
        page.wait_for_selector("#error:has-text('reference weights')", timeout=30_000)
        assert "'abc' is not a number" in page.locator("#error").inner_text()
        page.screenshot(path=str(shots / "delta_bleu_error.png"))
    context.close()
    return {"wait_for_server_s": round(start_s, 1), "first_result_s": round(result_s, 1)}
