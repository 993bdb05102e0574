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
mirror last saw (on S3 the put itself carries the condition: `If-Match`, `If-None-Match`). An object another
machine changed since is compared byte for byte: the same bytes (a deterministic build on two machines) are
taken as this mirror's, other bytes are a `StorageConflict`, never a silent overwrite, and the next sync of
the losing mirror takes the store's copy (pull before push). Temp names (`core.atomic.is_temp_name`), lock files and check scratch folders never leave the
machine.

Keys are data, never paths: a key of the listing that is not a plain relative path (an empty, `.` or `..`
component, a backslash, a NUL, a leading slash) is refused, named in one warning, never written here and
never removed from the store; and every path is checked to resolve inside the mirror before a byte is written.

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
REFUSED_NAME = ".mirror-refused.json"  # the refused keys this mirror has warned of (one warning per key)
LOCK_NAME = ".mirror.lock"
MIRROR_ENV = "CORPUS_MIRROR"
IO_PREFIX = ".dagster-io"  # the values Dagster passes between steps (defs.store_io): never mirrored
LOCAL_SCHEMES = ("", "file", "local")
S3_SINGLE_PUT_BYTES = 100 * 2**20  # s3fs uploads a file this large or larger in parts (its 2 x 50 MiB chunks)


class StorageError(CorpusError):
    """The artifacts store could not be read or written; names the object."""


class StorageConflict(StorageError):
    """Another writer changed an object this machine is about to overwrite or remove."""


class StoreUnavailable(StorageError):
    """The store cannot be reached, its bucket is missing, or it refused the credentials: a fault of the store,
    not of the data, so a rerun when the store is back resumes (finished steps are kept)."""

    def __init__(self, url: str, fault: str, detail: str):
        self.url, self.fault = redact(url), fault
        super().__init__(f"artifacts store {self.url}: {fault} ({redact(detail)})")


class StoreExtraMissing(StorageError):
    """The file system package of the store's scheme is not installed (s3fs for s3://: the `[deploy]` extra)."""


EXTRAS = {"s3": "pip install 'corpus-dagster[deploy]'", "s3a": "pip install 'corpus-dagster[deploy]'",
          "gs": "pip install gcsfs", "gcs": "pip install gcsfs", "az": "pip install adlfs", "abfs": "pip install adlfs"}
UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
               "ClientConnectorError", "ServerDisconnectedError", "ServerTimeoutError")
CREDENTIALS_REFUSED = ("403", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken",
                       "NoCredentialsError", "PartialCredentialsError", "InvalidClientTokenId", "AllAccessDisabled")
_SIGNED = re.compile(r"(?i)\b(X-Amz-Credential|X-Amz-Signature|X-Amz-Security-Token|AWSAccessKeyId|Signature|"
                     r"sig|token)=[^&\s\"']+")



def store_fault(exc: BaseException) -> str | None:
    """What an error of the store's client says about the store (unreachable, bucket missing, credentials
    refused), or None for any other error (a missing object, a bug). Reads the whole chain: s3fs wraps botocore's
    errors in OSError and keeps the original as the cause."""
    seen: BaseException | None = exc
    while seen is not None:
        names = {cls.__name__ for cls in type(seen).__mro__}
        response = getattr(seen, "response", None)
        code = str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
        if names & set(UNREACHABLE) or isinstance(seen, (ConnectionRefusedError, TimeoutError)):
            return "unreachable"
        if code == "NoSuchBucket":
            return "bucket missing"
        if code in CREDENTIALS_REFUSED or names & set(CREDENTIALS_REFUSED):
            return "credentials refused"
        seen = seen.__cause__ or seen.__context__
    return None


