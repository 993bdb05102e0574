"""A ledger `where` is a row predicate and nothing else: the allowlist, the ledger loader that applies it, and
the allowed constructs still evaluating (in polars) as they always did."""

import json

import polars as pl
import pytest

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.ledger import parse_ledger_lines
from corpus_dagster.core.row_predicate import ALLOWED_FUNCTIONS, predicate_problem
from corpus_dagster.ingest.selection import where_mask

FRAME = pl.DataFrame({
    "url": ["http://a.example/x", "b.py", None],
    "x": [1, 2, None],
    "title": ["Abc", "de", "f"],
    "s": [1.5, -2.0, 3.0],
    "my col": [1, 0, 0],
})

# Every allowed construct with the keep mask polars gives it on FRAME (null counts as excluded).
ALLOWED = [
    ("x >= 2", [False, True, False]),
    ("x = 1 AND s > 0 OR title = 'f'", [True, False, True]),
    ("NOT (x = 1)", [False, True, False]),
    ("x <> 1", [False, True, False]),
    ("x != 1", [False, True, False]),
    ("x < 2 OR x <= 0 OR x > 5", [True, False, False]),
    ("x + 1 = 3", [False, True, False]),
    ("x * 2 - 1 = 1", [True, False, False]),
    ("x / 2 = 1", [False, True, False]),
    ("x % 2 = 0", [False, True, False]),
    ("-x < -1", [False, True, False]),
    ("x IN (1, 3)", [True, False, False]),
    ("x NOT IN (1, -2)", [False, True, False]),
    ("x BETWEEN 2 AND 3", [False, True, False]),
    ("x NOT BETWEEN 2 AND 3", [True, False, False]),
    ("title LIKE 'A%'", [True, False, False]),
    ("title ILIKE 'a%'", [True, False, False]),
    ("title NOT LIKE 'A%'", [False, True, True]),
    ("url IS NULL", [False, False, True]),
    ("url IS NOT NULL", [True, True, False]),
    ("x = 1 IS TRUE", [True, False, False]),
    ("x IS DISTINCT FROM 1", [False, True, True]),
    ("x IS NOT DISTINCT FROM 1", [True, False, False]),
    ("CASE WHEN x > 1 THEN true ELSE false END", [False, True, False]),
    ("CAST(x AS INT) > 1", [False, True, False]),
    ("x::int > 1", [False, True, False]),
    ("\"my col\" = 1", [True, False, False]),
    ("title = 'it''s -- not a comment'", [False, False, False]),
    ("title || 'x' = 'dex'", [False, True, False]),
    ("length(title) > 2", [True, False, False]),
    ("char_length(title) = 2", [False, True, False]),
    ("octet_length(title) = 2", [False, True, False]),
    ("lower(title) = 'abc' AND upper(title) = 'ABC'", [True, False, False]),
    ("starts_with(url, 'http')", [True, False, False]),
    ("ends_with(url, '.py')", [False, True, False]),
    ("abs(s) > 1.6", [False, True, True]),
    ("coalesce(x, 0) = 0", [False, False, True]),
    ("nullif(x, 1) IS NULL", [True, False, True]),
    ("trim(title) = 'de' AND ltrim(title) = 'de' AND rtrim(title) = 'de'", [False, True, False]),
    ("substr(title, 1, 2) = 'Ab'", [True, False, False]),
    ("strpos(title, 'b') = 2", [True, False, False]),
    ("concat(title, 'x') = 'dex'", [False, True, False]),
    ("replace(title, 'A', 'a') = 'abc'", [True, False, False]),
    ("left(title, 1) = 'A' AND right(title, 1) = 'c'", [True, False, False]),
    ("reverse(title) = 'cbA'", [True, False, False]),
    ("initcap(title) = 'Abc'", [True, False, False]),
    ("regexp_like(title, '^A')", [True, False, False]),
    ("round(s) = 2 OR floor(s) = -2", [True, True, False]),
    ("ceil(s) = 3", [False, False, True]),
    ("sqrt(x) > 1 AND ln(x) > 0", [False, True, False]),
    ("sign(s) = 1", [True, False, True]),
    ("greatest(x, 2) = 2 AND least(x, 2) = 1", [True, False, False]),
]

