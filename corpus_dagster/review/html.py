"""Render the review sample as one static HTML page (pure: rows in, a string out).

Every piece of document text, id, url and config value goes through `html.escape`, so a document holding
markup or a placeholder such as `<EMAIL>` shows as text. No script, no external resource, no timestamp:
the same rows give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from itertools import groupby
from typing import Any

from corpus_dagster.core.settings import ReviewSettings
from corpus_dagster.review.sample import MARK_CLOSE, MARK_OPEN

STRATUM_TITLES = {
    "clean": "clean drops",
    "dedup": "duplicate drops",
    "pii": "PII redactions",
    "kept": "kept documents",
}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 80rem; padding: 0 1rem; color: #222; }
h2 { border-bottom: 2px solid #888; margin-top: 3rem; }
h3 { background: #eef; padding: .3rem .5rem; margin-top: 2rem; }
table.counts { border-collapse: collapse; }
table.counts td, table.counts th { border: 1px solid #ccc; padding: .15rem .5rem; text-align: left; }
td.num { text-align: right; }
article { border: 1px solid #ccc; border-radius: 4px; margin: 1rem 0; padding: .5rem .8rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: 0 0 .5rem; }
dl.meta dt { font-weight: bold; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f7f7; padding: .5rem; margin: 0;
      max-height: 30rem; overflow-y: auto; font-size: .85rem; }
.cut { color: #a00; font-style: italic; margin: .2rem 0 0; }
.label { font-weight: bold; margin: .3rem 0; }
table.windows { border-collapse: collapse; width: 100%; font-size: .85rem; }
table.windows td, table.windows th { border: 1px solid #ddd; padding: .2rem .4rem; vertical-align: top;
                                     overflow-wrap: anywhere; width: 50%; }
mark { background: #fd6; }
""".strip()


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _marked(line: str) -> str:
    """An escaped PII window with ⟦ ⟧ turned into <mark> when they pair up on the line."""
    text = _e(line)
    if text.count(MARK_OPEN) == text.count(MARK_CLOSE) == 1 and text.index(MARK_OPEN) < text.index(MARK_CLOSE):
        text = text.replace(MARK_OPEN, "<mark>").replace(MARK_CLOSE, "</mark>")
    return text


def _text_block(label: str, text: str | None, chars: int | None) -> str:
    """A labelled <pre> excerpt with a visible marker when the document is longer than the excerpt."""
    if text is None:
        return f'<div><p class="label">{_e(label)}</p><p class="cut">text not available</p></div>'
    out = f'<div><p class="label">{_e(label)}</p><pre>{_e(text)}</pre>'
    if chars is not None and chars > len(text):
        out += f'<p class="cut">[… cut: {chars - len(text):,} more characters of {chars:,} not shown]</p>'
    return out + "</div>"


def _windows(row: dict[str, Any]) -> str:
    left = row["text"].split("\n") if row["text"] else []
    right = row["partner_text"].split("\n") if row["partner_text"] is not None else None
    head = "<tr><th>scrubbed (published)</th><th>clean text before the scrub</th></tr>"
    lines = []
    for i, a in enumerate(left):
        b = right[i] if right is not None and i < len(right) else "(could not align the texts)"
        lines.append(f"<tr><td>{_marked(a)}</td><td>{_marked(b)}</td></tr>")
    shown = len(left)
    total = int(row["value"] or 0)
    more = f'<p class="cut">[… {total - shown} more redactions of this type not shown]</p>' if total > shown else ""
    return f'<table class="windows">{head}{"".join(lines)}</table>{more}'


