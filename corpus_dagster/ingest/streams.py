"""Byte streams: hashing while reading, strict decompression (truncation is an error), line splitting."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import zstandard

CHUNK = 1 << 20


class TruncatedStream(Exception):
    """A compressed stream ended before its end-of-frame marker."""


class HashingReader:
    """Wraps a binary file; every byte read feeds a SHA-256 so a file is hashed in the same pass it is parsed."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.hasher = hashlib.sha256()
        self.bytes_read = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.hasher.update(data)
        self.bytes_read += len(data)
        return data

    def drain(self) -> None:
        """Read what is left, so the digest covers the whole file even if parsing stopped early."""
        while self.read(CHUNK):
            pass

    def hexdigest(self) -> str:
        return self.hasher.hexdigest()


def iter_plain(reader: HashingReader) -> Iterator[bytes]:
    """Chunks of an uncompressed stream."""
    while chunk := reader.read(CHUNK):
        yield chunk


def iter_zstd(reader: HashingReader) -> Iterator[bytes]:
    """Decompressed chunks of a (multi-frame) zstd stream; raises TruncatedStream on a cut-off frame."""
    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    in_frame = False
    while True:
        chunk = reader.read(CHUNK)
        if not chunk:
            break
        while chunk:
            out = dobj.decompress(chunk)
            in_frame = True
            if out:
                yield out
            if dobj.eof:
                chunk = dobj.unused_data
                dobj = dctx.decompressobj()
                in_frame = False
            else:
                chunk = b""
    if in_frame and not dobj.eof:
        raise TruncatedStream("zstd stream ends in the middle of a frame (truncated file?)")


def iter_gzip(reader: HashingReader) -> Iterator[bytes]:
    """Decompressed chunks of a (multi-member) gzip stream; raises TruncatedStream when cut off."""
    try:
        with gzip.GzipFile(fileobj=reader, mode="rb") as gz:  # type: ignore[arg-type]
            while chunk := gz.read(CHUNK):
                yield chunk
    except EOFError as exc:
        raise TruncatedStream(f"gzip stream ends early (truncated file?): {exc}") from exc
    except (OSError, zlib.error) as exc:
        raise TruncatedStream(f"not a valid gzip stream: {exc}") from exc


def iter_lines(chunks: Iterator[bytes]) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line bytes without the newline) over a stream of chunks; CRLF tolerated.

    Pieces of a long line are collected in a list and joined once, so a 100 MB line costs one copy.
    """
    pieces: list[bytes] = []
    lineno = 0
    for chunk in chunks:
        if b"\n" not in chunk:
            pieces.append(chunk)
            continue
        lines = chunk.split(b"\n")
        pieces.append(lines[0])
        first = b"".join(pieces)
        pieces = [lines[-1]] if lines[-1] else []
        for line in [first, *lines[1:-1]]:
            lineno += 1
            yield lineno, line[:-1] if line.endswith(b"\r") else line
    rest = b"".join(pieces)
    if rest:
        lineno += 1
        yield lineno, rest[:-1] if rest.endswith(b"\r") else rest
