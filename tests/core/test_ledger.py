import json

import pytest

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.ledger import load_ledger, parse_ledger_lines

GOOD = {"source_id": "web.en-1", "urls": ["file:///tmp/x.jsonl"], "format": "jsonl", "license_spdx": "MIT"}


def lines(*rows):
    return [json.dumps(r) if isinstance(r, dict) else r for r in rows]


def test_valid_row_gets_defaults():
    (src,) = parse_ledger_lines(lines(GOOD), "L")
    assert src.source_id == "web.en-1" and src.text_field == "text" and src.url_field is None and src.sha256 == {}


@pytest.mark.parametrize("bad_id", ["..", "a..b", "a/b", "", "Upper", "-lead", "sp ace", "a:b"])
def test_bad_source_ids_rejected(bad_id):
    with pytest.raises(LedgerError) as err:
        parse_ledger_lines(lines({**GOOD, "source_id": bad_id}), "LEDGER.jsonl")
    assert "line 1" in str(err.value) and "$.source_id" in str(err.value)


def test_duplicate_source_id_names_both_lines():
    with pytest.raises(LedgerError, match=r"line 3: \$.source_id: duplicate source_id 'web.en-1' \(first on line 1\)"):
        parse_ledger_lines(lines(GOOD, {**GOOD, "source_id": "other"}, GOOD), "L")


def test_schema_break_names_file_line_and_path(tmp_path):
    path = tmp_path / "LEDGER.jsonl"
    path.write_text("\n".join(lines(GOOD, {**GOOD, "source_id": "b", "format": "csv"}, "{not json")) + "\n")
    with pytest.raises(LedgerError) as err:
        load_ledger(path)
    text = str(err.value)
    assert str(path) in text and "line 2: $.format" in text and "line 3: not valid JSON" in text


def test_bad_pin_and_missing_field():
    with pytest.raises(LedgerError, match=r"\$.sha256.x"):
        parse_ledger_lines(lines({**GOOD, "sha256": {"x": "nothex"}}), "L")
    row = dict(GOOD)
    del row["license_spdx"]
    with pytest.raises(LedgerError, match="license_spdx"):
        parse_ledger_lines(lines(row), "L")


def test_missing_ledger_file(tmp_path):
    with pytest.raises(LedgerError, match="not found"):
        load_ledger(tmp_path / "nope.jsonl")
