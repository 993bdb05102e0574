"""The grammar a ledger `where` may use: a row predicate over the record's own fields, and nothing else.

polars SQL, which evaluates the predicate, also runs subqueries and table functions (`read_csv('<file>')`, URLs),
so whoever writes the ledger could make the pipeline read local files or fetch URLs. A predicate is therefore
parsed (sqlglot) and every node checked against an allowlist before polars ever sees it: field names, literals,
comparison, boolean and arithmetic operators, IN over literals, BETWEEN, LIKE/ILIKE, IS [NOT] NULL, CASE, CAST
and the scalar functions in ALLOWED_FUNCTIONS. A refusal names the construct, never its arguments.

Two parsers read the same text, so the text is first held to a lexical form both read alike: no comments,
statement separators, backslashes, dollar quotes or other characters whose meaning differs between SQL dialects
outside quoted strings and identifiers.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

# Scalar functions a predicate may call, by sqlglot's canonical name (`char_length` is LENGTH, `ltrim` TRIM,
# `substr` SUBSTRING, `strpos` STR_POSITION), lowercase. Every one of them computes on its arguments only.
ALLOWED_FUNCTIONS = frozenset({
    "abs", "ceil", "coalesce", "concat", "ends_with", "floor", "greatest", "initcap", "least", "left", "length",
    "ln", "lower", "nullif", "octet_length", "regexp_like", "replace", "reverse", "right", "round", "sign",
    "sqrt", "starts_with", "str_position", "substring", "trim", "upper",
})

# Operators and structural nodes, each shown in a refusal by the words a person wrote.
ALLOWED_NODES: dict[type[exp.Expression], str] = {
    exp.Column: "field", exp.Identifier: "field", exp.Literal: "literal", exp.Boolean: "literal",
    exp.Null: "NULL", exp.Paren: "( )",
    exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
    exp.NullSafeEQ: "IS NOT DISTINCT FROM", exp.NullSafeNEQ: "IS DISTINCT FROM",
    exp.And: "AND", exp.Or: "OR", exp.Not: "NOT",
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.Neg: "-", exp.DPipe: "||",
    exp.In: "IN", exp.Between: "BETWEEN", exp.Like: "LIKE", exp.ILike: "ILIKE", exp.Is: "IS",
    exp.Case: "CASE", exp.If: "WHEN", exp.Cast: "CAST", exp.DataType: "type", exp.DataTypeParam: "type",
}

# Types a CAST may name (sqlglot's DataType.Type members).
ALLOWED_CAST_TYPES = frozenset({
    "BIGINT", "BOOLEAN", "CHAR", "DECIMAL", "DOUBLE", "FLOAT", "INT", "NCHAR", "NVARCHAR", "SMALLINT", "TEXT",
    "TINYINT", "UBIGINT", "UINT", "USMALLINT", "UTINYINT", "VARCHAR",
})

NAMED_NODES: dict[type[exp.Expression], str] = {  # refused constructs a person should recognize by name
    exp.Select: "SELECT", exp.Subquery: "a subquery (SELECT ...)", exp.From: "FROM", exp.Exists: "EXISTS", exp.Any: "ANY",
    exp.All: "ALL", exp.Star: "*", exp.Table: "a table", exp.Union: "UNION", exp.Interval: "INTERVAL",
    exp.Placeholder: "a placeholder",
}

# Characters allowed outside quoted strings and identifiers, and two-character sequences refused there
# (comments: sqlglot and polars disagree on nesting and on `#`; `//` parses in one and not the other).
UNQUOTED_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ \t\r\n().,+-*/%<>=!|:")
REFUSED_SEQUENCES = {"--": "a comment (--)", "/*": "a comment (/* */)", "*/": "a comment (/* */)", "//": "//"}


class PredicateRefused(ValueError):
    """A `where` outside the row-predicate grammar; the message names the construct, never its arguments."""


def check_row_predicate(where: str) -> None:
    """Raise PredicateRefused unless `where` is a row predicate this module allows (see the module docstring)."""
    _check_lexical_form(where)
    try:
        statements = sqlglot.parse(where, read=None)
    except sqlglot.errors.SqlglotError as exc:
        raise PredicateRefused(f"does not parse as a row predicate ({_parse_error(exc)})") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise PredicateRefused("is not one expression")
    nodes = list(statements[0].walk())
    # every node's kind first, so a subquery is named as one even where it also breaks a shape rule (IN literals)
    for check in (_kind_problem, _shape_problem):
        for node in nodes:
            problem = check(node)
            if problem is not None:
                raise PredicateRefused(f"{problem} is not allowed in a row predicate")


def predicate_problem(where: str) -> str | None:
    """Why `where` is refused, or None when it is an allowed row predicate."""
    try:
        check_row_predicate(where)
    except PredicateRefused as exc:
        return str(exc)
    return None


def _check_lexical_form(where: str) -> None:
    """Outside quotes only UNQUOTED_CHARS and no REFUSED_SEQUENCES; a backslash nowhere (dialects differ on
    whether it escapes a quote, so it could move where a string ends)."""
    if "\\" in where:
        raise PredicateRefused("a backslash is not allowed in a row predicate")
    quote: str | None = None
    i = 0
    while i < len(where):
        ch = where[i]
        if quote is not None:
            if ch == quote:
                if where[i + 1 : i + 2] == quote:  # a doubled quote stays inside
                    i += 1
                else:
                    quote = None
        elif ch in "'\"":
            quote = ch
        else:
            pair = where[i : i + 2]
            if pair in REFUSED_SEQUENCES:
                raise PredicateRefused(f"{REFUSED_SEQUENCES[pair]} is not allowed in a row predicate")
            if ch not in UNQUOTED_CHARS:
                raise PredicateRefused(f"the character {ch!r} is not allowed outside quotes in a row predicate")
        i += 1
    if quote is not None:
        raise PredicateRefused("does not parse as a row predicate (an unclosed quote)")


def _parse_error(exc: sqlglot.errors.SqlglotError) -> str:
    errors = getattr(exc, "errors", None) or []
    if errors:
        first = errors[0]
        description = re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r"\1", str(first.get("description") or "syntax error"))
        return f"{description} at column {first.get('col', '?')}"
    return "syntax error"


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def _kind_problem(node: exp.Expression) -> str | None:
    """The node's kind when it is not an allowed operator, structure or function, else None."""
    kind = type(node)
    if kind in NAMED_NODES:
        return NAMED_NODES[kind]
    if isinstance(node, exp.Func) and kind not in ALLOWED_NODES:
        name = _function_name(node)
        return None if name in ALLOWED_FUNCTIONS else f"function {name}()"
    if kind not in ALLOWED_NODES:
        return f"{kind.__name__} ({node.key.upper()})"
    return None


def _shape_problem(node: exp.Expression) -> str | None:
    """What is wrong with an allowed node's operands (qualified names, IN over non-literals, ...), else None."""
    if isinstance(node, exp.Column) and (node.args.get("table") or node.args.get("db") or node.args.get("catalog")):
        return "a qualified field name (table.field)"
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return "IN over a subquery or table"
        if not all(_is_literal(e) for e in node.expressions):
            return "IN over anything but literals"
    if isinstance(node, exp.Is) and not isinstance(node.expression, exp.Null | exp.Boolean):
        return "IS over anything but NULL, TRUE or FALSE"
    if isinstance(node, exp.DataType) and node.this.name not in ALLOWED_CAST_TYPES:
        return f"CAST to {node.this.name}"
    return None


def _is_literal(node: exp.Expression) -> bool:
    while isinstance(node, exp.Neg | exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal | exp.Boolean | exp.Null)
