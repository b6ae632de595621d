"""Which tokenizer names a server loads, and loading one at a bounded cost.

A rollout names its tokenizer: a hub id or a local directory. A server (built from
Settings) loads only

* its default tokenizer, and any name listed exactly in JUDGE_ALLOWED_TOKENIZERS;
* a hub id matching an entry of JUDGE_ALLOWED_TOKENIZERS as an fnmatch pattern
  (``Qwen/*``); patterns never match local paths;
* a directory under one of JUDGE_TOKENIZER_ROOTS, after ``..`` and symlinks are
  resolved.

Anything else is a 422 before any file is opened or the hub is asked. A trusted
context (the command line, tests, the probe) uses no policy and loads any name.

A hub id is first loaded from the local Hugging Face cache, without the network,
so a cached tokenizer keeps working while the hub is unreachable (and is all
there is with JUDGE_TOKENIZER_OFFLINE or HF_HUB_OFFLINE). Otherwise one HEAD
request, short and without the hub client's retries, tells a hub outage
(`UnavailableError`, 503) from a name the hub does not have (422) before
transformers' own download starts: that one retries a dead hub for minutes.

transformers is imported on first use, not with this module: it pulls in torch, seconds
that a server's start would otherwise wait for (`auto_tokenizer`, `warm_up`). So is the
hub client (huggingface_hub, with its HTTP client, file locks and progress bars: ~40 ms
of a server's start), which transformers imports too.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_service.bounds import MAX_NAME_CHARS
from judge_service.errors import TokenizerError, UnavailableError

log = logging.getLogger(__name__)

SHOWN_CHARS = 100  # of a name, in any error message: a request never gets its input back
HUB_TIMEOUT_S = 5.0  # the one HEAD request that asks whether the hub is there

# A lone surrogate cannot be encoded (a 500 wherever the name meets the OS or a JSON
# encoder); control characters (NUL) make os.stat raise.
_BAD_CHAR = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
_HUB_ID = re.compile(r"(?:\w(?:[\w.-]*\w)?/)?\w(?:[\w.-]*\w)?")
# Names of transport failures across huggingface_hub's HTTP clients (requests, httpx,
# httpx2), and of the hub client's "this endpoint is no hub": the hub was not reached.
_TRANSPORT_ERRORS = frozenset(
    {"ConnectionError", "TimeoutError", "Timeout", "TransportError", "FileMetadataError"}
)


# transformers' lazy attribute loading is not thread-safe, and tokenizers are loaded from
# background threads: the one import of AutoTokenizer runs under this lock, and a thread
# that needs it while another imports it waits for that import rather than racing it.
_TRANSFORMERS_LOCK = threading.Lock()
_auto_tokenizer: Any = None
_warming: threading.Thread | None = None


def auto_tokenizer() -> Any:
    """transformers' ``AutoTokenizer``, imported by the first caller (the others wait)."""
    if _auto_tokenizer is None:
        with _TRANSFORMERS_LOCK:
            _import_locked()
    return _auto_tokenizer


def _import_locked() -> None:
    """The import, once; the caller holds _TRANSFORMERS_LOCK."""
    global _auto_tokenizer
    if _auto_tokenizer is None:
        from transformers import AutoTokenizer

        _auto_tokenizer = AutoTokenizer


def imported() -> bool:
    """Whether transformers' AutoTokenizer is imported (a load then costs only its own)."""
    return _auto_tokenizer is not None


def warm_up(
    then: Callable[[], object] | None = None, first: Callable[[], object] | None = None
) -> threading.Thread:
    """Start importing transformers in a daemon thread, so that a server answers its
    health checks at once and its first rollout does not pay the whole import; `first`
    runs in that thread before it (the server's other deferred imports), `then` after
    it. A load that comes during `first` or the import waits for both (`auto_tokenizer`);
    a failed import is logged here and raised again by the first load that tries it."""

    def run() -> None:
        # The lock is held from the start: a load that comes during `first` would import
        # transformers beside it, and `first`'s full collection (heap.py) would then walk
        # half of torch's objects holding the GIL (+0.4 s to a server's first rollout).
        with _TRANSFORMERS_LOCK:
            try:
                if first is not None:  # failing, it leaves its imports to their first use
                    first()
            except Exception:
                log.exception("the warm-up's first step failed")
            try:
                _import_locked()
            except Exception:
                log.exception("importing transformers failed")
        if then is not None:
            then()

    global _warming
    thread = threading.Thread(target=run, name="transformers-import", daemon=True)
    thread.start()
    _warming = thread
    return thread