# Refused predicates and the construct each refusal names.
REFUSED = [
    ("url IN (SELECT a FROM read_csv('/etc/passwd'))", "a subquery (SELECT ...)"),
    ("x IN (1, (SELECT 2))", "a subquery"),
    ("(SELECT 1) = 1", "a subquery"),
    ("SELECT 1", "SELECT"),
    ("x = 1 UNION SELECT 1", "UNION"),
    ("EXISTS (SELECT 1)", "EXISTS"),
    ("x = ANY(SELECT 1)", "ANY"),
    ("read_csv('/etc/passwd') IS NULL", "function read_csv()"),
    ("read_parquet('s3://b/k') IS NULL", "function read_parquet()"),
    ("read_json('http://example.com/x') IS NULL", "function read_json()"),
    ("no_such_function(x) = 1", "function no_such_function()"),
    ("date(x) = 1", "function date()"),
    ("x IN (y)", "IN over anything but literals"),
    ("x IS y", "IS over anything but NULL, TRUE or FALSE"),
    ("t.x = 1", "a qualified field name"),
    ("CAST(x AS DATE) = 1", "CAST to DATE"),
    ("x = interval 1 day", "INTERVAL"),
    ("x = 1; DROP TABLE t", "the character ';'"),
    ("x = 1 -- c", "a comment (--)"),
    ("x = 1 /* OR url IN (SELECT 1) */", "a comment (/* */)"),
    ("x // 2 = 1", "//"),
    ("x = 'a\\' OR url IN (SELECT 1) OR x = '", "a backslash"),
    ("x = $$a$$", "the character '$'"),
    ("x = 'open", "an unclosed quote"),
    ("x >>= 3", "does not parse as a row predicate"),
    ("", "is not one expression"),
]


@pytest.mark.parametrize(("where", "expected"), ALLOWED, ids=[w for w, _ in ALLOWED])
def test_allowed_constructs_pass_and_evaluate_as_polars_does(where, expected):
    assert predicate_problem(where) is None
    assert where_mask(FRAME, where, "s").to_list() == expected


@pytest.mark.parametrize(("where", "construct"), REFUSED, ids=[w or "<empty>" for w, _ in REFUSED])
def test_refused_constructs_are_named(where, construct):
    problem = predicate_problem(where)
    assert problem is not None and construct in problem
    assert "/etc/passwd" not in problem and "\n" not in problem  # the construct, not its arguments


def test_every_allowed_function_is_exercised_by_an_allowed_predicate():
    import sqlglot

    from corpus_dagster.core.row_predicate import _function_name

    used = set()
    for where, _ in ALLOWED:
        used |= {_function_name(n) for n in sqlglot.parse_one(where).walk() if isinstance(n, sqlglot.exp.Func)}
    assert ALLOWED_FUNCTIONS <= used


def ledger_line(**row) -> str:
    base = {"source_id": "s", "urls": ["/data/s.jsonl"], "format": "jsonl", "license_spdx": "MIT"}
    return json.dumps({**base, **row})


def test_the_ledger_loader_refuses_a_where_outside_the_grammar_naming_line_and_construct():
    lines = [ledger_line(source_id="ok", where="int_score >= 3"),
             ledger_line(source_id="bad", where="url IN (SELECT a FROM read_csv('/etc/passwd'))")]
    with pytest.raises(LedgerError) as err:
        parse_ledger_lines(lines, "LEDGER.jsonl")
    (violation,) = err.value.violations
    assert violation.startswith("line 2: $.where: a subquery (SELECT ...) is not allowed")


def test_the_ledger_loader_keeps_an_allowed_where():
    (source,) = parse_ledger_lines([ledger_line(where="length(title) > 3 AND lang IN ('en', 'de')")], "L")
    assert source.where == "length(title) > 3 AND lang IN ('en', 'de')"


def test_a_refused_where_is_refused_at_fetch_too_before_polars_sees_it(monkeypatch):
    from corpus_dagster.core.errors import SelectionError
    from corpus_dagster.ingest import selection

    def polars_must_not_see_it(*_args, **_kwargs):
        raise AssertionError("polars was given a refused predicate")

    monkeypatch.setattr(selection.pl, "sql_expr", polars_must_not_see_it)
    with pytest.raises(SelectionError, match=r"function read_csv\(\) is not allowed"):
        selection.compile_where("read_csv('/etc/passwd') IS NULL", "s")


def test_the_sensors_row_by_row_reader_refuses_the_row_too(tmp_path):
    from corpus_dagster.core.reconcile import read_ledger_rows

    path = tmp_path / "LEDGER.jsonl"
    path.write_text(ledger_line(source_id="ok") + "\n" + ledger_line(source_id="bad", where="SELECT 1") + "\n")
    rows = read_ledger_rows(path)
    assert rows.ids == ["ok"] and rows.named_by_invalid == {"bad"}
    assert rows.problems == ["line 2: $.where: SELECT is not allowed in a row predicate "
                             "(see docs/sources.md, Selecting records)"]
