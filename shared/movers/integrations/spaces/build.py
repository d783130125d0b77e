"""A Hugging Face Space folder per metric, ready to upload (`movers space build <slug|all> <dir>`, :mod:`movers.cli`).

Each folder ``<dir>/<slug>/`` holds exactly what the Space runs:

* ``README.md``: the metric card with the Space's YAML front matter (``sdk: gradio``, ``sdk_version``);
* ``app.py``: unpacks the movers wheel of this folder, puts it on ``sys.path``, serves :mod:`movers.app`;
* ``movers-<version>-py3-none-any.whl``: movers itself, built from this source tree, or packed back from a
  plain install's files (or ``--wheel``);
* ``requirements.txt``: movers' own dependencies, torch pinned to the CPU build, gradio = ``sdk_version``;
* ``<slug>.py``: the evaluate module script, so ``evaluate.load("<org>/<slug>")`` works from the Hub;
* the images the card shows (e.g. ``lazy_emd_matching.png``).

Why the wheel is not a line of requirements.txt: a gradio Space installs requirements.txt in a build
step that mounts that one file (``RUN --mount=target=requirements.txt,source=requirements.txt pip
install -r requirements.txt``) before the folder is copied in, so a relative wheel path does not exist
yet at that point. ``app.py`` therefore unpacks the wheel (pure Python, ``py3-none-any``) into the temp
folder at start and imports movers from there; requirements.txt lists everything movers needs.
"""
from __future__ import annotations

import base64
import email.parser
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .. import TORCH_INDEX, TORCH_VERSION

__all__ = ["build", "build_wheel", "installed_wheel", "requirements", "GRADIO_VERSION"]

GRADIO_VERSION = "6.31.0"
"""The gradio the Spaces run (card ``sdk_version``), beside the transformers and huggingface_hub that movers'
requirements bring (tests/test_space.py). gradio 5.0.0 fails at import with the huggingface_hub that transformers 5
needs (``cannot import name 'HfFolder'``)."""

_APP = '''\
"""Hub Space: the movers demo page for {slug} (the card is README.md). Built by `movers space build`.

A Space installs requirements.txt before it copies this folder, so movers comes from the wheel here: it
is pure Python, unpacked once into the temp folder (keyed by its hash) and put first on sys.path.
"""
import hashlib
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
for wheel in sorted(HERE.glob("movers-*.whl")):
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"{{wheel.stem}}-{{digest}}"
    if not (target / "movers" / "__init__.py").is_file():
        part = Path(tempfile.mkdtemp(prefix=f"{{target.name}}-part-", dir=target.parent))
        zipfile.ZipFile(wheel).extractall(part)
        try:
            part.rename(target)  # atomic: a second worker never sees half a package
        except OSError:
            pass  # another process unpacked it first
    sys.path.insert(0, str(target))

from movers.integrations.spaces.page import launch  # noqa: E402

launch("{slug}", card=HERE / "README.md")
'''


def _source_root() -> Path | None:
    """The repository holding this package's pyproject.toml (a source checkout), else None."""
    root = Path(__file__).resolve().parents[4]
    return root if (root / "pyproject.toml").is_file() and (root / "shared" / "movers").is_dir() else None


def build_wheel(dest: str | Path, source: str | Path | None = None) -> Path:
    """A movers wheel in `dest`; returns its path. From a source tree (a checkout, or the tree of an editable
    install): ``pip wheel --no-deps``. From a plain install (``pip install .`` or a wheel), which has no source
    tree: the installed distribution packed back into its wheel (:func:`installed_wheel`)."""
    source = Path(source) if source is not None else _source_root()
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if source is None:
        return installed_wheel(dest)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp, str(source)],
                       check=True)
        (wheel,) = Path(tmp).glob("movers-*.whl")
        return Path(shutil.copy2(wheel, dest / wheel.name))