def client_options(url: str, options: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """The file system options of a store, with timeouts and retries bounded (for S3: botocore's connect and
    read timeouts, two attempts), so a store that is gone fails a sync within about `timeout_s` instead of after
    the client's whole retry schedule. What `options` sets itself stays as given."""
    if url.partition("://")[0] not in ("s3", "s3a"):
        return dict(options)
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("connect_timeout", max(1.0, timeout_s / 4))
    config.setdefault("read_timeout", max(1.0, timeout_s / 4))
    config.setdefault("retries", {"total_max_attempts": 2, "mode": "standard"})
    return {**options, "config_kwargs": config}


class UnsafeKey(StorageError):
    """A store key that would name a file outside the mirror (or not a plain relative path at all)."""


def key_problem(rel: str) -> str | None:
    """Why a key (relative to the store's root) cannot name a file of the mirror, or None for a plain relative
    path: a key is data written by whoever can write to the bucket, never a path to trust."""
    if not rel:
        return "an empty key"
    if "\x00" in rel:
        return "a NUL byte"
    if "\\" in rel:
        return "a backslash"
    if rel.startswith("/"):
        return "a leading slash"
    for part in rel.split("/"):
        if part == "":
            return "an empty component"
        if part in (".", ".."):
            return f"a {part!r} component"
    return None


def refused_line(url: str, refused: dict[str, str], shown: int = 5) -> str:
    """The one warning that names refused keys (repr: a key may hold any character) and why."""
    keys = sorted(refused)
    named = ", ".join(f"{key!r} ({refused[key]})" for key in keys[:shown])
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return (f"artifacts store {url}: refused {len(keys)} key(s) that are not plain relative paths, left in the "
            f"store untouched and never written here: {named}{more}")


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
    text = _SIGNED.sub(rf"\1={REDACTED}", URL_USERINFO.sub(rf"\1{REDACTED}@", str(text)))
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
    """Where this machine mirrors `url`: `paths.mirror` when the config sets it, else $CORPUS_MIRROR, else a
    per-user cache folder; always a sub-folder named by the URL's hash, so one mirror folder serves several
    stores. The config wins, as the config's own documentation says: a machine-wide variable must not move the
    mirror of a config that names one."""
    base = configured or os.environ.get(MIRROR_ENV) or str(Path.home() / ".cache" / "corpus-dagster" / "mirror")
    return Path(base).expanduser().resolve() / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


def skipped(rel: str) -> bool:
    """Whether a mirror path stays on this machine: temp names, lock files, scratch folders, the mirror's own
    state."""
    for part in rel.split("/"):
        if part in (STATE_NAME, LOCK_NAME, REFUSED_NAME, ".locks", IO_PREFIX) or is_temp_name(part) or (part.startswith(".") and ".rebuild-" in part):
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
    refused: dict[str, str] = field(default_factory=dict)  # keys refused and first warned of by this sync


@dataclass
class Store:
    """An artifacts store at `url` and this machine's mirror of it."""

    url: str
    mirror: Path
    options: dict[str, Any] = field(default_factory=dict, repr=False)
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        import fsspec  # a local build never pays for fsspec's backends

        self.options = resolve_options(self.options)
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url.rstrip("/"),
                                                       **client_options(self.url, self.options, self.timeout_s))
        except ImportError as exc:
            scheme = self.url.partition("://")[0]
            hint = EXTRAS.get(scheme, "install the fsspec file system of that scheme")
            raise StoreExtraMissing(f"the artifacts store {redact(self.url)} needs a package that is not "
                                    f"installed ({exc}): {hint}") from exc
        except (ValueError, TypeError, OSError) as exc:
            raise StorageError(f"cannot open the artifacts store {self.shown_url}: {self.redact(str(exc))}") from None
        if hasattr(self.fs, "retries"):
            self.fs.retries = 2  # s3fs retries each call 5 times over botocore's own attempts: bounded here too
        self.root = self.root.rstrip("/")
        self._guard = threading.Lock()
        self.refused: dict[str, str] = {}  # the last listing's refused keys: why each is not a path

    def local(self, rel: str) -> Path:
        """The mirror path of a key, checked before a byte is written there: a plain relative path that
        resolves inside the mirror (a symbolic link on the way cannot take it out), else UnsafeKey."""
        problem = key_problem(rel)
        if problem is None:
            base = self.mirror.resolve()
            real = (base / rel).resolve()
            if real == base or not real.is_relative_to(base):
                problem = "resolves outside the mirror"
        if problem is not None:
            raise UnsafeKey(f"{self._remote(rel)!r} is not a path inside {self.mirror}: {problem}")
        return self.mirror / rel

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

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """A call to the store: a fault of the store itself is StoreUnavailable (one line naming the store, no
        secret), any other error of the client a StorageError naming `what`."""
        try:
            yield
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - botocore's and aiohttp's errors are not all OSErrors
            fault = store_fault(exc)
            if fault is not None:
                raise StoreUnavailable(self.url, fault, self.redact(f"{type(exc).__name__}: {exc}")) from exc
            if isinstance(exc, OSError):
                raise StorageError(f"cannot {what}: {self.redact(str(exc))}") from exc
            raise

    def listing(self) -> dict[str, str]:
        """Every object under the root, by path relative to it: its change token."""
        self.fs.invalidate_cache()  # a file system's listing cache outlives a step in a long-lived worker process
        with self._calling(f"list {redact(self.url)}"):
            found = self.fs.find(self.root, detail=True) if self.fs.exists(self.root) else {}
            if not found and hasattr(self.fs, "split_path"):  # a bucket store: is the bucket there at all?
                bucket = self.fs.split_path(self.root)[0]
                if not self.fs.exists(bucket):
                    raise StoreUnavailable(self.url, "bucket missing", f"no bucket {bucket!r} at the endpoint")
        prefix = self.root + "/"
        out = {}
        refused = {}
        for name, info in found.items():
            if info.get("type") == "directory" or not name.startswith(prefix):
                continue
            rel = name[len(prefix):]
            problem = key_problem(rel)
            if problem is not None:
                refused[rel] = problem
            elif not skipped(rel):
                out[rel] = _token(info)
        self.refused = refused
        return out

    def _warn_refused(self) -> dict[str, str]:
        """Warn once per mirror of each refused key of the last listing (the mirror's lock held); returns the
        keys warned of now."""
        path = self.mirror / REFUSED_NAME
        try:
            warned = set(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            warned = set()
        new = {key: why for key, why in self.refused.items() if key not in warned}
        if new:
            logging.getLogger("corpus_dagster.storage").warning(refused_line(self.url, new))
            atomic_write_bytes(path, json.dumps(sorted(warned | set(new))).encode())
        return new

    def forget_warnings(self) -> None:
        """Say every refused key again on the next sync: what a CLI run calls first, so each run names them once."""
        (self.mirror / REFUSED_NAME).unlink(missing_ok=True)

    def local_files(self) -> dict[str, Path]:
        """Every file of the mirror that belongs in the store, by relative path."""
        out: dict[str, Path] = {}
        for dirpath, dirnames, filenames in os.walk(self.mirror):
            base = Path(dirpath)
            rel_dir = base.relative_to(self.mirror).as_posix()
            dirnames[:] = sorted(d for d in dirnames if not skipped(d))
            for name in sorted(filenames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if not skipped(rel) and key_problem(rel) is None:
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
            report.refused = self._warn_refused()
            for rel, token in sorted(remote.items()):
                path = self.local(rel)
                known = state.get(rel)
                if known and known["token"] == token:
                    # as last synced, changed here since (the next push uploads it), or removed here since (the
                    # next push removes it from the store: a pull must not bring back what this machine deleted)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                with self._calling(f"download {self._remote(rel)}"), atomic_path(path) as tmp:
                    self.fs.get_file(self._remote(rel), str(tmp))
                state[rel] = {"token": token, "stamp": self._stamp(path)}
                report.files += 1
                report.bytes += path.stat().st_size
                report.names.append(rel)
            for rel in sorted(rel for rel in state if wanted(rel) and rel not in remote):
                try:
                    path = self.local(rel)
                except UnsafeKey:  # a state file of an older version: forgotten, never acted on
                    del state[rel]
                    continue
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
            gone = sorted(rel for rel in state if rel not in files and key_problem(rel) is None)
            if not changed and not gone:
                return report
            remote = self.listing()
            for rel in changed + gone:
                known = state.get(rel)
                theirs = remote.get(rel)
                if theirs is not None and (known is None or known["token"] != theirs):
                    if rel not in files or not self._same_bytes(rel, files[rel]):
                        raise self._conflict(rel)
                    state[rel] = {"token": theirs, "stamp": self._stamp(files[rel])}  # another writer's same bytes
            for rel in changed:
                path = files[rel]
                stamp = self._stamp(path)
                if state.get(rel, {}).get("stamp") == stamp:
                    continue  # settled above: the store holds these bytes already
                expected = state[rel]["token"] if rel in state else None
                with self._calling(f"upload {path} to {self._remote(rel)}"):
                    try:
                        self._put(path, rel, expected)
                    except OSError as exc:
                        if not _precondition_failed(exc):
                            raise
                        if not self._same_bytes(rel, path):  # written by another since the listing above
                            raise self._conflict(rel) from exc
                    token = _token(self.fs.info(self._remote(rel)))
                state[rel] = {"token": token, "stamp": stamp}
                report.files += 1
                report.bytes += stamp[0]
                report.names.append(rel)
            for rel in gone:
                with self._calling(f"remove {self._remote(rel)}"), contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(self._remote(rel))
                del state[rel]
                report.removed += 1
        return report


    # --- two writers -----------------------------------------------------------------------------------

    def _put(self, path: Path, rel: str, expected: str | None) -> None:
        """Upload one file, on S3 only if the object is still the one this mirror last saw (`If-Match` its ETag,
        or `If-None-Match: *` for an object this mirror never saw), so no other writer's object is overwritten
        between the check and the put. Other stores (and S3 multipart uploads replacing an object) put
        without a condition: the window between listing and put stays (docs/deploy.md)."""
        remote = self._remote(rel)
        if type(self.fs).__name__ != "S3FileSystem":
            self.fs.put_file(str(path), remote)
        elif expected is None:
            self.fs.put_file(str(path), remote, mode="create")
        elif path.stat().st_size < S3_SINGLE_PUT_BYTES and ":" not in expected:
            self.fs.put_file(str(path), remote, IfMatch=f'"{expected}"')
        else:
            self.fs.put_file(str(path), remote)

    def _same_bytes(self, rel: str, path: Path) -> bool:
        """Whether the store's object holds exactly the bytes of a local file (a deterministic build writes the
        same bytes on two machines: no conflict then)."""
        chunk = 1 << 20
        self.fs.invalidate_cache(self._remote(rel))  # a listing cached by the file system is older than the object
        try:
            with self._calling(f"read {self._remote(rel)}"):
                if self.fs.size(self._remote(rel)) != path.stat().st_size:
                    return False
                with self.fs.open(self._remote(rel), "rb") as theirs, open(path, "rb") as ours:
                    while True:
                        mine = ours.read(chunk)
                        if theirs.read(chunk) != mine:
                            return False
                        if not mine:
                            return True
        except StorageError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                return False
            raise

    def _conflict(self, rel: str) -> StorageConflict:
        return StorageConflict(
            f"{self._remote(rel)} holds other bytes, written by another writer since the mirror {self.mirror} "
            f"last synced; this run's copy was not pushed. Rerun: the next run takes the store's copy into that "
            f"mirror first and rebuilds what no longer matches (two writers on one artifacts root: docs/deploy.md)")


def _precondition_failed(exc: BaseException) -> bool:
    """Whether an S3 error is a failed `If-Match` / `If-None-Match` (another writer's object is there)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, FileExistsError):
            return True
        code = getattr(seen, "response", {}).get("Error", {}).get("Code") if hasattr(seen, "response") else None
        if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# --- the store of this process ----------------------------------------------------------------------------

_ACTIVE: dict[str, Store] = {}
_ACTIVE_GUARD = threading.Lock()


def store_for(url: str, mirror: Path, options: dict[str, Any] | None = None, timeout_s: float = 60.0) -> Store:
    """The process's one Store of `url` (its fsspec file system and state lock are shared by every step)."""
    with _ACTIVE_GUARD:
        store = _ACTIVE.get(url)
        if store is None or store.mirror != mirror:
            store = _ACTIVE[url] = Store(url, mirror, dict(options or {}), timeout_s)
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
    """Before reading: bring the mirror (or just `only` in it) up to the store, then push what this process
    wrote so far (an earlier step of an in-process run), and log what moved. Nothing for a local root.

    Pull before push: a mirror that lost a conflict to another writer holds a copy the store does not; the
    pull replaces it with the store's (its stage record then decides what is rebuilt), so the next run heals
    instead of failing on the same object again."""
    if store is None:
        return [], None
    pulled = store.pull(only)
    pushed = push_all()
    if pulled.files or pulled.removed or any(r.files or r.removed for r in pushed):
        logging.getLogger("corpus_dagster.storage").info(
            "artifacts store %s: pushed %d file(s), pulled %d file(s) (%.1f MB), removed %d",
            store.shown_url, sum(r.files for r in pushed), pulled.files, pulled.bytes / 1e6,
            pulled.removed + sum(r.removed for r in pushed))
    return pushed, pulled
