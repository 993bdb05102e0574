"""Errors that name what went wrong and where, so a person can fix the input."""

from __future__ import annotations


class CorpusError(Exception):
    """Base class for every error this project raises on purpose."""


class ViolationsError(CorpusError):
    """A file breaks its schema: `<file>: N <kind> violation(s):` and one line per violation."""

    kind = ""

    def __init__(self, where: str, violations: list[str]):
        self.where = where
        self.violations = violations
        lines = "\n".join(f"  - {v}" for v in violations)
        super().__init__(f"{where}: {len(violations)} {self.kind} violation(s):\n{lines}")


class ConfigError(ViolationsError):
    """The corpus config breaks its schema; lists every violation with its line (when the file has one) and
    JSON path.

    `paths` holds, per violation, the path of the config node it is about, so the loader that still has the
    file can add line and column to violations found on the parsed value.
    """

    kind = "config"

    def __init__(self, where: str, violations: list[str], paths: list[tuple[str | int, ...]] | None = None):
        self.paths = list(paths) if paths is not None else []
        super().__init__(where, violations)


class LedgerError(ViolationsError):
    """A ledger row is invalid; names the ledger file, line and JSON path."""

    kind = "ledger"


class SourceError(CorpusError):
    """A source cannot be fetched or read; names the source, file and line where known."""

    def __init__(self, source_id: str, message: str, file: str | None = None, line: int | None = None):
        self.source_id = source_id
        self.file = file
        self.line = line
        where = f"source {source_id!r}"
        if file is not None:
            where += f", file {file}"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {message}")


class ChecksumMismatch(SourceError):
    """A fetched file's sha256 differs from the one pinned in the ledger."""


class SelectionError(SourceError):
    """A ledger row's `where` or `keep_fields` cannot be applied to the source's records."""


class RawPartError(CorpusError):
    """A raw part is corrupt: names the part file and line so the source can be refetched."""


class UpstreamMissing(CorpusError):
    """A stage's input has not been produced yet (or is stale): names the stage, source and what to run."""


class StageOutputError(CorpusError):
    """A stage output on disk does not match the record written with it (deleted, truncated or edited)."""


class StageOutputDamaged(StageOutputError):
    """A stage output a later stage was about to read differs from the size or sha256 in its stage record;
    one line names the stage, the file and what reruns it."""


class DedupInputError(CorpusError):
    """An input of the dedup stage is missing, malformed or stale; the message names the file."""


class PerplexityModelError(CorpusError):
    """The perplexity filter is enabled but its KenLM model cannot be loaded."""


class TokenizerLoadError(CorpusError):
    """The configured tokenizer cannot be loaded offline; the message says what to install or set."""


class TokenStreamError(CorpusError):
    """Token streams or their inputs are malformed; the message names the file."""


class AnalysisError(CorpusError):
    """The analysis cannot run on its input or settings; the message names the file or key and the fix."""


class ReleaseError(CorpusError):
    """The release's inputs are missing or inconsistent, or its output failed a check; names the file."""