def _document(row: dict[str, Any]) -> str:
    meta = [("id", _e(row["id"])), ("url", _e(row["url"]) if row["url"] else "—"),
            ("value", _e(_number(row["value"]))), ("threshold", _e(row["threshold"]))]
    if row["partner_id"] is not None:
        meta.append(("kept partner", _e(row["partner_id"])))
    if row["jaccard"] is not None:
        meta.append(("jaccard", _e(_number(row["jaccard"]))))
    if row["detail"]:
        meta.append(("detail", _e(row["detail"])))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta)
    if row["stratum"] == "pii":
        body = _windows(row)
    elif row["stratum"] == "dedup" and row["partner_id"] is not None:
        body = ('<div class="pair">' + _text_block(f"dropped: {row['id']}", row["text"], row["text_chars"])
                + _text_block(f"kept: {row['partner_id']}", row["partner_text"], row["partner_chars"]) + "</div>")
    else:
        body = _text_block("text", row["text"], row["text_chars"])
    return f'<article><dl class="meta">{dl}</dl>{body}</article>'


SHOWN_SETTINGS = ("per_stratum", "seed", "excerpt_chars", "pii_context_chars")  # the keys the page names


def render_page(
    rows: Sequence[dict[str, Any]], strata: Sequence[dict[str, Any]], title: str, settings: ReviewSettings
) -> str:
    """The whole page: a table of contents (strata counts), then per source and stratum every sampled document.

    `rows` are the sample rows in page order (REVIEW_SCHEMA columns as dicts), `strata` the counts per
    group in the same order (source_id, stratum, reason, available, sampled); the introduction names the
    sample's settings (SHOWN_SETTINGS).
    """
    anchors = {(g["source_id"], g["stratum"], g["reason"]): f"g{i}" for i, g in enumerate(strata)}
    sources = list(dict.fromkeys(g["source_id"] for g in strata))
    src_anchor = {s: f"s{i}" for i, s in enumerate(sources)}
    toc = ['<table class="counts"><tr><th>source</th><th>stratum</th><th>reason</th>'
           '<th>sampled</th><th>available</th></tr>']
    for g in strata:
        key = (g["source_id"], g["stratum"], g["reason"])
        toc.append(f'<tr><td><a href="#{src_anchor[g["source_id"]]}">{_e(g["source_id"])}</a></td>'
                   f'<td>{_e(STRATUM_TITLES.get(g["stratum"], g["stratum"]))}</td>'
                   f'<td><a href="#{anchors[key]}">{_e(g["reason"])}</a></td>'
                   f'<td class="num">{g["sampled"]}</td><td class="num">{g["available"]}</td></tr>')
    toc.append("</table>")
    body = []
    by_group = {k: list(v) for k, v in groupby(rows, key=lambda r: (r["source_id"], r["stratum"], r["reason"]))}
    for source in sources:
        body.append(f'<section><h2 id="{src_anchor[source]}">source {_e(source)}</h2>')
        for g in (g for g in strata if g["source_id"] == source):
            key = (g["source_id"], g["stratum"], g["reason"])
            docs = by_group.get(key, [])
            body.append(f'<h3 id="{anchors[key]}">{_e(STRATUM_TITLES.get(g["stratum"], g["stratum"]))}: '
                        f'{_e(g["reason"])} ({g["sampled"]} of {g["available"]})</h3>')
            if docs:
                body.append(f'<p>threshold: {_e(docs[0]["threshold"])}</p>')
            body.extend(_document(r) for r in docs)
        body.append("</section>")
    shown = ", ".join(f"{_e(k)} = {_e(getattr(settings, k))}" for k in sorted(SHOWN_SETTINGS))
    intro = (
        f"<p>A seeded sample of documents per source and rule ({shown}). Each document shows the value the "
        "rule measured and the threshold it was compared with. Duplicate drops show the kept partner beside "
        "the dropped document; PII rows show each redaction in the published text beside the text it replaced "
        "(between the marks). Texts longer than the excerpt are cut where marked.</p>"
        "<p><strong>This page holds unredacted text, including the PII the scrub removed: do not publish it.</strong></p>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n"
        f"<h1>{_e(title)}</h1>\n{intro}\n<h2>Contents</h2>\n" + "\n".join(toc) + "\n"
        + "\n".join(body) + "\n</body>\n</html>\n"
    )
