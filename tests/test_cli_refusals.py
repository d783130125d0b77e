"""Every subcommand of the ``movers`` command, fed a user's mistakes and missing resources: exactly one line on
stderr, ``movers <command>: error: ...``, nothing on stdout, a non-zero exit status (the rule in
:mod:`movers.cli.common`). The subcommands are read from the command line's own declaration
(:data:`movers.cli.COMMANDS`), so a new one fails here until it has cases. The cases run in process through
``movers.cli.main`` (what the console script runs); one runs as a real ``python -m movers`` process.
"""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from movers.cli import COMMANDS, main
from movers.cli.common import TRACEBACK_VARIABLE, UsageError
from movers.text.languages import ENCODERS, MULTILINGUAL

from .support.cli_process import run_movers

# (arguments after the command, what the one line says: a fragment, or None where another room owns the wording)
CASES: dict[str, list[tuple[list[str], str | None]]] = {
    "score": [
        (["-m", "moverscore", "-r", "missing.txt", "-c", "h.txt"], "reference file 'missing.txt' does not exist"),
        (["-m", "moverscore", "-r", "adir", "-c", "h.txt"], "reference file 'adir' is not a regular file"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "empty.txt"], "hypothesis 'empty.txt' is empty"),
        (["-m", "moverscore", "-r", "bad.txt", "-c", "h.txt"], "is not UTF-8 text: line 2"),
        (["-m", "bleu", "-r", "r.txt", "-c", "h.txt"], "argument -m/--metric: invalid choice: 'bleu'"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "-w", "abc"], "argument -w/--width: invalid int value"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--seed", "abc"], "--seed: expected an integer"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "-l", "xx"], "--lang must be an ISO 639-1 code"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "-l", "en-De"], "--lang 'en-De' is ambiguous"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--opt", "layer=[1,"], "`layer` must be an int"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--opt", "n_gram=two"], "expected an integer"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--opt", "colour=red"], "unknown option 'colour'"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--opt", "layer=99"], "`layer` must be in [-7, 6]"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--opt", "model=/nonexistent/folder"], None),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--cache", "h.txt"], "--cache: "),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "h.txt"], "is given twice"),
        (["-m", "moverscore", "-r", "r.txt", "-c", "h.txt", "--list-options", "bleu"], "invalid choice: 'bleu'"),
        (["-m", "moverscore", "--ray", "missing.parquet"], "--ray 'missing.parquet' does not exist"),
        # the default encoder of German is not in the (empty, offline) Hugging Face cache of the tests
        (["-m", "moverscore", "-l", "de", "-r", "r.txt", "-c", "h.txt"], MULTILINGUAL.model),
        (["-m", "delta_bleu", "-l", "ko", "-r", "r.txt", "-c", "h.txt"], None),  # sacreBLEU's Korean extra
    ],
    "explain": [
        (["-m", "moverscore", "  ", "A cat."], "the prediction is empty"),
        (["-m", "delta_bleu", "A cat.", "A dog."], "invalid choice: 'delta_bleu'"),
        (["-m", "moverscore", "A cat.", "A dog.", "-l", "zz"], "--lang must be"),
        (["-m", "moverscore", "A cat.", "A dog.", "-l", "tr"], ENCODERS["tr"].model),
        (["-m", "moverscore", "A cat.", "A dog.", "--top", "abc"], "argument --top: invalid int value"),
        (["-m", "moverscore", "A cat.", "A dog.", "-o", "nofolder/plan.png"], "cannot write 'nofolder/plan.png'"),
    ],
    "correlate": [
        (["missing.jsonl", "-m", "moverscore"], None),
        (["adir", "-m", "moverscore"], None),
        (["empty.jsonl", "-m", "moverscore"], None),
        (["bad.jsonl", "-m", "moverscore"], None),
        (["j.jsonl", "-m", "nosuch"], None),
        (["j.jsonl", "-m", "moverscore", "--opt", "colour=1"], None),
        (["j.jsonl", "-m", "moverscore", "--bootstrap", "abc"], "argument --bootstrap: invalid int value"),
        (["j.jsonl", "-m", 'moverscore={"idf": tru'], None),
    ],
    "cache": [
        (["info"], "no cache folder"),
        (["info", "--cache", "missingdir"], "--cache 'missingdir' is not a folder"),
        (["info", "--cache", "h.txt"], "--cache 'h.txt' is not a folder"),
        (["frob"], "invalid choice: 'frob'"),
    ],
    "demo": [(["--metric", "bleu"], "invalid choice: 'bleu'")],
    "register": [(["nosuchmetric"], "unknown module 'nosuchmetric'")],
    "space": [
        ([], "the following arguments are required: command"),
        (["build", "nosuch", "out"], "unknown metric 'nosuch'"),
        (["build", "moverscore", "out", "--wheel", "missing.whl"], "'missing.whl'"),
    ],
    "lm-eval": [(["list"], "invalid choice: 'list'")],
    "lighteval": [(["list"], "invalid choice: 'list'")],
}


