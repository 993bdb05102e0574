"""reproduce/ names no folder of the building machine: the config loses its machine keys and local paths,
the ledger's local URLs and pins become names under sources/<source_id>/ relative to their glob."""

from __future__ import annotations

import yaml

from corpus_dagster.core.config import load_config, load_settings
from corpus_dagster.release.reproduce import reproduce_config, reproduce_ledger_rows


def test_local_urls_and_pins_become_names_relative_to_their_glob():
    rows = [
        {"source_id": "docs", "urls": ["file:///data/docs/*/*.txt"], "format": "text", "license_spdx": "MIT",
         "sha256": {"file:///data/docs/a/x.txt": "1" * 64}},
        {"source_id": "two", "urls": ["/mnt/one/a.jsonl", "~/two/*.jsonl", "https://example.org/c.jsonl"],
         "format": "jsonl", "license_spdx": "MIT",
         "sha256": {"/mnt/one/a.jsonl": "2" * 64, "~/two/b.jsonl": "3" * 64, "https://example.org/c.jsonl": "4" * 64}},
        {"source_id": "hub", "urls": ["hf://datasets/o/n/data/*.parquet"], "format": "parquet", "license_spdx": "MIT",
         "sha256": {}},
    ]
    rows.append({"source_id": "same", "urls": ["/opt/x/*.txt", "/opt/x/**/*.md"], "format": "text",
                 "license_spdx": "MIT", "sha256": {}})
    docs, two, hub, same = reproduce_ledger_rows(rows)
    assert same["urls"] == ["sources/same/*.txt", "sources/same/**/*.md"]  # one folder, one copy
    assert docs["urls"] == ["sources/docs/*/*.txt"] and docs["sha256"] == {"sources/docs/a/x.txt": "1" * 64}
    assert two["urls"] == ["sources/two/0/a.jsonl", "sources/two/1/*.jsonl", "https://example.org/c.jsonl"]
    assert two["sha256"] == {"sources/two/0/a.jsonl": "2" * 64, "sources/two/1/b.jsonl": "3" * 64,
                             "https://example.org/c.jsonl": "4" * 64}
    assert hub == rows[2]
    assert rows[0]["urls"] == ["file:///data/docs/*/*.txt"]  # the input rows are left as they were


def test_config_has_no_paths_secret_or_local_path_and_still_loads(tmp_path):
    settings = load_settings(overrides={
        "paths": {"artifacts": "s3://bucket/corpus", "mirror": "/scratch/m", "storage_options": {"secret": "hunter2"}},
        "tokenize": {"kind": "huggingface", "path": "/models/my-tok", "name": "mytok"},
    })
    text = reproduce_config(settings)
    assert "hunter2" not in text and "/models" not in text and "/scratch" not in text and "s3://" not in text
    assert "#   tokenize.path: my-tok" in text
    plain = yaml.safe_load(text)
    assert "paths" not in plain and plain["tokenize"]["path"] == "my-tok"
    path = tmp_path / "config.yaml"
    path.write_text(text + "paths:\n  artifacts: ./artifacts\n")
    assert load_config(path)["release"] == settings.resolved["release"]
