"""Read documents out of one source file, per format; unreadable documents become quarantine records."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from corpus_dagster.core.errors import SelectionError, SourceError
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest.selection import BATCH_ROWS, Selection
from corpus_dagster.ingest.streams import (
    HashingReader,
    TruncatedStream,
    iter_gzip,
    iter_lines,
    iter_plain,
    iter_zstd,
)

EXCERPT_CHARS = 200
BOM = b"\xef\xbb\xbf"  # the UTF-8 byte order mark some editors write first; it is not part of the text


class DuplicateKey(Exception):
    """A JSON object names one key twice: which value is meant depends on the parser, so the record is ambiguous."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _checked_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of `pairs`, refusing a repeated key (a plain dict would silently keep the last value).

    Called by the C scanner once per object; the common case costs one length comparison."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


class NotUtf8(ValueError):
    """A line that decodes as UTF-8 only because UTF-16/32 text is mostly NUL bytes and ASCII: a NUL byte
    where JSON allows none (outside a string) means the line is in another encoding."""


_DECODER = json.JSONDecoder(object_pairs_hook=_checked_object)


def parse_json_line(raw: bytes) -> Any:
    """The JSON value of one UTF-8 line (a leading UTF-8 byte order mark skipped); raises DuplicateKey for a
    key repeated in any object, at any depth, UnicodeDecodeError for bytes that are not UTF-8 (a UTF-16/32 byte
    order mark among them) and NotUtf8 for a NUL byte outside a JSON string (UTF-16/32 text without a mark).

    UTF-8 only, never `json.detect_encoding`: a line it took for UTF-16/32 would be published from a file that
    promises UTF-8. One decoder is built once: json.loads would build one per call."""
    if raw.startswith(BOM):
        raw = raw[len(BOM) :]
    text = raw.decode("utf-8", "surrogatepass")  # lone surrogates are quarantined by field, with their name
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        # A NUL is never valid raw JSON; inside a string the decoder says "Invalid control character" (bad JSON),
        # outside one it is where UTF-16/32 text puts the zero half of every ASCII character.
        if exc.pos < len(text) and text[exc.pos] == "\x00" and not exc.msg.startswith("Invalid control character"):
            raise NotUtf8(f"a NUL byte outside a JSON string at column {exc.colno}: UTF-16 or UTF-32 text, "
                          f"not UTF-8") from None
        raise


@dataclass(frozen=True)
class Doc:
    """A document read from a source file; `fields` holds the record's fields a ledger selection names."""

    url: str
    text: str
    line: int
    fields: dict[str, Any] | None = None


@dataclass(frozen=True)
class Quarantined:
    """A document that could not be read, with where and why; it is recorded, never silently skipped."""

    file: str
    line: int
    reason: str
    detail: str
    excerpt: str

    def to_json(self, source_id: str) -> dict[str, object]:
        return {
            "source_id": source_id,
            "file": self.file,
            "line": self.line,
            "reason": self.reason,
            "detail": self.detail,
            "excerpt": self.excerpt,
        }


Item = Doc | Quarantined


SIZE_CHUNK = 1 << 20  # characters encoded at a time to measure a long text without copying it whole
SURROGATE = re.compile(r"[\ud800-\udfff]")


