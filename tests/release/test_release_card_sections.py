"""The card's sections that follow the Hub's template: summary from the ledger, linked sources, one example
row, folded empty buckets, PII counts per type, the tokenizer's sha256, the citation, no machine path."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from release_factory import SOURCES, build_kwargs, make_docs, settings

from corpus_dagster.core.settings import TokenizeSettings
from corpus_dagster.lib.tokenizers import tokenizer_from_config
from corpus_dagster.release.build import build_release
from corpus_dagster.release.card_info import source_link
from corpus_dagster.release.checks import check_release

DESCRIBED = [
    SOURCES[0] | {"description": "Web pages | with a pipe."},
    SOURCES[1] | {"description": "Books.", "homepage": "https://books.example/"},
    SOURCES[2] | {"urls": ["https://data.example/g.jsonl"]},
]
BIBTEX = "@misc{demo2026,\n  title = {Demo},\n  year = {2026}\n}"


def section(card: str, title: str) -> str:
    return re.split(r"\n##+ ", card.split(f"\n{title}\n", 1)[1], maxsplit=1)[0]


@pytest.fixture(scope="module")
def card(tmp_path_factory) -> tuple[str, dict]:
    root = tmp_path_factory.mktemp("sections")
    kwargs = build_kwargs(root, make_docs(seed=4), sources=DESCRIBED,
                          settings=settings(max_tokens=2048, citation=BIBTEX))  # buckets past 512 stay empty
    stats = build_release(**kwargs)
    text = (kwargs["out_dir"] / "README.md").read_text(encoding="utf-8")
    return text, {"kwargs": kwargs, "stats": stats, "root": root}


def test_summary_has_each_sources_description_and_link(card):
    summary = section(card[0], "## Dataset Summary")
    assert "- **[alpha](https://huggingface.co/datasets/org/alpha-web)** (web): Web pages \\| with a pipe." in summary
    assert "- **[beta](https://books.example/)** (books): Books." in summary
    assert "- **[gamma](https://data.example/g.jsonl)**: no description in the ledger" in summary


def test_source_link_prefers_hub_then_homepage_then_a_remote_url():
    assert source_link({"hub_dataset": "o/n", "homepage": "https://h/"}) == "https://huggingface.co/datasets/o/n"
    assert source_link({"homepage": "https://h/", "urls": ["https://u/x"]}) == "https://h/"
    assert source_link({"urls": ["file:///data/x.jsonl", "hf://datasets/o/n@main/a.parquet"]}) == \
        "https://huggingface.co/datasets/o/n"
    assert source_link({"urls": ["file:///data/x.jsonl", "s3://b/x"]}) is None


def test_empty_buckets_are_folded_into_one_line(card):
    text, ctx = card
    buckets = section(text, "### Buckets")
    total = len(ctx["stats"]["docs_per_bucket"])
    empty = [f for f, n in ctx["stats"]["docs_per_bucket"].items() if n == 0]
    assert len(empty) >= 10
    assert sum(1 for line in buckets.splitlines() if re.match(r"\| b\d", line)) == total - len(empty)
    assert f"{len(empty)} of {total} buckets hold no document" in buckets
    assert "| buckets with documents | " + f"{total - len(empty)} of {total} |" in text


def test_one_example_row_of_the_release(card):
    text, ctx = card
    block = section(text, "### Data Instances").split("```json\n", 1)[1].split("\n```", 1)[0]
    row = json.loads(block)
    rows = pl.read_parquet(sorted(ctx["kwargs"]["out_dir"].glob("data/*/*.parquet")))
    first = rows.filter(pl.col("id") == row["id"])
    assert first.height == 1 and set(row) == set(rows.columns)
    assert row["length_tokens_cl100k_base"] == first["length_tokens_cl100k_base"].item()
    assert first["content"].item().startswith(row["content"].split(" [... ")[0])
    meta = json.loads(row["metadata"])
    assert meta["doc_id"] == json.loads(first["metadata"].item())["doc_id"]
    assert not any(str(v).startswith(("file://", "/")) for v in meta.values())  # local paths: file names only
    assert str(ctx["root"]) not in text


def test_pii_section_counts_each_type(card):
    pii = section(card[0], "### Personal and Sensitive Information")
    for kind, placeholder in (("emails", "<EMAIL>"), ("phones", "<PHONE>"), ("cards", "<CARD>"), ("ips", "<IP>"),
                              ("keys", "<KEY>")):
        assert f"| {kind} | `{placeholder}` | 0 |" in pii  # release_factory's manifest: none inserted


def test_tokenizer_line_names_the_vocabulary_sha256(card):
    tok = tokenizer_from_config(TokenizeSettings(kind="tiktoken", encoding="cl100k_base"))
    assert f"`cl100k_base` (tiktoken), sha256 `{tok.vocab_sha256()}`" in card[0]


def test_citation_is_the_configured_bibtex_or_says_what_to_fill(card, tmp_path):
    assert f"## Citation\n\n```bibtex\n{BIBTEX}\n```" in card[0]
    kwargs = build_kwargs(tmp_path, make_docs(seed=4, per_source={"alpha": 10, "beta": 5, "gamma": 5}))
    build_release(**kwargs)
    plain = (kwargs["out_dir"] / "README.md").read_text(encoding="utf-8")
    assert "No citation is configured. Set `release.citation`" in section(plain, "## Citation")


def test_card_parses_as_a_hub_card_and_its_check_passes(card):
    from huggingface_hub import DatasetCard

    text, ctx = card
    meta = DatasetCard(text).data.to_dict()
    assert set(meta) <= {"pretty_name", "language", "license", "task_categories", "size_categories", "tags", "configs"}
    assert [c["config_name"] for c in meta["configs"]][1:] == [f for f, n in ctx["stats"]["docs_per_bucket"].items() if n]
    assert check_release(ctx["kwargs"]["out_dir"], ctx["kwargs"]["settings"])["card_matches_data"].passed