def warming() -> bool:
    """Whether a `warm_up` is still under way (its import, or what runs after it)."""
    return _warming is not None and _warming.is_alive()


def shown(name: str) -> str:
    """A name as an error message may quote it: escaped, and at most SHOWN_CHARS of it."""
    if len(name) <= SHOWN_CHARS:
        return repr(name)
    return f"{name[:SHOWN_CHARS]!r}… ({len(name)} characters)"


def check_name(name: str, field: str) -> None:
    """422 for a name no loader should see: too long, not text, or with control characters."""
    if len(name) > MAX_NAME_CHARS:
        raise TokenizerError(
            f"a tokenizer name of {len(name)} characters exceeds the limit of {MAX_NAME_CHARS}",
            field=field,
        )
    bad = _BAD_CHAR.search(name)
    if bad is not None:
        what = "a lone surrogate" if bad.group() >= "\ud800" else "a control character"
        raise TokenizerError(
            f"the tokenizer name is not a valid name: {what} at character {bad.start()}",
            field=field,
        )


@dataclass(frozen=True)
class Source:
    """Where `from_pretrained` reads a tokenizer: a local directory, or a hub id."""

    target: str
    local: bool


def trusted_source(name: str) -> Source:
    """As transformers reads a name: an existing directory (``~`` expanded), else a hub id."""
    path = Path(name).expanduser()
    return Source(str(path), local=True) if path.is_dir() else Source(name, local=False)


def is_hub_id(name: str) -> bool:
    """Whether `name` is shaped like a hub repo id (``org/name`` or ``name``), by the
    hub's own rules: word characters, ``-`` and ``.``; no ``--`` or ``..``; <= 96 chars."""
    return (
        len(name) <= 96
        and _HUB_ID.fullmatch(name) is not None
        and "--" not in name
        and ".." not in name
        and not name.endswith(".git")
    )


class TokenizerPolicy:
    """Which names a server loads (see the module docstring)."""

    def __init__(
        self,
        allowed: Sequence[str] = (),
        roots: Sequence[str] = (),
        default: str | None = None,
    ) -> None:
        self.allowed = tuple(allowed)
        self.default = default
        # A root is matched both as written and with its symlinks resolved, so that a
        # root that is itself a link still admits the paths beneath it.
        self._roots = tuple(
            {os.path.abspath(os.path.expanduser(r)) for r in roots}
            | {os.path.realpath(os.path.expanduser(r)) for r in roots}
        )

    def admits_by_name(self, name: str) -> bool:
        """Whether `name` is admitted as written (the default, or listed exactly), whatever
        the disk holds."""
        return name == self.default or name in self.allowed

    def resolve(self, name: str, field: str) -> Source:
        """The source to load `name` from; TokenizerError (422) when this server refuses it."""
        check_name(name, field)
        if self.admits_by_name(name):
            return trusted_source(name)
        # Relative names resolve against the working directory, as transformers does. The
        # lexical check comes first, so a path outside every root is never looked at.
        path = os.path.abspath(name)
        under_root = self._under_root(path)
        if under_root:
            real = os.path.realpath(path)
            if self._under_root(real) and os.path.isdir(real):
                return Source(real, local=True)
        hub = is_hub_id(name)
        if hub and any(fnmatch.fnmatchcase(name, p) for p in self.allowed):
            return Source(name, local=False)
        if under_root:
            message = f"no tokenizer directory {shown(name)} under JUDGE_TOKENIZER_ROOTS"
        elif hub:
            message = (
                f"tokenizer {shown(name)} is not allowed on this server: a hub id must match "
                "JUDGE_ALLOWED_TOKENIZERS"
            )
        else:
            message = (
                f"tokenizer {shown(name)} is not allowed on this server: a local directory "
                "must be under JUDGE_TOKENIZER_ROOTS"
            )
        raise TokenizerError(message, field=field)

    def _under_root(self, path: str) -> bool:
        return any(
            path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in self._roots
        )


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as the hub client read it, or set since."""
    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return bool(constants.HF_HUB_OFFLINE) or flag in {"1", "true", "yes", "on"}


def hub_endpoint() -> str:
    """HF_ENDPOINT as it is now (the hub client read it once, at import)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or constants.ENDPOINT


