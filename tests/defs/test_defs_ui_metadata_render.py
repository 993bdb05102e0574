"""Markdown metadata renders as the text it was made from: md_escape against a CommonMark + GFM renderer
(cmark-gfm, whose autolink literals follow the GFM spec that remark-gfm implements), and the preview helpers."""

import html
import re

import cmarkgfm
import pytest

from corpus_dagster.defs.common import JOINER, md_escape, md_table, measured, preview_text, ratio, timing
from corpus_dagster.scrub.api import PLACEHOLDERS

URLS = ["www.impallari.com", "http://impallari.com/fonts", "https://www.impallari.com/a?b=1&c=2",
        "WWW.Example.org", "mailto:someone@example.com", "jean.roy@fastmail.fr", "a.b-c@x.y.example"]


def render(markdown: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(markdown)


def cell_html(text: str) -> str:
    """The HTML of the one body cell of a table holding `text`."""
    out = render(md_table(["context"], [[text]]).value)
    cells = re.findall(r"<td>(.*?)</td>", out, flags=re.S)
    assert len(cells) == 1, out
    return cells[0]


def shown(fragment: str) -> str:
    """What a reader sees of an HTML fragment: tags gone, entities decoded, the invisible joiner dropped."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace(JOINER, "")


@pytest.mark.parametrize("placeholder", sorted(PLACEHOLDERS.values()))
@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("shape", ["({url}|{p})", "{url} {p}", "{p}{url}", "{url}{p}", "see {url}, {p}!", "{p}@{url}"])
def test_a_placeholder_beside_a_url_renders_as_its_text(placeholder, url, shape):
    text = shape.format(url=url, p=placeholder)
    fragment = cell_html(text)
    assert "<a " not in fragment, fragment
    assert shown(fragment) == text
    assert "&amp;lt;" not in fragment and "\\|" not in fragment and "\\" not in shown(fragment)


@pytest.mark.parametrize("text", [
    "*bold* _it_ **x** __y__ ~~gone~~ `code` [link](http://x.y) ![img](a.png) <b>tag</b> &amp; &lt;",
    "# not a heading", "- not a list", "+ not a list", "1. not a list", "12) not a list", "> not a quote",
    "a | b || c", "back\\slash \\| \\*", "$x$ {y} [^1] :smile: x@y", "line one\nline two", "<https://x.y>",
    "https://x.y/<KEY>", "www.x.y/<CARD>/<IP>",
])
def test_every_markdown_construct_renders_as_its_text(text):
    fragment = cell_html(text)
    assert not re.search(r"<(a|em|strong|del|code|img|b|h\d|li|blockquote)\b", fragment), fragment
    assert shown(fragment) == " ".join(text.splitlines())


def test_escaped_text_outside_a_table_renders_as_its_text():
    text = "- 1. www.x.com <EMAIL> *a*"
    out = render(f"- {md_escape(text)}\n")
    assert out.count("<li>") == 1 and "<a " not in out
    assert shown(out).strip() == text


def test_the_example_from_a_scrubbed_document_reads_as_written():
    fragment = cell_html("(www.impallari.com|<EMAIL>)")
    assert shown(fragment) == "(www.impallari.com|<EMAIL>)" and "<a " not in fragment


def test_preview_text_cuts_long_text_and_says_its_length():
    text = "word " * 900
    cell = preview_text(text, 120)
    assert len(cell) <= 120 and cell.endswith(f"… ({len(text):,} chars)")
    assert preview_text("  short\n text ") == "short text"
    assert preview_text("x" * 120, 120) == "x" * 120


def test_numbers_are_rounded_to_what_they_mean():
    assert measured(0.123456789) == 0.123 and measured(3.0) == 3 and isinstance(measured(3.0), int)
    assert measured(1234.5678) == 1234.6 and measured(None) is None
    assert ratio(0.876543) == 0.877
    assert timing(1.23456).value == 1.23
