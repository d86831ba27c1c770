"""`vocab --keep-accents`: NFKC instead of the original's NFKD-and-strip, recorded with the vocabulary and followed
by every tokenizing path, Python and in-graph alike, on real text in Japanese, Korean, Chinese, Vietnamese and
accented Latin script. The default (English ALBERT's stripping) is unchanged: tests/test_tokenization.py."""
import pytest

from albert_tf.data.vocab import train_vocab
from albert_tf.text import AlbertTokenizer, normalize, normalize_with_offsets, vocabulary

pytestmark = pytest.mark.tpu_stack

TEXTS = [
    "がぎぐげご、ざじずぜぞ。ばびぶべぼ と ぱぴぷぺぽ は ちがう 音です。",
    "かきくけこ と がぎぐげご、はひふへほ と ばびぶべぼ と ぱぴぷぺぽ。",
    "東京の大学で日本語を勉強しています。ｶﾞｲﾄﾞﾌﾞｯｸ を ダウンロード しました。",
    "한국어 텍스트를 정규화해도 글자가 그대로 남아야 합니다. 값이 맞습니다.",
    "中文文本的规范化：全角字符ＡＢＣ１２３和标点，。",
    "Tiếng Việt có nhiều dấu: người, được, những, Hà Nội, Đà Nẵng.",
    "Crème brûlée, façade, naïve, Ångström, São Paulo, İstanbul, ﬁnancial Æsir.",
    "Müller fährt über die Straße nach Köln; señor Pérez llegó también.",
]
CORPUS = [t for _ in range(30) for t in TEXTS] + [f"{t} {i}" for i, t in enumerate(TEXTS * 5)]


@pytest.fixture(scope="module", params=[False, True], ids=["strip", "keep_accents"])
def tokenizer(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp("accents")
    path = directory / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    result = train_vocab(str(path), str(directory / "spm"), vocab_size="auto", keep_accents=request.param,
                         lower_case=False)
    return AlbertTokenizer(result.model)  # the record decides: cased, and whether accents are kept


def test_the_record_decides_the_normalization(tokenizer):
    """Before: `AlbertTokenizer(path)` ignored the record (lowercased a cased vocabulary)."""
    recorded = vocabulary.read_text_record(tokenizer.model_name)
    assert tokenizer.lower_case is False and recorded.lower_case is False
    assert tokenizer.keep_accents is recorded.keep_accents
    with pytest.raises(ValueError, match="contradicts .*spm.casing.json"):
        AlbertTokenizer(tokenizer.model_name, lower_case=True)
    with pytest.raises(ValueError, match="contradicts .*spm.casing.json"):
        AlbertTokenizer(tokenizer.model_name, keep_accents=not tokenizer.keep_accents)


def test_voicing_marks_and_accents(tokenizer):
    """が ≠ か, ば and ぱ ≠ は, ế and é kept with keep_accents; the original strips them. Compatibility forms fold
    either way (ｶﾞ → ガ or カ, ﬁ → fi, full-width ＡＢＣ → ABC); Hangul stays Hangul."""
    keep = tokenizer.keep_accents
    norm = lambda text: normalize(text, lower_case=False, keep_accents=keep)  # noqa: E731
    assert (norm("が") != norm("か")) is keep and (norm("ば") != norm("は") != norm("ぱ")) is keep
    assert norm("Tiếng Việt") == ("Tiếng Việt" if keep else "Tieng Viet")
    assert norm("crème") == ("crème" if keep else "creme")
    assert norm("ｶﾞｲﾄﾞ ﬁ ＡＢＣ") == ("ガイド fi ABC" if keep else "カイト fi ABC")
    assert norm("한국어") in ("한국어", normalize("한국어", False))
    ids = tokenizer.encode(["がくせい", "かくせい"])
    assert (ids[0] != ids[1]) is keep


def test_python_ids_equal_in_graph_ids(tokenizer):
    texts = TEXTS + [t.upper() for t in TEXTS] + ["  が\u3099 ", "e\u0301 cafe\u0301", "ﾊﾟﾝ ﾊﾞｽ", "ㄱㅏ 각"]
    assert tokenizer.tf_encode(texts).to_list() == tokenizer.encode(texts)
    assert [s.decode() for s in tokenizer.tf_normalize(texts).numpy()] == \
        [normalize(t, False, tokenizer.keep_accents) for t in texts]
    packed = tokenizer.tf_pack(TEXTS[:4], TEXTS[4:], seq_length=32)
    expected = tokenizer.pack(TEXTS[:4], TEXTS[4:], seq_length=32)
    assert all((packed[k].numpy() == expected[k]).all() for k in expected)


def test_offsets_python_equal_in_graph(tokenizer):
    """encode_with_offsets (SQuAD's path): the same ids and character spans in the graph."""
    from albert_tf.text import in_graph  # pylint: disable=import-outside-toplevel

    texts = TEXTS + ["  ば\u309a e\u0301  ｶﾞｲﾄﾞ", "ﬁnancial Đà Nẵng"]
    encoder = in_graph.make_offset_encoder(tokenizer)
    ids, starts, ends = encoder.encode_with_offsets(texts)
    for k, text in enumerate(texts):
        want_ids, spans = tokenizer.encode_with_offsets(text)
        assert ids[k].numpy().tolist() == want_ids
        assert list(zip(starts[k].numpy().tolist(), ends[k].numpy().tolist())) == spans
        normalized, _, _ = normalize_with_offsets(text, False, tokenizer.keep_accents)
        assert normalized == normalize(text, False, tokenizer.keep_accents)
