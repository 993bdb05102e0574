"""Raw parts: zstd JSON Lines with keys url, fetched_at, license_spdx, text, closed at a size limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import zstandard

from corpus_dagster.core.errors import RawPartError
from corpus_dagster.ingest.streams import HashingReader, TruncatedStream, iter_lines, iter_zstd

ZSTD_LEVEL = 3


def part_name(index: int) -> str:
    """part-<nnnnn>.jsonl.zst"""
    return f"part-{index:05d}.jsonl.zst"


class PartWriter:
    """Streams documents into numbered parts inside one folder; memory stays bounded by the compressor."""

    def __init__(self, folder: Path, max_bytes: int, max_docs: int):
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_docs = max_docs
        self.part_docs: list[int] = []
        self.bytes_uncompressed = 0
        self._fh: IO[bytes] | None = None
        self._writer: zstandard.ZstdCompressionWriter | None = None
        self._cur_bytes = 0
        self._cur_docs = 0

    def _open(self) -> None:
        path = self.folder / part_name(len(self.part_docs))
        self._fh = open(path, "wb")
        self._writer = zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(self._fh, closefd=False)
        self._cur_bytes = 0
        self._cur_docs = 0
        self.part_docs.append(0)

    def _close(self) -> None:
        if self._writer is not None and self._fh is not None:
            self._writer.close()
            self._fh.close()
        self._writer = None
        self._fh = None

    def write(self, url: str, fetched_at: str, license_spdx: str, text: str) -> None:
        """Append one document; opens a new part when the current one is full."""
        if self._writer is None or self._cur_bytes >= self.max_bytes or self._cur_docs >= self.max_docs:
            self._close()
            self._open()
        record = {"url": url, "fetched_at": fetched_at, "license_spdx": license_spdx, "text": text}
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        assert self._writer is not None
        self._writer.write(line)
        self._cur_bytes += len(line)
        self._cur_docs += 1
        self.part_docs[-1] += 1
        self.bytes_uncompressed += len(line)

    def close(self) -> list[int]:
        """Finish the last part; returns documents per part."""
        self._close()
        return self.part_docs



def read_raw_part(path: Path) -> Iterator[dict]:
    """Records of one raw part in order; a corrupt or truncated part raises RawPartError with file and line."""
    line = 0
    with open(path, "rb") as fh:
        try:
            for line, raw in iter_lines(iter_zstd(HashingReader(fh))):  # noqa: B007 (used in except)
                if not raw:
                    continue
                yield json.loads(raw)
        except TruncatedStream as exc:
            raise RawPartError(f"{path}, line {line + 1}: {exc}; rerun raw_documents for this source") from exc
        except json.JSONDecodeError as exc:
            raise RawPartError(f"{path}, line {line}: corrupt JSON ({exc.msg}); rerun raw_documents") from exc
        except zstandard.ZstdError as exc:
            raise RawPartError(f"{path}, line {line + 1}: corrupt zstd data ({exc}); rerun raw_documents") from exc