_INSTALL_ONLY = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}  # written by the installer, not the wheel


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def installed_wheel(dest: str | Path) -> Path:
    """The installed movers distribution as a wheel in `dest`: the files its RECORD lists under site-packages
    (not the console scripts, which the installer generates from ``entry_points.txt``, nor byte code or the
    installer's own files), each checked against its recorded hash, with a new RECORD. A wheel installs to
    exactly these files, so this is the wheel that was installed."""
    from importlib import metadata

    dist = metadata.distribution("movers")
    info = next((f.parts[0] for f in dist.files or [] if f.parts[0].endswith(".dist-info")), None)
    if info is None:
        raise FileNotFoundError("movers space build: the installed movers has no RECORD of its files; pass --wheel "
                                "PATH (a movers wheel, e.g. from `pip wheel --no-deps <checkout>`).")
    wheel_meta = email.parser.Parser().parsestr(dist.read_text("WHEEL") or "")
    tag = wheel_meta.get("Tag", "py3-none-any")
    name = f"movers-{dist.version}-{tag}.whl"
    target = Path(dest) / name
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        partial = Path(tmp) / name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(dist.files or [], key=str):
                parts = f.parts
                if parts[0] == ".." or "__pycache__" in parts or f.suffix == ".pyc" \
                        or (parts[0] == info and f.name in _INSTALL_ONLY):
                    continue
                data = Path(str(dist.locate_file(f))).read_bytes()
                digest = _record_hash(data)
                if f.hash is not None and f"{f.hash.mode}={f.hash.value}" != digest:
                    raise ValueError(f"movers space build: the installed file {f} differs from what was installed "
                                     f"(edited in site-packages?); reinstall movers or pass --wheel PATH.")
                zf.writestr(f.as_posix(), data)
                rows.append(f"{f.as_posix()},{digest},{len(data)}")
            rows.append(f"{info}/RECORD,,")
            zf.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
        return Path(shutil.copy2(partial, target))


def _wheel_requires(wheel: Path) -> list[str]:
    """The wheel's runtime requirements (Requires-Dist without extras)."""
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if re.fullmatch(r"movers-[^/]+\.dist-info/METADATA", n)]
        meta = email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))
    return [r for r in meta.get_all("Requires-Dist", []) if "extra ==" not in r]


def requirements(wheel: Path) -> str:
    """requirements.txt of a Space carrying `wheel`: its dependencies, CPU torch, the card's gradio."""
    deps = [r for r in _wheel_requires(wheel) if not re.match(r"torch\b", r)]
    lines = [
        "# What a movers Space installs (`movers space build` writes it; metrics/<slug>/requirements.txt is the",
        "# same file). movers itself is the wheel next to app.py, which imports it from there: a Space installs",
        "# this file before it copies the folder in. These lines are movers' own dependencies.",
        "# torch: the CPU build. A Space on CPU hardware cannot use the CUDA build, which brings GBs of",
        "# nvidia packages; the exact +cpu pin fails rather than silently falling back to it.",
        f"--extra-index-url {TORCH_INDEX}",
        f"torch=={TORCH_VERSION}",
        f"gradio=={GRADIO_VERSION}",
        *deps,
    ]
    return "\n".join(lines) + "\n"


def _images(card: str) -> list[str]:
    """Relative image paths a Markdown card shows."""
    return [t for t in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", card) if not re.match(r"^[a-z]+:|^/", t)]


def build(slug: str, out_dir: str | Path, *, wheel: str | Path | None = None) -> Path:
    """Assemble the Space folder ``<out_dir>/<slug>/`` (replaced if present); returns its path."""
    from ..hub.loading import module_dir, module_names

    if slug not in module_names():
        raise ValueError(f"movers space build: unknown metric {slug!r}; choose one of {module_names()} or 'all'.")
    src = Path(module_dir(slug))
    target = Path(out_dir) / slug
    with tempfile.TemporaryDirectory() as tmp:  # the wheel first: a failure leaves no half-built folder
        # (a given wheel is copied aside first: it may lie in the folder about to be replaced)
        wheel_path = build_wheel(tmp) if wheel is None else Path(shutil.copy2(wheel, Path(tmp) / Path(wheel).name))
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        wheel_path = Path(shutil.copy2(wheel_path, target / wheel_path.name))
    card = (src / "README.md").read_text(encoding="utf-8")
    (target / "README.md").write_text(card, encoding="utf-8")
    shutil.copy2(src / f"{slug}.py", target / f"{slug}.py")
    for image in _images(card):
        if not (src / image).is_file():
            raise FileNotFoundError(f"movers space build: {slug}'s card shows {image!r}, missing from {src}.")
        (target / image).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / image, target / image)
    (target / "app.py").write_text(_APP.format(slug=slug), encoding="utf-8")
    (target / "requirements.txt").write_text(requirements(wheel_path), encoding="utf-8")
    return target
