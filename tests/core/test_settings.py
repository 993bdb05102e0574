import dataclasses
import pickle
from collections.abc import Mapping

import pytest

from corpus_dagster.cli.settings_gen import TARGET, class_name, render
from corpus_dagster.core import sections
from corpus_dagster.core import settings as settings_module
from corpus_dagster.core.config import config_sha256, load_config, load_schema, load_settings
from corpus_dagster.core.settings import CleanGopherSettings, ReleaseSettings, Settings


def _sections(schema, path=()):
    """(dotted path, schema node) of every object section with properties, the top level first."""
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        if "properties" in sub:
            yield from _sections(sub, (*path, key))
        items = sub.get("items", {})
        if "properties" in items:
            yield from _sections(items, (*path, f"{key}[]"))


def test_generated_module_is_current():
    assert TARGET.read_text(encoding="utf-8") == render(), "run `python -m corpus_dagster.cli.settings_gen`"


def test_every_schema_property_has_a_field_with_the_schema_default():
    for path, schema in _sections(load_schema("corpus-config.schema.json")):
        cls = getattr(settings_module, class_name(list(path)))
        by_name = {f.name: f for f in dataclasses.fields(cls) if f.init}
        assert list(by_name) == [k for k in sorted(schema["properties"], key=lambda k: k not in schema.get("required", []))], path
        for key, sub in schema["properties"].items():
            f = by_name[key]
            if "default" not in sub:
                continue
            if f.default is not dataclasses.MISSING:
                default = f.default
            else:
                default = f.default_factory()
            plain = sections.plain(default)
            assert plain == sub["default"] or (sub["default"] == {} and isinstance(plain, dict)), (path, key)


def test_empty_config_round_trips():
    resolved = load_config(None)
    settings = Settings.from_resolved(resolved)
    assert settings.to_dict() == resolved
    assert settings.resolved == resolved
    assert config_sha256(settings.resolved) == config_sha256(resolved)


def test_sections_are_typed_and_read_only():
    settings = load_settings(None, {"release": {"per_source_cap": {"web": 3}}})
    assert isinstance(settings.clean.gopher.stop_words, tuple)
    assert isinstance(settings.release.per_source_cap, Mapping)
    with pytest.raises(TypeError):
        settings.release.per_source_cap["web"] = 4
    assert pickle.loads(pickle.dumps(settings)) == settings
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.clean.gopher.min_words = 1
    assert settings.to_dict()["release"]["per_source_cap"] == {"web": 3}


def test_missing_keys_keep_defaults_and_unknown_keys_are_refused():
    assert CleanGopherSettings.from_dict({"min_words": 7}).min_alpha_words_ratio == 0.8
    with pytest.raises(KeyError, match="min_wrods"):
        CleanGopherSettings.from_dict({"min_wrods": 7})


def test_optional_subsection_without_defaults_round_trips():
    data = {"tokenizer": {"kind": "tiktoken", "encoding": "o200k_base"}}
    release = ReleaseSettings.from_dict(data)
    assert release.tokenizer.encoding == "o200k_base" and release.tokenizer.path is None
    assert release.to_dict()["tokenizer"] == data["tokenizer"]


def test_replace_recomputes_the_resolved_dict():
    settings = load_settings(None)
    assert dataclasses.replace(settings, shard_rows=5).resolved["shard_rows"] == 5


def test_a_section_has_one_form() -> None:
    from corpus_dagster.core.settings import DedupSettings

    assert not hasattr(DedupSettings, "of")  # logic takes the typed section; a dict is read once, by from_dict
    assert DedupSettings.from_dict({"jaccard_threshold": 0.6}) == DedupSettings(jaccard_threshold=0.6)
    with pytest.raises(KeyError, match="unknown config keys"):
        DedupSettings.from_dict({"num_perm": 128})  # a key of another section


def test_from_dict_converts_by_the_field_annotations():
    from corpus_dagster.core.sections import FrozenMapping
    from corpus_dagster.core.settings import (
        DedupProtectedSetsItemSettings,
        DedupSettings,
        ReleaseTokenizerSettings,
    )

    item = {"name": "bench", "path": "bench.jsonl"}
    dedup = DedupSettings.from_dict({"protected_sets": [item]})
    assert isinstance(dedup.protected_sets, tuple)
    assert dedup.protected_sets == (DedupProtectedSetsItemSettings.from_dict(item),)
    release = ReleaseSettings.from_dict({"tokenizer": None, "per_source_cap": {"web": 3}})
    assert release.tokenizer is None and isinstance(release.per_source_cap, FrozenMapping)
    assert CleanGopherSettings.from_dict({"sources": ["a"]}).sources == ("a",)
    assert CleanGopherSettings.from_dict({"sources": None}).sources is None
    assert ReleaseSettings.from_dict({"tokenizer": {"kind": "tiktoken"}}).tokenizer == ReleaseTokenizerSettings(kind="tiktoken")
    with pytest.raises(KeyError, match="DedupProtectedSetsItemSettings: unknown config keys"):
        DedupSettings.from_dict({"protected_sets": [{"nmae": "x"}]})
    with pytest.raises(KeyError, match="unknown config keys \\['resolved'\\]"):
        Settings.from_dict({"resolved": {}})  # not a config key, though a field


def test_every_section_round_trips_a_full_config():
    resolved = load_config(None, {"dedup": {"protected_sets": [{"name": "b", "path": "b.jsonl"}]},
                                  "release": {"tokenizer": {"kind": "tiktoken", "encoding": "o200k_base"}}})
    settings = Settings.from_resolved(resolved)
    assert settings.resolved == resolved
    assert Settings.from_dict(settings.to_dict()) == settings
    assert settings.to_dict()["release"] == resolved["release"]
    assert pickle.loads(pickle.dumps(settings)) == settings
