"""configs/long-context.yaml serves any ledger: valid, no source id, one `paths` line, long documents kept."""

from __future__ import annotations

from pathlib import Path

import yaml

from corpus_dagster.clean.cleaner import clean_texts
from corpus_dagster.core.config import load_config
from corpus_dagster.core.settings import CleanSettings

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "long-context.yaml"


def _keys(node: object, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [k for key, v in node.items() for k in [f"{prefix}{key}", *_keys(v, f"{prefix}{key}.")]]
    return []


def test_names_no_source_and_only_an_artifacts_path() -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    assert not [k for k in _keys(raw) if k.endswith((".sources", "per_source_cap"))]
    assert raw["paths"] == {"artifacts": "./artifacts"}
    assert CONFIG.read_text().count("\npaths:\n  artifacts:") == 1
    load_config(CONFIG)  # valid against the schema


def _manual(words: int) -> str:
    """A man-page-like text: prose with options, paths and numbers, a phrase reused in every section."""
    section = ("The -f, --file=PATH option reads /etc/app/app.conf (see the description of the config file "
               "below); values such as 0x1F, 2048 or -1 are accepted, e.g. `app -f ./x.conf -n 3`. ")
    return "NAME\n\n" + "\n\n".join(f"{i}. " + section for i in range(words // len(section.split()) + 1))


def test_keeps_a_long_technical_document_the_defaults_drop() -> None:
    text = _manual(40_000)
    default = clean_texts([text], CleanSettings.from_dict(load_config()["clean"]), "any")
    long_context = clean_texts([text], CleanSettings.from_dict(load_config(CONFIG)["clean"]), "any")
    assert default.reason[0] is not None
    assert long_context.reason[0] is None
