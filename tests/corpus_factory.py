"""Small generated corpora and ledgers for tests (no network, a few KB each)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

WORDS = (
    "the of and to in is was for on that with as by at from this be are have an which or not it had his but "
    "river mountain library signal garden engine harbor silver winter market theory pattern lantern orbit "
    "meadow copper canyon bridge forest planet violin compass island thunder marble velvet crystal falcon"
).split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def document(rng: random.Random, sentences: int = 12) -> str:
    return " ".join(sentence(rng, rng.randint(8, 16)) for _ in range(sentences))


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def make_corpus(root: Path, seed: int = 0, docs_per_source: int = 40) -> dict[str, Path]:
    """Three sources in three formats (jsonl, jsonl.zst, text files); returns source_id -> input location."""
    import zstandard

    rng = random.Random(seed)
    src = root / "sources"
    a = write_jsonl(src / "alpha.jsonl", [{"text": document(rng), "link": f"https://a.example/{i}"} for i in range(docs_per_source)])
    body = "".join(json.dumps({"content": document(rng)}) + "\n" for _ in range(docs_per_source)).encode()
    b = src / "beta.jsonl.zst"
    b.write_bytes(zstandard.ZstdCompressor().compress(body))
    tdir = src / "gamma"
    tdir.mkdir(parents=True, exist_ok=True)
    for i in range(12):
        (tdir / f"doc{i:02d}.txt").write_text(document(rng), encoding="utf-8")
    return {"alpha": a, "beta": b, "gamma": tdir}


def ledger_rows(inputs: dict[str, Path]) -> list[dict]:
    return [
        {"source_id": "alpha", "urls": [f"file://{inputs['alpha']}"], "format": "jsonl", "url_field": "link",
         "license_spdx": "CC-BY-4.0"},
        {"source_id": "beta", "urls": [str(inputs["beta"])], "format": "jsonl.zst", "text_field": "content",
         "license_spdx": "MIT"},
        {"source_id": "gamma", "urls": [f"file://{inputs['gamma']}/*.txt"], "format": "text", "license_spdx": "CC0-1.0"},
    ]


def write_setup(root: Path, workers: int = 1, extra: dict | None = None, shard_rows: int = 25) -> Path:
    """Corpus + ledger + config under root; returns the config path."""
    inputs = make_corpus(root)
    artifacts = root / "artifacts"
    ledger = artifacts / "corpus" / "LEDGER.jsonl"
    write_jsonl(ledger, ledger_rows(inputs))
    cfg = {"dataset": "testset", "version": "v1", "shard_rows": shard_rows, "val_permille": 100, "workers": workers,
           "paths": {"artifacts": str(artifacts)}}
    if extra:
        cfg.update(extra)
    path = root / "corpus.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path
