"""Artifacts on any fsspec store (`s3://`, `gs://`, `memory://`, ...): a local mirror per machine, synced.

Every stage reads and writes local files (memory maps, atomic renames, flock): that is the fast path, and it
stays the only path the stages know. When `paths.artifacts` is a URL, the layout's root is this machine's
mirror of it, and the mirror is synced with the store:

- `pull` before a step reads: every object whose ETag changed since this mirror last saw it is downloaded
  (atomically); a file the store no longer holds is removed here, unless this machine changed it since.
- `push` after work is done (a step, a unit): every file this machine changed is uploaded, data first and
  JSON files (stage records, manifests, done-markers, plans) last. Readers trust only what a record or
  manifest names, with its sha256, so a push cut short leaves nothing that looks committed. A file removed
  here is removed from the store after the uploads.

One writer per object: before a push overwrites an object, the store's ETag must still be the one this
mirror last saw. An object changed by another machine since is a `StorageConflict`, never a silent
overwrite. Temp names (`core.atomic.is_temp_name`), lock files and check scratch folders never leave the
machine.

Credentials and endpoints come from the store's standard settings (for S3: `AWS_ENDPOINT_URL`,
`AWS_ACCESS_KEY_ID`, an AWS profile, ...) or `paths.storage_options`, read in the process that opens the store
(an option `{env: NAME}` from the environment variable NAME then). They never reach a message: every error
text goes through `redact`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_dagster.core.atomic import atomic_path, atomic_write_bytes, is_temp_name
from corpus_dagster.core.errors import CorpusError

STATE_NAME = ".mirror-state.json"
LOCK_NAME = ".mirror.lock"
MIRROR_ENV = "CORPUS_MIRROR"
IO_PREFIX = ".dagster-io"  # the values Dagster passes between steps (defs.store_io): never mirrored
LOCAL_SCHEMES = ("", "file", "local")


class StorageError(CorpusError):
    """The artifacts store could not be read or written; names the object."""


class StorageConflict(StorageError):
    """Another writer changed an object this machine is about to overwrite or remove."""


# Option names whose values are credentials (fsspec's s3fs, gcsfs, adlfs, sftp, http: key, secret, token,
# password, account_key, sas_token, aws_secret_access_key, client_kwargs' too)
SECRET_OPTION = re.compile(r"key|secret|token|passw|credential|session|sas|auth", re.IGNORECASE)
URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
REDACTED = "***"


def secret_values(options: Any) -> list[str]:
    """The credential values among storage options (nested mappings too), longest first."""
    found: list[str] = []

    def walk(node: Any, secret: bool) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, secret or bool(SECRET_OPTION.search(str(name))))
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value, secret)
        elif secret and isinstance(node, str) and node:
            found.append(node)

    walk(options, False)
    return sorted(set(found), key=len, reverse=True)


def redact(text: str, options: Any = None) -> str:
    """`text` with the user and password of every URL in it, and every credential among `options`, replaced
    by `***`: what any message about a store may say."""
    text = URL_USERINFO.sub(rf"\1{REDACTED}@", str(text))
    for value in secret_values(options or {}):
        text = text.replace(value, REDACTED)
    return text


def resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """Storage options as the file system takes them: a value `{"env": NAME}` (at any depth) becomes the
    environment variable NAME, read now, in this process."""

    def resolve(name: str, node: Any) -> Any:
        if isinstance(node, dict) and set(node) == {"env"}:
            value = os.environ.get(str(node["env"]))
            if value is None:
                raise StorageError(f"paths.storage_options.{name}: the environment variable {node['env']} is not set")
            return value
        if isinstance(node, dict):
            return {k: resolve(f"{name}.{k}", v) for k, v in node.items()}
        return node

    return {k: resolve(str(k), v) for k, v in options.items()}


def is_remote(url: str) -> bool:
    """Whether an artifacts root names a store other than this machine's file system."""
    scheme, sep, _ = str(url).partition("://")
    return bool(sep) and scheme not in LOCAL_SCHEMES


def local_path(url: str) -> str:
    """A local artifacts root without its `file://` prefix."""
    return url[len("file://"):] if url.startswith("file://") else url


def default_mirror(url: str, configured: str | None = None) -> Path:
    """Where this machine mirrors `url`: $CORPUS_MIRROR, else `paths.mirror`, else a per-user cache folder;
    always a sub-folder named by the URL's hash, so one mirror folder serves several stores."""
    base = os.environ.get(MIRROR_ENV) or configured or str(Path.home() / ".cache" / "corpus-dagster" / "mirror")
    return Path(base).expanduser().resolve() / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


