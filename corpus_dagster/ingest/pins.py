"""A ledger row's sha256 pins against the files its urls expand to, and the CLI's checks before any run.

A pin that names no file of its source would leave that file unverified without a word (a bare path where the
expansion yields `file://` URLs, a file since removed), so every pin must name one of the expanded files; the
fetch step and the CLI's pre-flight share the one rule below.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import fsspec

from corpus_dagster.core.errors import LedgerError, SourceError
from corpus_dagster.core.ledger import Source, check_config_against_ledger, ledger_line
from corpus_dagster.core.settings import Settings
from corpus_dagster.ingest.files import normalize_url, resolve_files

MAX_FILES_SHOWN = 3


def pin_url(key: str) -> str:
    """The file URL a pin key names, spelled the way resolve_files spells expanded files: a bare, relative or
    `~` path is a local file, exactly as in `urls`."""
    url = normalize_url(key)
    if url.startswith("file://"):
        fs, path = fsspec.core.url_to_fs(url)
        return fs.unstrip_protocol(path)
    return url


def match_pins(source: Source, file_urls: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """(pinned sha256 by expanded file URL, problems as `<json path>: <message>`): pure, no file is read.

    A problem is a pin that matches none of `file_urls`, or two keys naming one file with different hashes.
    """
    files = list(file_urls)
    expanded = set(files)
    pins: dict[str, str] = {}
    first_key: dict[str, str] = {}
    problems: list[str] = []
    for key, digest in source.sha256.items():
        where = f"$.sha256[{json.dumps(key, ensure_ascii=False)}]"
        url = pin_url(key)
        if url not in expanded:
            spelled = f" (read as {url})" if url != key else ""
            problems.append(f"{where}: pins a file{spelled} that is not among the files of source {source.source_id!r}"
                            f" ({_files_summary(files)}); fix the key or remove the pin")
        elif url in pins and pins[url] != digest:
            problems.append(f"{where}: pins {url} of source {source.source_id!r} again with another hash "
                            f"(first pinned by $.sha256[{json.dumps(first_key[url], ensure_ascii=False)}])")
        else:
            pins[url] = digest
            first_key.setdefault(url, key)
    return pins, problems


def _files_summary(files: list[str]) -> str:
    if not files:
        return "its urls expand to no file"
    shown = ", ".join(files[:MAX_FILES_SHOWN]) + (", ..." if len(files) > MAX_FILES_SHOWN else "")
    return f"its urls expand to {len(files)} file(s): {shown}"


def pin_problems(source: Source, file_urls: Iterable[str], ledger_path: str | Path) -> tuple[dict[str, str], list[str]]:
    """match_pins with each problem prefixed by the ledger line of the source's row, as ledger errors are."""
    pins, problems = match_pins(source, file_urls)
    if problems:
        line = ledger_line(ledger_path, source.source_id)
        at = f"line {line}: " if line is not None else f"source {source.source_id!r}: "
        problems = [at + p for p in problems]
    return pins, problems


def checked_pins(source: Source, file_urls: Iterable[str], ledger_path: str | Path) -> dict[str, str]:
    """The source's pins by expanded file URL; LedgerError (ledger file, line, JSON path, source) if one
    matches no file. The fetch step calls this before reading any file."""
    pins, problems = pin_problems(source, file_urls, ledger_path)
    if problems:
        raise LedgerError(str(ledger_path), problems)
    return pins


def preflight(settings: Settings, ledger_sources: list[Source], config_path: str | Path | None) -> None:
    """What the CLI checks before it starts any run, so bad input exits 2 with one message instead of a run
    failure: every config `sources` entry names a ledger row (ConfigError), and every sha256 pin names a file
    of its source (LedgerError).

    Only sources that pin something are expanded (local globs are cheap; a remote listing is what the fetch
    does anyway). A source whose urls cannot be listed is left to its fetch, which reports it as a source
    failure.
    """
    check_config_against_ledger(settings, ledger_sources, config_path)
    check_pins(settings, ledger_sources)


def check_pins(settings: Settings, ledger_sources: list[Source]) -> None:
    """Every sha256 pin of the ledger names a file of its source (LedgerError naming file, line and key);
    the half of `preflight` that needs the urls expanded."""
    from corpus_dagster.core.layout import Layout

    ledger_path = Layout.from_config(settings.resolved).ledger
    timeout_s = settings.ingest.timeout_s
    problems: list[str] = []
    for source in ledger_sources:
        if not source.sha256:
            continue
        try:
            files = resolve_files(source, timeout_s)
        except SourceError:
            continue
        problems.extend(pin_problems(source, [f.url for f in files], ledger_path)[1])
    if problems:
        raise LedgerError(str(ledger_path), problems)
