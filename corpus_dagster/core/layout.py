"""Where every artifact lives under the artifacts root: the file layout is the interface between assets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_dagster.core.config import artifacts_root, artifacts_store
from corpus_dagster.core.storage import Store, store_for


@dataclass(frozen=True)
class Layout:
    """Paths of one corpus build, derived from the resolved config."""

    root: Path
    dataset: str
    version: str
    ledger_override: str | None = None
    store_url: str | None = None  # the artifacts store whose mirror `root` is (core.storage), or None
    # credentials may be among them: never in a repr (a log line, a traceback's locals)
    storage_options: tuple[tuple[str, Any], ...] = field(default=(), repr=False)
    store_timeout_s: float = 60.0  # how long a sync may wait for a store that is gone (core.storage)

    @classmethod
    def from_config(cls, resolved: dict[str, Any]) -> Layout:
        """Layout for a resolved config."""
        return cls(
            root=artifacts_root(resolved),
            dataset=resolved["dataset"],
            version=resolved["version"],
            ledger_override=resolved["paths"].get("ledger"),
            store_url=artifacts_store(resolved),
            storage_options=tuple(sorted((resolved["paths"].get("storage_options") or {}).items())),
            store_timeout_s=float(resolved["paths"].get("store_timeout_s", 60.0)),
        )

    def store(self) -> Store | None:
        """This process's Store of the artifacts URL (the mirror at `root`), or None for a local root."""
        if self.store_url is None:
            return None
        return store_for(self.store_url, self.root, dict(self.storage_options), self.store_timeout_s)

    @property
    def ledger(self) -> Path:
        """The ledger file (config paths.ledger, else corpus/LEDGER.jsonl)."""
        if self.ledger_override:
            return Path(self.ledger_override).expanduser().resolve()
        return self.root / "corpus" / "LEDGER.jsonl"

    def raw_source(self, source_id: str) -> Path:
        """corpus/raw/<source_id>/: dated part folders plus the fetch record."""
        return self.root / "corpus" / "raw" / source_id

    def fetch_record(self, source_id: str) -> Path:
        """The record of the last completed fetch (files, checksums, current date folder, parts)."""
        return self.raw_source(source_id) / "_FETCH.json"

    def downloads(self, source_id: str) -> Path:
        """Cache of remote files, so a rerun downloads nothing whose checksum already matches."""
        return self.root / "cache" / "downloads" / source_id

    def stage(self, stage: str, source_id: str | None = None) -> Path:
        """stages/<stage>/[<source_id>/]: intermediate per-stage outputs (not part of the published contract)."""
        base = self.root / "stages" / stage
        return base / source_id if source_id is not None else base

    def source_outputs(self, source_id: str) -> list[Path]:
        """Every folder that holds outputs of one source (raw parts, downloads, per-source stage folders)."""
        stages = self.root / "stages"
        per_stage = sorted(p / source_id for p in stages.iterdir() if (p / source_id).is_dir()) if stages.is_dir() else []
        return [p for p in (self.raw_source(source_id), self.downloads(source_id)) if p.exists()] + per_stage

    @property
    def shards(self) -> Path:
        """corpus/<dataset>/<version>/: the published shards and _MANIFEST.json."""
        return self.root / "corpus" / self.dataset / self.version

    @property
    def manifest(self) -> Path:
        """corpus/<dataset>/<version>/_MANIFEST.json."""
        return self.shards / "_MANIFEST.json"

    @property
    def tokens(self) -> Path:
        """tokens/<dataset>/<version>/: token streams."""
        return self.root / "tokens" / self.dataset / self.version

    @property
    def analysis(self) -> Path:
        """analysis/<dataset>/<version>/: the corpus analysis (tables, clusters, figures, REPORT.md)."""
        return self.root / "analysis" / self.dataset / self.version

    @property
    def review(self) -> Path:
        """review/<dataset>/<version>/: the review sample (review_sample.parquet and index.html)."""
        return self.root / "review" / self.dataset / self.version

    def release(self, name: str) -> Path:
        """release/<name>/<version>/: a length-bucketed release with its dataset card."""
        return self.root / "release" / name / self.version