def skipped(rel: str) -> bool:
    """Whether a mirror path stays on this machine: temp names, lock files, scratch folders, the mirror's own
    state."""
    for part in rel.split("/"):
        if part in (STATE_NAME, LOCK_NAME, ".locks", IO_PREFIX) or is_temp_name(part) or (part.startswith(".") and ".rebuild-" in part):
            return True
    return False


def _token(info: dict[str, Any]) -> str:
    """What changes whenever an object's bytes do: the ETag where the store has one, else size and time."""
    etag = info.get("ETag") or info.get("etag") or info.get("md5Hash")
    if etag:
        return str(etag).strip('"')
    when = info.get("mtime") or info.get("LastModified") or info.get("created") or info.get("updated")
    if hasattr(when, "timestamp"):  # one file system gives a datetime in `info` and a float in `find`
        when = when.timestamp()
    return f"{info.get('size')}:{when}"


@dataclass
class SyncReport:
    """What one pull or push moved."""

    files: int = 0
    bytes: int = 0
    removed: int = 0
    names: list[str] = field(default_factory=list)


@dataclass
class Store:
    """An artifacts store at `url` and this machine's mirror of it."""

    url: str
    mirror: Path
    options: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        import fsspec  # a local build never pays for fsspec's backends

        self.options = resolve_options(self.options)
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url.rstrip("/"), **self.options)
        except (ValueError, TypeError, OSError) as exc:
            raise StorageError(f"cannot open the artifacts store {self.shown_url}: {self.redact(str(exc))}") from None
        self.root = self.root.rstrip("/")
        self._guard = threading.Lock()

    @property
    def shown_url(self) -> str:
        """The store's URL as messages show it (no user or password)."""
        return redact(self.url)

    def redact(self, text: str) -> str:
        """`text` without this store's credentials (`redact`)."""
        return redact(text, self.options)

    # --- state --------------------------------------------------------------------------------------------

    def _state_path(self) -> Path:
        return self.mirror / STATE_NAME

    def _load_state(self) -> dict[str, dict[str, Any]]:
        try:
            return json.loads(self._state_path().read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}

    def _save_state(self, state: dict[str, dict[str, Any]]) -> None:
        atomic_write_bytes(self._state_path(), json.dumps(state, sort_keys=True).encode())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, Any]]]:
        """The mirror's state, held by this process alone (flock: several workers of one machine may share a
        mirror) and saved when the block ends."""
        self.mirror.mkdir(parents=True, exist_ok=True)
        with self._guard, open(self.mirror / LOCK_NAME, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            state = self._load_state()
            try:
                yield state
            finally:
                self._save_state(state)

    @staticmethod
    def _stamp(path: Path) -> list[int]:
        st = path.stat()
        return [st.st_size, st.st_mtime_ns]

    # --- the store ----------------------------------------------------------------------------------------

    def _remote(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def listing(self) -> dict[str, str]:
        """Every object under the root, by path relative to it: its change token."""
        self.fs.invalidate_cache()  # a file system's listing cache outlives a step in a long-lived worker process
        try:
            found = self.fs.find(self.root, detail=True) if self.fs.exists(self.root) else {}
        except OSError as exc:
            raise StorageError(f"cannot list {self.shown_url}: {self.redact(str(exc))}") from exc
        prefix = self.root + "/"
        out = {}
        for name, info in found.items():
            name = name.rstrip("/")
            if info.get("type") == "directory" or not name.startswith(prefix):
                continue
            rel = name[len(prefix):]
            if not skipped(rel):
                out[rel] = _token(info)
        return out

    def local_files(self) -> dict[str, Path]:
        """Every file of the mirror that belongs in the store, by relative path."""
        out: dict[str, Path] = {}
        for dirpath, dirnames, filenames in os.walk(self.mirror):
            base = Path(dirpath)
            rel_dir = base.relative_to(self.mirror).as_posix()
            dirnames[:] = sorted(d for d in dirnames if not skipped(d))
            for name in sorted(filenames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if not skipped(rel):
                    out[rel] = base / name
        return out

    # --- sync ---------------------------------------------------------------------------------------------

    def pull(self, only: str | None = None) -> SyncReport:
        """Bring the mirror up to the store: download what changed there, remove what it dropped (unless this
        machine changed the file since; a push will settle it). `only`: just that file or folder (relative)."""
        report = SyncReport()
        prefix = None if only is None else only.strip("/")

        def wanted(rel: str) -> bool:
            return prefix is None or rel == prefix or rel.startswith(prefix + "/")

        remote = {rel: t for rel, t in self.listing().items() if wanted(rel)}
        with self._locked() as state:
            for rel, token in sorted(remote.items()):
                path = self.mirror / rel
                known = state.get(rel)
                if known and known["token"] == token and path.is_file():
                    continue  # as last synced, or changed here since (the next push uploads it)
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with atomic_path(path) as tmp:
                        self.fs.get_file(self._remote(rel), str(tmp))
                except (OSError, FileNotFoundError) as exc:
                    raise StorageError(self.redact(f"cannot download {self._remote(rel)}: {exc}")) from exc
                state[rel] = {"token": token, "stamp": self._stamp(path)}
                report.files += 1
                report.bytes += path.stat().st_size
                report.names.append(rel)
            for rel in sorted(rel for rel in state if wanted(rel) and rel not in remote):
                path = self.mirror / rel
                if path.is_file() and self._stamp(path) != state[rel]["stamp"]:
                    continue
                path.unlink(missing_ok=True)
                del state[rel]
                report.removed += 1
        return report

    def push(self) -> SyncReport:
        """Upload what this machine changed, data before JSON; then remove from the store what it removed."""
        report = SyncReport()
        with self._locked() as state:
            files = self.local_files()
            changed = sorted((rel for rel, path in files.items()
                              if rel not in state or self._stamp(path) != state[rel]["stamp"]),
                             key=lambda rel: (rel.endswith(".json"), rel))
            gone = sorted(rel for rel in state if rel not in files)
            if not changed and not gone:
                return report
            remote = self.listing()
            for rel in changed + gone:
                known = state.get(rel)
                theirs = remote.get(rel)
                if theirs is not None and (known is None or known["token"] != theirs):
                    raise StorageConflict(
                        f"{self._remote(rel)} was changed by another writer since this machine last synced "
                        f"{self.mirror}; one writer per artifacts root and stage (docs/deploy.md)")
            for rel in changed:
                path = files[rel]
                stamp = self._stamp(path)
                try:
                    self.fs.put_file(str(path), self._remote(rel))
                    token = _token(self.fs.info(self._remote(rel)))
                except OSError as exc:
                    raise StorageError(self.redact(f"cannot upload {path} to {self._remote(rel)}: {exc}")) from exc
                state[rel] = {"token": token, "stamp": stamp}
                report.files += 1
                report.bytes += stamp[0]
                report.names.append(rel)
            for rel in gone:
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(self._remote(rel))
                del state[rel]
                report.removed += 1
        return report


# --- the store of this process ----------------------------------------------------------------------------

_ACTIVE: dict[str, Store] = {}
_ACTIVE_GUARD = threading.Lock()


def store_for(url: str, mirror: Path, options: dict[str, Any] | None = None) -> Store:
    """The process's one Store of `url` (its fsspec file system and state lock are shared by every step)."""
    with _ACTIVE_GUARD:
        store = _ACTIVE.get(url)
        if store is None or store.mirror != mirror:
            store = _ACTIVE[url] = Store(url, mirror, dict(options or {}))
        return store


def forget_stores() -> None:
    """Drop this process's stores (and fsspec's cached file systems): for a process that points the same URL
    at another server, as a test does."""
    import fsspec

    with _ACTIVE_GUARD:
        _ACTIVE.clear()
    todo = [fsspec.AbstractFileSystem]
    while todo:  # each file system class caches its own instances
        cls = todo.pop()
        cls.clear_instance_cache()
        todo.extend(cls.__subclasses__())


_LAST_PUSH = [float("-inf")]  # time.monotonic() of this process's last push


def push_all(min_interval_s: float = 0.0) -> list[SyncReport]:
    """Push every store this process has used: what a unit, a step or a run calls when its work is done.

    A push walks the whole mirror (a stat per file) to find what changed; `min_interval_s` skips the push
    when the last one was more recent, so a stage of many small units does not walk the mirror per unit."""
    with _ACTIVE_GUARD:
        stores = list(_ACTIVE.values())
        if not stores or time.monotonic() - _LAST_PUSH[0] < min_interval_s:
            return []
    reports = [store.push() for store in stores]
    _LAST_PUSH[0] = time.monotonic()
    return reports


def sync(store: Store | None, only: str | None = None) -> tuple[list[SyncReport], SyncReport | None]:
    """Before reading: push what this process wrote so far (an earlier step of an in-process run), then bring
    the mirror (or just `only` in it) up to the store, and log what moved. Nothing for a local root."""
    if store is None:
        return [], None
    pushed = push_all()
    pulled = store.pull(only)
    if pulled.files or pulled.removed or any(r.files or r.removed for r in pushed):
        logging.getLogger("corpus_dagster.storage").info(
            "artifacts store %s: pushed %d file(s), pulled %d file(s) (%.1f MB), removed %d",
            store.shown_url, sum(r.files for r in pushed), pulled.files, pulled.bytes / 1e6,
            pulled.removed + sum(r.removed for r in pushed))
    return pushed, pulled