@pytest.fixture()
def files(tmp_path, monkeypatch):
    """The cases' files, in the working folder."""
    (tmp_path / "h.txt").write_text("The cat sat on the mat.\nA dog barked.\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("A cat was on the mat.\nThe dog barked loudly.\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\n")
    (tmp_path / "bad.jsonl").write_text("not json\n", encoding="utf-8")
    (tmp_path / "j.jsonl").write_text("".join(f'{{"prediction": "a {w}", "reference": "a cat", "human": {i}}}\n'
                                              for i, w in enumerate(["cat", "dog", "bird", "fish"])),
                                      encoding="utf-8")
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MOVERS_CACHE", raising=False)
    monkeypatch.delenv(TRACEBACK_VARIABLE, raising=False)
    return tmp_path


def refused(argv: list[str], capsys) -> tuple[int, str]:
    """Run ``movers ARGV`` in process; the exit status and the one line on stderr (asserted: one line, empty
    stdout, a non-zero status, the command's prefix)."""
    status = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert status != 0 and out == "" and len(lines) == 1, (argv, status, out, err)
    prefix = f"movers {argv[0]}: error: " if argv and argv[0] in COMMANDS else "movers: error: "
    assert lines[0].startswith(prefix) or lines[0].startswith(f"movers {argv[0]} "), lines[0]
    return status, lines[0]


def test_every_subcommand_has_cases():
    assert set(CASES) == set(COMMANDS)


@pytest.mark.parametrize("command,argv,said", [(c, a, s) for c, cases in CASES.items() for a, s in cases],
                         ids=lambda x: x if isinstance(x, str) else " ".join(x) if isinstance(x, list) else "")
def test_a_mistake_or_a_missing_resource_is_one_line(files, capsys, command, argv, said):
    _, line = refused([command, *argv], capsys)
    if said is not None:
        assert said in line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_option_is_one_line_on_every_subcommand(files, capsys, command):
    status, line = refused([command, "--no-such-option"], capsys)  # or the missing arguments, said first
    assert status == 2 and line.endswith(f"(see {line.split(': error: ')[0]} --help)")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_exits_0_on_stdout(capsys, command):
    assert main([command, "--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"usage: movers {command}") and err == ""


def test_a_closed_standard_input_is_one_line(files, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", None)  # `movers score ... <&-`: Python starts with sys.stdin None
    _, line = refused(["score", "-m", "moverscore", "-r", "r.txt"], capsys)
    assert "cannot read the hypothesis from standard input (standard input is closed)" in line


def test_an_unreadable_file_is_one_line(files, capsys, monkeypatch):
    """(The tests may run as root, who reads any file: the refusal of the operating system is made here.)"""
    read_bytes = pathlib.Path.read_bytes

    def refuse(self):
        if self.name == "r.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", refuse)
    status, line = refused(["score", "-m", "moverscore", "-r", "r.txt", "-c", "h.txt"], capsys)
    assert status == 2 and line.endswith("cannot read reference file 'r.txt': Permission denied.")


def test_a_closed_output_pipe_ends_quietly(files, capsys, monkeypatch):
    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    status = main(["score", "--list-options", "twmd"])  # `movers score --list-options twmd | head -0`
    monkeypatch.undo()
    assert status == 1 and capsys.readouterr().err == ""


def test_ctrl_c_says_interrupted(files, capsys, monkeypatch):
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr("movers.cli.cache.run", interrupted)
    assert main(["cache", "info"]) == 130
    assert capsys.readouterr().err == "movers cache: interrupted\n"


def test_a_bug_keeps_its_traceback(files, monkeypatch):
    def bug(argv):
        raise KeyError("a key movers should have had")

    monkeypatch.setattr("movers.cli.cache.run", bug)
    with pytest.raises(KeyError):
        main(["cache", "info"])


def test_the_traceback_variable_raises_the_one_line_errors_too(files, monkeypatch):
    monkeypatch.setenv(TRACEBACK_VARIABLE, "1")
    with pytest.raises(UsageError, match="no cache folder"):
        main(["cache", "info"])
    with pytest.raises(OSError, match=MULTILINGUAL.model):
        main(["score", "-m", "moverscore", "-l", "de", "-r", "r.txt", "-c", "h.txt"])


def test_a_missing_default_encoder_is_one_line_from_the_real_command(files):
    """The command as a user runs it (``python -m movers``), offline, with the default encoder of German not in the
    Hugging Face cache."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(files / "hf")}
    proc = run_movers(["score", "-m", "moverscore", "-l", "de-DE", "-r", "r.txt", "-c", "h.txt"], env=env,
                      cwd=files, real=True)
    line = _one_line(proc)
    assert proc.returncode == 1 and line.startswith("movers score: error: moverscore: `lang` 'de' reads "
                                                    f"{MULTILINGUAL.model}")


def _one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.stdout == "" and len(lines) == 1, proc.stderr
    return lines[0]