def _excerpt(data: bytes | str) -> str:
    """The start of a record for the quarantine file, always encodable (lone surrogates shown escaped)."""
    if isinstance(data, bytes):
        data = data[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    return data[:EXCERPT_CHARS].encode("utf-8", errors="backslashreplace").decode("utf-8")


def utf8_size_and_surrogates(text: str) -> tuple[int, bool]:
    """(bytes of `text` in UTF-8 with a lone surrogate counted as 3, has_surrogates) in one pass, without
    holding a full encoded copy: a strict encode fails exactly on a lone surrogate, so the encode that
    measures a text also finds them, where a regex scan read every text a second time."""
    if text.isascii():  # O(1) in CPython: the string knows it is ASCII
        return len(text), False
    size, lone = 0, False
    for i in range(0, len(text), SIZE_CHUNK):
        piece = text[i : i + SIZE_CHUNK]
        try:
            size += len(piece.encode("utf-8"))
        except UnicodeEncodeError:
            size += len(piece.encode("utf-8", errors="surrogatepass"))
            lone = True
    return size, lone


def has_surrogates(text: str) -> bool:
    """True when `text` holds a lone surrogate (a `\\ud800` escape in JSON): it has no UTF-8 form."""
    return not text.isascii() and SURROGATE.search(text) is not None


def _check_text(text: object, file_url: str, line: int, field: str, max_doc_bytes: int, raw: bytes | str) -> Item | None:
    if text is None:
        return Quarantined(file_url, line, "missing_text", f"no field {field!r}", _excerpt(raw))
    if not isinstance(text, str):
        return Quarantined(file_url, line, "non_string_text", f"field {field!r} is {type(text).__name__}", _excerpt(raw))
    if not text.strip():
        return Quarantined(file_url, line, "empty_text", f"field {field!r} is empty or whitespace", _excerpt(raw))
    if len(text) > max_doc_bytes:  # every character is at least one byte: too large without measuring
        return Quarantined(
            file_url, line, "too_large", f"{len(text)}+ bytes of text > ingest.max_doc_bytes={max_doc_bytes}",
            _excerpt(text),
        )
    size, lone_surrogate = utf8_size_and_surrogates(text)
    if size > max_doc_bytes:
        return Quarantined(
            file_url, line, "too_large", f"{size} bytes of text > ingest.max_doc_bytes={max_doc_bytes}", _excerpt(text)
        )
    if lone_surrogate:
        return Quarantined(
            file_url, line, "invalid_utf8", f"field {field!r} holds a lone surrogate (e.g. a \\ud800 escape)",
            _excerpt(text),
        )
    return None


def _bad_value(value: object) -> bool:
    """True when a field value (string, or list/dict of them) holds a lone surrogate."""
    if isinstance(value, str):
        return has_surrogates(value)
    if isinstance(value, list):
        return any(_bad_value(v) for v in value)
    if isinstance(value, dict):
        return any(_bad_value(k) or _bad_value(v) for k, v in value.items())
    return False


def iter_jsonl(
    reader: HashingReader,
    source: Source,
    file_url: str,
    compression: str,
    max_doc_bytes: int,
    selection: Selection | None = None,
) -> Iterator[Item]:
    """Documents of a JSON Lines file (plain, gzip or zstd); bad lines are quarantined, truncation raises.

    With a selection, each document carries the fields it names that the record has (absent ones left out).
    """
    wanted = selection.fields if selection is not None else ()
    chunks = {"": iter_plain, "gzip": iter_gzip, "zstd": iter_zstd}[compression](reader)
    last_line = 0
    try:
        for lineno, raw in iter_lines(chunks):
            last_line = lineno
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if not raw.strip():
                continue
            if len(raw) > 6 * max_doc_bytes + 65536:  # even fully escaped, the text cannot fit the limit
                yield Quarantined(file_url, lineno, "too_large", f"{len(raw)} bytes of JSON line", _excerpt(raw))
                continue
            try:  # the bytes and one decoded copy: one big line costs two copies, not three
                obj = parse_json_line(raw)
            except DuplicateKey as exc:
                yield Quarantined(
                    file_url, lineno, "duplicate_key", f"key {exc.key!r} appears more than once in one object",
                    _excerpt(raw),
                )
                continue
            except (UnicodeDecodeError, NotUtf8) as exc:
                yield Quarantined(file_url, lineno, "invalid_utf8", str(exc), _excerpt(raw))
                continue
            except json.JSONDecodeError as exc:
                yield Quarantined(file_url, lineno, "invalid_json", f"{exc.msg} at column {exc.colno}", _excerpt(raw))
                continue
            if not isinstance(obj, dict):
                yield Quarantined(file_url, lineno, "invalid_json", "line is not a JSON object", _excerpt(raw))
                continue
            text = obj.get(source.text_field)
            bad = _check_text(text, file_url, lineno, source.text_field, max_doc_bytes, raw)
            if bad is None:
                bad = _check_fields(obj, source, wanted, file_url, lineno, raw)
            if bad is not None:
                yield bad
                continue
            fields = {f: obj[f] for f in wanted if f in obj} if selection is not None else None
            yield Doc(_doc_url(obj, source, file_url, lineno), text, lineno, fields)  # type: ignore[arg-type]
    except TruncatedStream as exc:
        raise SourceError(source.source_id, str(exc), file=file_url, line=last_line + 1) from exc
    except Exception as exc:  # zstandard.ZstdError and friends: corrupt data
        if isinstance(exc, SourceError):
            raise
        raise SourceError(
            source.source_id, f"cannot decompress: {type(exc).__name__}: {exc}", file=file_url, line=last_line + 1
        ) from exc


def _check_fields(
    obj: dict, source: Source, wanted: tuple[str, ...], file_url: str, line: int, raw: bytes
) -> Quarantined | None:
    """The URL field and the fields a selection keeps must have a UTF-8 form too (no lone surrogates)."""
    names = ([source.url_field] if source.url_field else []) + list(wanted)
    for name in names:
        if _bad_value(obj.get(name)):
            return Quarantined(
                file_url, line, "invalid_utf8", f"field {name!r} holds a lone surrogate (e.g. a \\ud800 escape)",
                _excerpt(raw),
            )
    return None


def _doc_url(obj: dict, source: Source, file_url: str, position: int) -> str:
    if source.url_field:
        value = obj.get(source.url_field)
        if isinstance(value, str) and value:
            return value
    return f"{file_url}#{position}"


def iter_parquet(
    local_path: str, source: Source, file_url: str, max_doc_bytes: int, selection: Selection | None = None
) -> Iterator[Item]:
    """Documents of a (local or cached) Parquet file, batch by batch; `#<row>` positions are 0-based rows.

    With a selection, the file must have every field it names, and each document carries their values.
    """
    try:
        pf = pq.ParquetFile(local_path)
    except Exception as exc:
        raise SourceError(source.source_id, f"not a readable Parquet file: {exc}", file=file_url) from exc
    names = pf.schema_arrow.names
    if source.text_field not in names:
        raise SourceError(source.source_id, f"Parquet file has no column {source.text_field!r} (has {names})", file=file_url)
    wanted: tuple[str, ...] = ()
    if selection is not None:
        selection.check_columns(names, file_url)
        wanted = selection.fields
    base = [source.text_field] + ([source.url_field] if source.url_field and source.url_field in names else [])
    columns = list(dict.fromkeys(base + list(wanted)))
    row = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False):
        for rec in batch.to_pylist():
            text = rec.get(source.text_field)
            excerpt = {k: rec[k] for k in base}
            bad = _check_text(text, file_url, row, source.text_field, max_doc_bytes, json.dumps(excerpt, default=str))
            if bad is not None:
                yield bad
            else:
                fields = {f: rec[f] for f in wanted} if selection is not None else None
                yield Doc(_doc_url(rec, source, file_url, row), text, row, fields)
            row += 1