def load_hf(source: Source, name: str, *, offline: bool, hub_timeout_s: float) -> Any:
    """The transformers tokenizer at `source`. Raises TokenizerError (the name cannot be
    loaded) or UnavailableError (the hub is unreachable), their field a placeholder."""
    if source.local:
        return _from_pretrained(source, name, local_files_only=True)
    if not is_hub_id(source.target):  # a path that is not there: the hub cannot have it
        raise TokenizerError(
            f"cannot load tokenizer {shown(name)}: no such directory, and not a hub id",
            field="tokenizer",
        )
    try:
        return auto_tokenizer().from_pretrained(
            source.target, local_files_only=True, trust_remote_code=False
        )
    except Exception:
        pass  # not (completely) in the local cache: ask the hub, below
    if offline or hub_offline():
        raise UnavailableError(
            f"tokenizer {shown(name)} is not in this server's Hugging Face cache, and the "
            "hub is off (JUDGE_TOKENIZER_OFFLINE or HF_HUB_OFFLINE)",
            field="tokenizer",
        )
    _ask_hub(source.target, name, hub_timeout_s)
    return _from_pretrained(source, name, local_files_only=False)


def _ask_hub(repo_id: str, name: str, timeout_s: float) -> None:
    """One HEAD request, no retries: is the hub there, and does it have this repo?"""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

    url = hf_hub_url(repo_id, "tokenizer_config.json", endpoint=hub_endpoint())
    try:
        get_hf_file_metadata(url, timeout=timeout_s)
    except Exception as exc:
        if _hub_down(exc):
            raise UnavailableError(
                f"the tokenizer hub did not answer for {shown(name)}: {_reason(exc, name)}",
                field="tokenizer",
            ) from None
        if isinstance(exc, EntryNotFoundError) and not isinstance(exc, RepositoryNotFoundError):
            return  # the repo is there without this file: transformers finds what it has
        raise TokenizerError(
            f"cannot load tokenizer {shown(name)}: {_reason(exc, name)}", field="tokenizer"
        ) from None


def _from_pretrained(source: Source, name: str, *, local_files_only: bool) -> Any:
    try:
        return auto_tokenizer().from_pretrained(
            source.target, local_files_only=local_files_only, trust_remote_code=False
        )
    except Exception as exc:  # transformers raises OSError, ValueError, the hub's errors
        if not source.local and _hub_down(exc):
            raise UnavailableError(
                f"the tokenizer hub failed while loading {shown(name)}: {_reason(exc, name)}",
                field="tokenizer",
            ) from None
        raise TokenizerError(
            f"cannot load tokenizer {shown(name)}: {_reason(exc, name)}", field="tokenizer"
        ) from None


def _hub_down(exc: BaseException) -> bool:
    """Whether a failure is the hub's (unreachable, 5xx, 429) rather than the name's."""
    from huggingface_hub.errors import (
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    current: BaseException | None = exc
    for _ in range(16):
        if current is None:
            return False
        if isinstance(current, LocalEntryNotFoundError):
            return True  # online, and not in the cache: the hub was not reached
        if isinstance(current, RepositoryNotFoundError | RevisionNotFoundError | HFValidationError):
            return False  # the hub answered: no such repo, revision or id
        if isinstance(current, HfHubHTTPError):
            status = getattr(getattr(current, "response", None), "status_code", None)
            return status is None or status >= 500 or status == 429
        if any(cls.__name__ in _TRANSPORT_ERRORS for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


def _reason(exc: BaseException, name: str) -> str:
    """The library's message on one line, short, with the name itself left out."""
    text = " ".join(str(exc).split())
    if name:
        text = text.replace(name, "<name>")
    return text[:300] + ("…" if len(text) > 300 else "")