def iter_text_file(reader: HashingReader, source: Source, file_url: str, max_doc_bytes: int) -> Iterator[Item]:
    """A plain text file is one document; its URL is the file URL."""
    data = reader.read(max_doc_bytes + 1)
    if len(data) > max_doc_bytes:
        reader.drain()
        yield Quarantined(file_url, 1, "too_large", f"{reader.bytes_read} bytes > ingest.max_doc_bytes", _excerpt(data))
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield Quarantined(file_url, 1, "invalid_utf8", str(exc), _excerpt(data))
        return
    text = text.removeprefix("\ufeff")  # a byte order mark is not text: the JSON Lines reader drops it too
    if not text.strip():
        yield Quarantined(file_url, 1, "empty_text", "file is empty or whitespace", _excerpt(text))
        return
    yield Doc(file_url, text, 1)


def iter_file(
    local_path: str, source: Source, file_url: str, max_doc_bytes: int, selection: Selection | None = None
) -> Iterator[Item]:
    """Documents of one local (or cached) file of a source, in its ledger format.

    A selection (the ledger row's `where`/`keep_fields`) makes every document carry the fields it names;
    a text source has no fields, so a selection on one is refused.
    """
    fmt = source.format
    if selection is not None and fmt == "text":
        raise text_selection_error(source)
    if fmt == "parquet":
        yield from iter_parquet(local_path, source, file_url, max_doc_bytes, selection)
        return
    with open(local_path, "rb") as raw:
        reader = HashingReader(raw)
        if fmt == "text":
            yield from iter_text_file(reader, source, file_url, max_doc_bytes)
        elif fmt in COMPRESSION:
            yield from iter_jsonl(reader, source, file_url, COMPRESSION[fmt], max_doc_bytes, selection)
        else:  # the ledger schema rules this out; keep the error clear anyway
            raise SourceError(source.source_id, f"unknown format {fmt!r}", file=file_url)


def text_selection_error(source: Source) -> SelectionError:
    """A `text` source is one document per file with no fields: `where` and `keep_fields` cannot apply."""
    row = source.to_json()
    named = ", ".join(f"{k}={json.dumps(row[k])}" for k in ("where", "keep_fields") if k in row)
    return SelectionError(
        source.source_id,
        f"the ledger row sets {named}, but a `text` source has no fields to select on or keep; "
        f"remove them from the row (or ship the source as jsonl/parquet with those fields)",
    )


COMPRESSION = {"jsonl": "", "jsonl.gz": "gzip", "jsonl.zst": "zstd"}
