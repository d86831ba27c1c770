"""AlbertTokenizer: normalization, special ids, the digit-comma rule, packing, and Python == in-graph ids.

The digit-comma and packing expectations come from a hand-written SentencePiece model (`_hand_model`), whose
segmentations are worked out by hand in the comments.
"""
import struct

import numpy as np
import pytest

import helpers
from albert_tf.text import (AlbertTokenizer, normalize, normalize_with_offsets, segment_lengths,
                            truncated_lengths)
from helpers import EQUALITY_TEXTS

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


# ---------------------------------------------------------------------------------- a hand-made SentencePiece model
NORMAL, UNKNOWN, CONTROL = 1, 2, 3  # sentencepiece_model.proto ModelProto.SentencePiece.Type


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _length_delimited(field, data):
    data = data.encode() if isinstance(data, str) else data
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _int_field(field, value):
    return _varint(field << 3) + _varint(value)


def _model_proto(pieces, pad_id=0, unk_id=1):
    """Serializes a unigram ModelProto by hand (the generated protobuf module may not match the runtime).

    pieces: list of (piece, score, type); ids are list positions. pad 0, unk 1, no bos/eos, identity normalizer.
    """
    out = b""
    for piece, score, kind in pieces:
        body = _length_delimited(1, piece) + _varint(2 << 3 | 5) + struct.pack("<f", score) + _int_field(3, kind)
        out += _length_delimited(1, body)
    trainer = (_int_field(3, 1) + _int_field(40, unk_id) + _int_field(41, -1) + _int_field(42, -1)
               + _int_field(43, pad_id))
    normalizer = _length_delimited(1, "identity") + _int_field(3, 1) + _int_field(4, 1) + _int_field(5, 1)
    return out + _length_delimited(2, trainer) + _length_delimited(3, normalizer)


SPECIALS = [("<pad>", 0.0, CONTROL), ("<unk>", 0.0, UNKNOWN), ("[CLS]", 0.0, CONTROL), ("[SEP]", 0.0, CONTROL),
            ("[MASK]", 0.0, CONTROL)]
HAND_PIECES = SPECIALS + [
    ("▁", -2.0, NORMAL),      # 5
    ("▁3.0,", 5.0, NORMAL),   # 6   wins over ▁3 . 0 , for "3.0,"
    ("▁3", -1.0, NORMAL),     # 7
    (".", -2.0, NORMAL),      # 8
    ("0", -2.0, NORMAL),      # 9
    (",", -2.0, NORMAL),      # 10
    ("5,", 5.0, NORMAL),      # 11  a digit-comma piece without ▁
    ("5", -2.0, NORMAL),      # 12
    ("▁x", -1.0, NORMAL),     # 13
    ("7,", 5.0, NORMAL),      # 14
    ("▁7", -1.0, NORMAL),     # 15
    ("7", -2.0, NORMAL),      # 16
    ("▁y", -1.0, NORMAL),     # 17
    ("3", -2.0, NORMAL),      # 18
    ("x", -2.0, NORMAL),      # 19
    ("y", -2.0, NORMAL),      # 20
]


@pytest.fixture(scope="module")
def hand_tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("hand") / "hand.model"
    path.write_bytes(_model_proto(HAND_PIECES))
    return AlbertTokenizer(str(path))


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_spm_model):
    return AlbertTokenizer(tiny_spm_model)


# -------------------------------------------------------------------------------------------------- normalize
@pytest.mark.parametrize("text, expected", [
    ("Café naïve", "cafe naive"),
    ("  runs \t of\n\n white\u00a0space\u3000here  ", "runs of white space here"),
    ("中文字符", "中文字符"),                        # CJK kept (no decomposition, no case)
    ("日本語のテキスト", "日本語のテキスト"),
    ("emoji 😀 ok", "emoji 😀 ok"),
    ("", ""),
    ("   ", ""),
    ("``Quoted'' TEXT", '"quoted" text'),
    ("Résumé 1999 3.0, 7,5", "resume 1999 3.0, 7,5"),  # digits untouched
    ("ﬁ ① ＡＢＣ", "fi 1 abc"),                       # NFKD compatibility forms
    ("e\u0301", "e"),                                  # a combining mark on its own is dropped
    ("ΟΔΟΣ", "οδος"),                                  # final sigma from str.lower
])
def test_normalize_hand_examples(text, expected):
    assert normalize(text) == expected


def test_normalize_cuts_words_at_max_word_chars():
    """Each whitespace-separated word keeps its first MAX_WORD_CHARS (256) code points, counted before NFKD, the
    quote rule and lowercasing."""
    assert normalize("a" * 256) == "a" * 256 and normalize("a" * 257) == "a" * 256
    assert normalize("x\t" + "B" * 300 + "\u3000" + "c" * 256 + " d") == "x " + "b" * 256 + " " + "c" * 256 + " d"
    assert normalize("ﬁ" * 300) == "fi" * 256                   # NFKD after the cut: 256 ligatures, 512 letters
    assert normalize("e\u0301" * 200) == "e" * 128               # 256 code points = 128 letter-mark pairs
    assert normalize("é" * 300) == "e" * 256                      # precomposed: one code point each
    assert normalize("`" * 300 + " q") == '"' * 128 + " q"        # 256 backticks, then pairs
    assert normalize("Ab" * 200, lower_case=False) == "Ab" * 128


def test_normalize_with_offsets_cuts_long_words():
    text = "ab \t" + "C" * 300 + " d"
    normalized, starts, ends = normalize_with_offsets(text)
    assert normalized == normalize(text) == "ab " + "c" * 256 + " d"
    assert starts.tolist() == [0, 1, 2] + list(range(4, 260)) + [304, 305]
    assert (ends - starts).tolist() == [1] * len(normalized)
    normalized, starts, ends = normalize_with_offsets("ﬁ" * 258)
    assert normalized == "fi" * 256 and starts.tolist() == [k // 2 for k in range(512)]


def test_normalize_cased_keeps_case_but_strips_accents():
    assert normalize("Café  Naïve", lower_case=False) == "Cafe Naive"


# ------------------------------------------------------------------------------------------------ special ids
def test_special_ids(tiny_tokenizer):
    tok = tiny_tokenizer
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert tok.piece_to_id("[MASK]") == 4
    assert tok.vocab_size == 300


@pytest.mark.parametrize("pieces, message", [
    (SPECIALS[:4] + HAND_PIECES[5:], r"\[MASK\] is missing, expected at id 4"),
    (SPECIALS[:2] + [SPECIALS[3], SPECIALS[2]] + HAND_PIECES[4:], r"\[CLS\] is at id 3, expected at id 2"),
])
def test_bad_special_ids_name_the_model(tmp_path, pieces, message):
    path = tmp_path / "bad.model"
    path.write_bytes(_model_proto(pieces))
    with pytest.raises(ValueError, match=message) as info:
        AlbertTokenizer(str(path))
    assert str(path) in str(info.value)


def test_bad_pad_id_names_the_model(tmp_path):
    path = tmp_path / "nopad.model"
    path.write_bytes(_model_proto([("<unk>", 0.0, UNKNOWN)] + HAND_PIECES[2:], pad_id=-1, unk_id=0))
    with pytest.raises(ValueError, match=f"SentencePiece model {path}: <pad> has id -1, expected 0"):
        AlbertTokenizer(str(path))


def test_missing_and_corrupt_model_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.model"):
        AlbertTokenizer(str(tmp_path / "nope.model"))
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\x00not a model at all")
    with pytest.raises(ValueError, match=f"{junk} is not a SentencePiece model"):
        AlbertTokenizer(str(junk))


def test_model_from_bytes(tiny_spm_model, tiny_tokenizer):
    with open(tiny_spm_model, "rb") as f:
        tok = AlbertTokenizer(f.read())
    assert tok.encode("the river of time") == tiny_tokenizer.encode("the river of time")


# ----------------------------------------------------------------------------------------- digit-comma rule
@pytest.mark.parametrize("text, pieces, ids", [
    # SentencePiece gives ["▁3.0,", "▁y"]; "▁3.0," -> pieces("3.0") = ["▁3", ".", "0"], then ",".
    ("3.0, y", ["▁3", ".", "0", ",", "▁y"], [7, 8, 9, 10, 17]),
    # ["▁x", "5,"]: "5," lacks ▁, so the "▁" that re-encoding "5" puts first (["▁", "5"]) is dropped.
    ("x5,", ["▁x", "5", ","], [13, 12, 10]),
    # ["▁x", "7,"]: re-encoding "7" gives ["▁7"], whose leading ▁ is stripped -> "7".
    ("x7,", ["▁x", "7", ","], [13, 16, 10]),
    # "▁3" "," are separate pieces: nothing to split.
    ("y 3,", ["▁y", "▁3", ","], [17, 7, 10]),
])
def test_digit_comma_rule_hand_computed(hand_tokenizer, text, pieces, ids):
    assert hand_tokenizer.encode_as_pieces(text) == pieces
    assert hand_tokenizer.encode(text) == ids


# ----------------------------------------------------------------------------------------------------- packing
def _pop_loop_lengths(len_a, len_b, seq_length):
    """Reference: pop from the end of the longer segment (b on a tie) until the packed pair fits."""
    while len_a + len_b > seq_length - 3:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def test_truncated_lengths_matches_pop_loop_and_an_empty_b_is_none():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    grid = []
    for seq_length in range(3, 12):
        for len_a in range(12):
            for len_b in range(1, 12):
                want = _pop_loop_lengths(len_a, len_b, seq_length)
                assert truncated_lengths(len_a, len_b, seq_length) == want
                assert segment_lengths(len_a, len_b, seq_length) == (*want, True)
                grid.append((seq_length, len_a, len_b, *want, True))
            for none in (None, 0):  # no second segment: [CLS] a [SEP], a keeps up to L - 2
                assert truncated_lengths(len_a, none, seq_length) == (min(len_a, seq_length - 2), None)
            assert segment_lengths(len_a, 0, seq_length) == (min(len_a, seq_length - 2), 0, False)
            grid.append((seq_length, len_a, 0, min(len_a, seq_length - 2), 0, False))
    # the same function on tensors (as tf_pack calls it), one seq_length at a time
    grid = np.array(grid, np.int64)
    for seq_length in range(3, 12):
        rows = grid[grid[:, 0] == seq_length]
        got = segment_lengths(tf.constant(rows[:, 1]), tf.constant(rows[:, 2]), seq_length, tf.minimum,
                              tf.maximum, tf.where)
        np.testing.assert_array_equal(np.stack([t.numpy() for t in got], axis=1).astype(np.int64), rows[:, 3:])


NO_SECOND_SEGMENT = ["", " ", " \t\u00a0 ", "\u0301"]  # empty, whitespace, a lone combining mark


def test_pack_without_a_second_segment_is_a_single_sentence(hand_tokenizer):
    """None, "", whitespace and text that normalizes to nothing: [CLS] a [SEP], with a keeping L - 2 ids (pair
    packing would keep L - 3 and add a second [SEP]); the same in a batch beside a real pair."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    single = hand_tokenizer.pack("3.0, y", seq_length=6)
    np.testing.assert_array_equal(single["input_word_ids"], [2, 7, 8, 9, 10, 3])  # a keeps 4 = L - 2
    for b in NO_SECOND_SEGMENT:
        assert hand_tokenizer.encode(b) == []
        got = hand_tokenizer.pack("3.0, y", b, seq_length=6)
        for key, value in single.items():
            np.testing.assert_array_equal(got[key], value, err_msg=repr(b))
    texts_b = NO_SECOND_SEGMENT + [None, "x7,"]
    batch = hand_tokenizer.pack(["3.0, y"] * len(texts_b), texts_b, seq_length=6)
    in_graph = hand_tokenizer.tf_pack(tf.constant(["3.0, y"] * len(texts_b)),
                                      tf.constant([b or "" for b in texts_b]), seq_length=6)
    omitted = hand_tokenizer.tf_pack(tf.constant(["3.0, y"] * 2), tf.constant([], tf.string), seq_length=6)
    for key, value in single.items():
        np.testing.assert_array_equal(batch[key][:-1], np.stack([value] * (len(texts_b) - 1)))
        np.testing.assert_array_equal(in_graph[key].numpy(), batch[key])
        np.testing.assert_array_equal(omitted[key].numpy(), np.stack([value] * 2))
    np.testing.assert_array_equal(batch["input_word_ids"][-1], [2, 7, 8, 3, 13, 3])  # a real pair
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_a and text_b must have the same length"):
        hand_tokenizer.tf_pack(tf.constant(["a", "b"]), tf.constant(["a"]), seq_length=6)


def test_pack_layout_hand_computed(hand_tokenizer):
    # a = "3.0, y" -> [7, 8, 9, 10, 17]; b = "x7," -> [13, 16, 10]
    out = hand_tokenizer.pack("3.0, y", "x7,", seq_length=12)
    np.testing.assert_array_equal(out["input_word_ids"], [2, 7, 8, 9, 10, 17, 3, 13, 16, 10, 3, 0])
    np.testing.assert_array_equal(out["input_mask"], [1] * 11 + [0])
    np.testing.assert_array_equal(out["input_type_ids"], [0] * 7 + [1] * 4 + [0])
    assert all(v.dtype == np.int32 and v.shape == (12,) for v in out.values())
    # seq 8: 5 + 3 tokens for 5 slots -> pop a, pop a, (tie) pop b -> a keeps 3, b keeps 2.
    out = hand_tokenizer.pack("3.0, y", "x7,", seq_length=8)
    np.testing.assert_array_equal(out["input_word_ids"], [2, 7, 8, 9, 3, 13, 16, 3])
    np.testing.assert_array_equal(out["input_type_ids"], [0, 0, 0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(out["input_mask"], [1] * 8)
    # one segment, truncated from the end
    out = hand_tokenizer.pack("3.0, y", seq_length=5)
    np.testing.assert_array_equal(out["input_word_ids"], [2, 7, 8, 9, 3])
    np.testing.assert_array_equal(out["input_type_ids"], [0] * 5)


def test_pack_batch_equals_rows(hand_tokenizer):
    texts_a, texts_b = ["3.0, y", "x5,", ""], ["x7,", "", "y 3,"]
    batch = hand_tokenizer.pack(texts_a, texts_b, seq_length=9)
    for key, value in batch.items():
        assert value.shape == (3, 9) and value.dtype == np.int32
        for row, (a, b) in enumerate(zip(texts_a, texts_b)):
            np.testing.assert_array_equal(value[row], hand_tokenizer.pack(a, b, seq_length=9)[key])
    np.testing.assert_array_equal(batch["input_word_ids"][2], [2, 3, 17, 7, 10, 3, 0, 0, 0])


def test_pack_bad_arguments(hand_tokenizer):
    with pytest.raises(ValueError, match="seq_length must be at least 3"):
        hand_tokenizer.pack("x", "y", seq_length=2)
    with pytest.raises(ValueError, match="text_b must match text_a"):
        hand_tokenizer.pack(["x", "y"], ["x"], seq_length=8)


# ------------------------------------------------------------------------------------ Python == in-graph ids


def _long_text():
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(3)
    return " ".join(helpers.make_sentence(rng) for _ in range(120))


def test_encode_ids_equal_piece_ids(tiny_tokenizer, hand_tokenizer):
    for tok in (tiny_tokenizer, hand_tokenizer):
        for text in EQUALITY_TEXTS + [_long_text()]:
            assert tok.encode(text) == [tok.piece_to_id(p) for p in tok.encode_as_pieces(text)], text


def test_tf_normalize_equals_normalize(tiny_tokenizer):
    texts = EQUALITY_TEXTS + [_long_text()]
    got = [s.decode("utf-8") for s in tiny_tokenizer.tf_normalize(texts).numpy()]
    assert got == [normalize(t) for t in texts]


@pytest.mark.parametrize("which", ["tiny", "hand"])
def test_tf_encode_equals_encode(which, tiny_tokenizer, hand_tokenizer):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tok = tiny_tokenizer if which == "tiny" else hand_tokenizer
    texts = EQUALITY_TEXTS + [_long_text(), "3.0, y x5, x7,"]
    expected = [tok.encode(t) for t in texts]
    ragged = tok.tf_encode(tf.constant(texts))
    assert ragged.dtype == tf.int32 and ragged.shape.rank == 2
    assert ragged.to_list() == expected

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode_fn(strings):
        return tok.tf_encode(strings)

    assert encode_fn(tf.constant(texts)).to_list() == expected
    scalar = tok.tf_encode(tf.constant(texts[0]))  # a scalar string gives a 1-D int32 tensor
    assert scalar.shape.rank == 1 and scalar.numpy().tolist() == expected[0]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(4).map(tok.tf_encode)
    assert [row for batch in dataset for row in batch.to_list()] == expected


@pytest.mark.parametrize("seq_length", [8, 32])
def test_tf_pack_equals_pack(hand_tokenizer, tiny_tokenizer, seq_length):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    for tok in (hand_tokenizer, tiny_tokenizer):
        texts_a = EQUALITY_TEXTS + ["3.0, y x5, x7,"]
        texts_b = list(reversed(texts_a))
        for b in (None, texts_b):
            expected = tok.pack(texts_a, b, seq_length=seq_length)
            got = tok.tf_pack(tf.constant(texts_a), None if b is None else tf.constant(b), seq_length=seq_length)
            for key in expected:
                assert got[key].dtype == tf.int32 and got[key].shape.as_list() == [len(texts_a), seq_length]
                np.testing.assert_array_equal(got[key].numpy(), expected[key], err_msg=key)


def test_in_graph_tokenizer_survives_saved_model(hand_tokenizer, tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.tokenizer = hand_tokenizer.in_graph
    module.pack = tf.function(lambda a, b: hand_tokenizer.tf_pack(a, b, seq_length=12),
                              input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    tf.saved_model.save(module, str(tmp_path / "saved"))
    del module
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    got = loaded.pack(tf.constant(["3.0, y"]), tf.constant(["x7,"]))
    np.testing.assert_array_equal(got["input_word_ids"].numpy()[0], [2, 7, 8, 9, 10, 17, 3, 13, 16, 10, 3, 0])


def test_in_graph_tokenizer_survives_tf_random_set_seed(tiny_tokenizer):
    """TF Text's SentencePiece resource is owned by the eager kernel that made it; tf.random.set_seed (what
    keras.utils.set_random_seed calls, as `finetune` does) clears the kernel cache and deletes it."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    want = [tiny_tokenizer.encode("the old river")]
    assert tiny_tokenizer.tf_encode(tf.constant(["the old river"])).to_list() == want
    tf.random.set_seed(1234)
    assert tiny_tokenizer.tf_encode(tf.constant(["the old river"])).to_list() == want
    dataset = tf.data.Dataset.from_tensor_slices(["the old river"]).batch(1).map(tiny_tokenizer.tf_encode)
    tf.random.set_seed(1234)
    _ = tiny_tokenizer.in_graph  # a pipeline built after seeding works (the module is rebuilt eagerly)
    dataset = tf.data.Dataset.from_tensor_slices(["the old river"]).batch(1).map(tiny_tokenizer.tf_encode)
    assert [b.to_list() for b in dataset] == [want]


def test_python_path_does_not_import_tensorflow(tiny_spm_model):
    code = ("import sys; from albert_tf.text import AlbertTokenizer; "
            f"t = AlbertTokenizer({tiny_spm_model!r}); t.encode('the river'); t.pack('a', 'b', seq_length=8); "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    result = helpers.run_python(code)
    assert result.returncode == 0, result.stderr


def test_tf_encode_equals_encode_on_random_unicode(tiny_tokenizer):
    """300 seeded random strings drawn from ASCII, the BMP and the supplementary planes (no surrogates)."""
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(0)
    spans = [(0x0, 0x7F), (0xA0, 0x2FFF), (0x3000, 0xD7FF), (0xE000, 0xFFEF), (0x10000, 0x1FBFF)]
    texts = ["".join(chr(rng.randint(*rng.choice(spans))) for _ in range(rng.randint(0, 12))) for _ in range(300)]
    assert tiny_tokenizer.tf_encode(texts).to_list() == [tiny_tokenizer.encode(t) for t in texts]


def test_bytes_input_decodes_as_utf8(hand_tokenizer):
    assert hand_tokenizer.encode("3.0, y".encode()) == [7, 8, 9, 10, 17]
    assert hand_tokenizer.encode([b"x7,", "x5,"]) == [[13, 16, 10], [13, 12, 10]]
    np.testing.assert_array_equal(hand_tokenizer.pack(b"x7,", seq_length=6)["input_word_ids"], [2, 13, 16, 10, 3, 0])
    with pytest.raises(TypeError, match="expected str or bytes, got int"):
        hand_tokenizer.encode_as_pieces(3)


# ---------------------------------------------------------------------------------- offsets into the original text
def _random_texts(count, seed):
    """Seeded strings mixing ASCII words with the characters normalization changes or drops."""
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(seed)
    pool = (list("abcxyz XYZ.,`'3017") + ["café", "Naïve", "``", "''", "\t", "\n", "\u00a0", "\u3000", "\x1c",
                                          "\u0301", "\u0308", "ﬁ", "½", "Σ", "ΟΔΟΣ", "İ", "ǅ", "한", "¨", "①",
                                          "ＡＢ", "😀", "\x00", "ẞ", "ŉ", "3.0,", "7,"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 16))) for _ in range(count)]


def test_normalize_with_offsets_hand_example():
    text = "  Café\t\t``naïve''  ﬁ "
    normalized, starts, ends = normalize_with_offsets(text)
    assert normalized == normalize(text) == 'cafe "naive" fi'
    # c a f e <space from \t\t> " n a i v e " <space> f i
    assert starts.tolist() == [2, 3, 4, 5, 6, 8, 10, 11, 12, 13, 14, 15, 17, 19, 19]
    assert ends.tolist() == [3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 17, 18, 20, 20]
    assert normalize_with_offsets("ΟΔΟΣ ΑΣ", lower_case=True)[0] == normalize("ΟΔΟΣ ΑΣ") == "οδος ας"
    normalized, starts, ends = normalize_with_offsets("Café", lower_case=False)
    assert (normalized, starts.tolist(), ends.tolist()) == ("Cafe", [0, 1, 2, 3], [1, 2, 3, 4])
    normalized, starts, ends = normalize_with_offsets("x İ")  # NFKD: I + dot above (dropped), then lower
    assert (normalized, starts.tolist(), ends.tolist()) == ("x i", [0, 1, 2], [1, 2, 3])


@pytest.mark.parametrize("lower_case", [True, False])
def test_normalize_with_offsets_equals_normalize(lower_case):
    for text in EQUALITY_TEXTS + _random_texts(400, seed=1):
        normalized, starts, ends = normalize_with_offsets(text, lower_case)
        assert normalized == normalize(text, lower_case), repr(text)
        assert len(starts) == len(ends) == len(normalized)
        assert starts.tolist() == sorted(starts) and all(0 <= s < e <= len(text) for s, e in zip(starts, ends))
        for char, s, e in zip(normalized, starts, ends):  # each character comes from the span it points at
            source = text[s:e]
            assert char == " " and source.isspace() or char.casefold() in normalize(source).casefold(), (text, char)


def _check_offsets(tok, text):
    ids, spans = tok.encode_with_offsets(text)
    assert ids == tok.encode(text), repr(text)
    assert len(spans) == len(ids)
    for (s, e), piece_id in zip(spans, ids):
        assert 0 <= s <= e <= len(text)
        assert text[s:e] == text[s:e].strip(), (text, s, e)  # no surrounding whitespace
        piece = tok.id_to_piece(piece_id).lstrip("\u2581")
        if piece and piece_id != tok.unk_id:  # the piece's text is what its span normalizes to (or inside it)
            assert piece in normalize(text[s:e], tok.lower_case) or normalize(text[s:e], tok.lower_case) in piece
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    return ids, spans


def test_encode_with_offsets_maps_pieces_to_the_original(tiny_tokenizer):
    text = "The CAFÉ naïve costs 3.0, today ``quoted''"
    ids, spans = _check_offsets(tiny_tokenizer, text)
    covered = "".join(text[s:e] for s, e in spans)
    assert covered.replace(" ", "") == text.replace(" ", "")  # every character is some piece's, once
    words = {text[s:e] for s, e in spans}
    assert "É" in "".join(words) and "ï" in "".join(words)
    for text in EQUALITY_TEXTS + _random_texts(300, seed=2) + [_long_text()]:
        _check_offsets(tiny_tokenizer, text)


def test_encode_with_offsets_digit_comma_rule(hand_tokenizer):
    # "3.0, y" -> ▁3 . 0 , ▁y (the piece "▁3.0," split); "x5," -> ▁x 5 , (the lone "▁" of "5" dropped)
    text = "3.0, y"
    assert hand_tokenizer.encode_with_offsets(text) == ([7, 8, 9, 10, 17], [(0, 1), (1, 2), (2, 3), (3, 4), (5, 6)])
    assert hand_tokenizer.encode_with_offsets("x5,") == ([13, 12, 10], [(0, 1), (1, 2), (2, 3)])
    assert hand_tokenizer.encode_with_offsets("  x7,") == ([13, 16, 10], [(2, 3), (3, 4), (4, 5)])
    for text in _random_texts(200, seed=3):
        _check_offsets(hand_tokenizer, text)


# ------------------------------------------------------------------- equal-score ties: one canonical order
def test_primitive_root_and_canonical_order_hand_computed():
    from albert_tf.text import canonical_order, primitive_root, run_tables  # pylint: disable=import-outside-toplevel

    assert primitive_root("====") == ("=", 4) and primitive_root("abab") == ("ab", 2)
    assert primitive_root("aba") == ("aba", 1) and primitive_root("x") == ("x", 1)
    pieces = ["<pad>", "=", "===", "==", "ab", "abab", "▁", "x", "y"]
    root, power = run_tables(pieces, skip={0})
    assert root[7] < 0 and root[8] < 0 and root[0] < 0 and root[1] == root[2] == root[3] >= 0
    assert power[:6] == [1, 1, 3, 2, 1, 2]
    # runs: [2, 1, 3] -> powers 3, 1, 2 -> [1, 3, 2]; [5, 4] -> [4, 5]; "x" "x" and "x" "=" are no runs.
    assert canonical_order([6, 2, 1, 3, 7, 5, 4, 2, 7, 7], root, power) == [6, 1, 3, 2, 7, 4, 5, 2, 7, 7]
    unchanged = [6, 1, 3, 7]
    assert canonical_order(unchanged, root, power) is unchanged


def _tie_corpus(path):
    """English-like sentences plus the tie-prone strings real text has: borders of one repeated character, hex
    masks, runs of digits."""
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(0)
    lines = []
    for i in range(3000):
        lines.append(helpers.make_sentence(rng))
        if i % 3 == 0:
            lines.append(rng.choice("=-*#~x09") * rng.randint(2, 40))
        if i % 7 == 0:
            lines.append("0x" + "f" * rng.randint(2, 16) + " " + "9" * rng.randint(2, 12))
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(path)


TIE_PRONE = ([c * n for c in "=-*#~x09" for n in range(2, 60)] + ["0x" + "f" * n for n in range(2, 20)]
             + ["+" + "=" * n + "+" + "=" * (n + 7) + "+ 999999" for n in range(1, 30)])


@pytest.fixture(scope="module")
def tie_tokenizer(tmp_path_factory):
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel

    directory = tmp_path_factory.mktemp("ties")
    train_vocab(_tie_corpus(directory / "corpus.txt"), str(directory / "ties"), vocab_size=350)
    return AlbertTokenizer(str(directory / "ties.model"))


def test_in_graph_equals_python_on_equal_score_ties(tie_tokenizer):
    """pip sentencepiece and TF Text's copy break Viterbi ties between commuting pieces differently; both paths
    put them in the canonical order, so they agree. The raw segmentations show the ties are really there."""
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    tok = tie_tokenizer
    raw_pip = spm.SentencePieceProcessor(model_proto=tok.model_proto).encode(TIE_PRONE)
    raw_tf = tf_text.SentencepieceTokenizer(model=tok.model_proto).tokenize(TIE_PRONE).to_list()
    expected = tok.encode(TIE_PRONE)
    reordered = sum(1 for p, t, e in zip(raw_pip, raw_tf, expected) if p != e or t != e)
    assert reordered >= 5, "the vocabulary should produce equal-score ties on these strings"
    for p, e in zip(raw_pip, expected):
        assert sorted(p) == sorted(e)  # the same pieces, at most reordered
    assert tok.tf_encode(tf.constant(TIE_PRONE)).to_list() == expected
    assert tok.encode_as_pieces(TIE_PRONE[40]) == [tok.id_to_piece(i) for i in expected[40]]


# A hand vocabulary where pip sentencepiece segments "=====" as "===" "==" (its float32 path sums differ by
# rounding), the canonical order is "==" "===": encode_with_offsets must follow encode and carry the spans along.
TIE_HAND_PIECES = SPECIALS + [
    ("▁", -1.8, NORMAL),       # 5
    ("=", -20.0, NORMAL),      # 6
    ("==", -2.2, NORMAL),      # 7
    ("===", -3.9, NORMAL),     # 8
    ("x", -2.0, NORMAL),       # 9
    ("3", -2.0, NORMAL),       # 10
    (",", -2.0, NORMAL),       # 11
    ("▁=====3,", 30.0, NORMAL),  # 12  a digit-comma piece whose head "=====3" holds a tie run
]


@pytest.fixture(scope="module")
def tie_hand_tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tie_hand") / "tie_hand.model"
    path.write_bytes(_model_proto(TIE_HAND_PIECES))
    return AlbertTokenizer(str(path))


def test_encode_with_offsets_ties_hand_computed(tie_hand_tokenizer):
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    tok = tie_hand_tokenizer
    assert spm.SentencePieceProcessor(model_proto=tok.model_proto).encode("x =====") == [5, 9, 5, 8, 7]  # raw tie
    # "x =====" -> ▁ x ▁ == ===: the run's spans laid out again in the new order ("==" first, then "===").
    assert tok.encode_with_offsets("x =====") == ([5, 9, 5, 7, 8], [(0, 0), (0, 1), (2, 2), (2, 4), (4, 7)])
    assert tok.encode("x =====") == [5, 9, 5, 7, 8]
    # "=====3," is the digit-comma piece: its head "=====3" re-encoded (▁ == === 3, canonical), then ",".
    assert tok.encode_with_offsets(" =====3,") == ([5, 7, 8, 10, 11], [(1, 1), (1, 3), (3, 6), (6, 7), (7, 8)])
    assert tok.encode(" =====3,") == [5, 7, 8, 10, 11]


def _tie_texts(rng):
    words = TIE_PRONE + ["ieee", "0xffff", "x" * 33, "=====3,", "=" * 11]
    return [" ".join(rng.choice(words + [helpers.make_sentence(rng)]) for _ in range(rng.randint(1, 5)))
            for _ in range(150)]


@pytest.mark.parametrize("which", ["tie_tokenizer", "tie_hand_tokenizer"])
def test_encode_with_offsets_equals_encode_and_in_graph_on_ties(which, request):
    """Python encode_with_offsets gives encode's ids on tie runs, and the in-graph OffsetEncoder the same spans."""
    import random  # pylint: disable=import-outside-toplevel

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.text import in_graph  # pylint: disable=import-outside-toplevel

    tok = request.getfixturevalue(which)
    texts = TIE_PRONE + _tie_texts(random.Random(5))
    python = [_check_offsets(tok, text) for text in texts]
    ids, starts, ends = in_graph.make_offset_encoder(tok).encode_with_offsets(tf.constant(texts))
    for row, (text, (want_ids, want_spans)) in enumerate(zip(texts, python)):
        assert ids[row].numpy().tolist() == want_ids, text
        assert list(zip(starts[row].numpy().tolist(), ends[row].numpy().tolist())) == want_spans, text


def test_in_graph_equals_python_on_english_like_text(tie_tokenizer):
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(11)
    texts = [" ".join(helpers.make_sentence(rng) for _ in range(rng.randint(1, 6))) for _ in range(500)]
    assert tie_tokenizer.tf_encode(texts).to_list() == tie_tokenizer.encode(texts)


# ------------------------------------------------------------------------------ tf_pack cuts long texts, exactly
def _long_texts():
    """Texts where cutting after the first words could go wrong: many words, long words (tie-prone too), long
    whitespace runs of every kind, words that normalize to nothing, exactly the word count that fits."""
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(5)
    many = " ".join(helpers.make_sentence(rng) for _ in range(60))
    spaces = "".join(rng.choice([" ", "\t", "\n", "\u00a0", "\u3000", "\x1c", "\u2009"]) for _ in range(3000))
    return [
        many, many.replace(" ", spaces[:50]), spaces + many + spaces, "x" * 5000, "=" * 3001 + " " + many,
        "the " + "0x" + "f" * 2000 + " river", "\u0301 " * 200 + many, "\u00a8 " * 100 + "x y", "\u0301 " * 300,
        " ".join(["3.0,"] * 40), " ".join(["river"] * 5), " ".join(["river"] * 6), " ".join(["river"] * 7),
        "ΟΔΟΣ " * 30 + "Σ", "``" + " ''" * 40, "x7, " * 30 + "3.0,",
    ] + [" ".join(_random_texts(40, seed)) for seed in range(8)]


@pytest.mark.parametrize("seq_length", [8, 30])
def test_tf_pack_cut_gives_python_ids_on_long_texts(hand_tokenizer, tiny_tokenizer, tie_tokenizer, seq_length):
    """tf_pack tokenizes only the first words it can keep (seq_length - 2, or - 3 for pairs); pack tokenizes all."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    texts_a = _long_texts()
    texts_b = list(reversed(texts_a))
    for tok in (hand_tokenizer, tiny_tokenizer, tie_tokenizer):
        assert tok.pieces_stay_in_words
        for b in (None, texts_b):
            expected = tok.pack(texts_a, b, seq_length=seq_length)
            got = tok.tf_pack(tf.constant(texts_a), None if b is None else tf.constant(b), seq_length=seq_length)
            for key in expected:
                np.testing.assert_array_equal(got[key].numpy(), expected[key], err_msg=key)


def test_tf_cut_words_is_bounded_by_the_word_count(tiny_tokenizer):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    mega = "The river runs past the old city. " * 31_000  # 1.05 MB, 217,000 words
    head, was_cut = tiny_tokenizer.tf_cut_words(tf.constant([mega, " a\t\u3000b  ", ""]), 30)
    head = [h.decode() for h in head.numpy()]
    assert len(mega) > 2**20 and head[0] == " ".join(mega.split()[:30]) and len(head[0].encode()) < 200
    assert head[1:] == ["a b", ""] and was_cut.numpy().tolist() == [True, False, False]
    assert tiny_tokenizer.tf_pack(tf.constant([mega]), seq_length=32)["input_word_ids"].numpy().tolist()[0] == \
        tiny_tokenizer.pack(mega, seq_length=32)["input_word_ids"].tolist()


def test_one_huge_word_is_cut_at_max_word_chars(tiny_tokenizer):
    """A 1 MiB whitespace-free request: SentencePiece sees its first MAX_WORD_CHARS characters in both paths."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    texts = ["\u4e00" * 2**20, "x1" * 2**19, "The " + "=" * 2**20 + " end"]
    assert [len(t) for t in tiny_tokenizer.tf_normalize(tf.constant(texts)).numpy()] == [3 * 256, 256, 4 + 256 + 4]
    got = tiny_tokenizer.tf_pack(tf.constant(texts), seq_length=300)
    want = tiny_tokenizer.pack(texts, seq_length=300)
    for key in want:
        np.testing.assert_array_equal(got[key].numpy(), want[key], err_msg=key)
    assert want["input_mask"][1].sum() < 300  # "x1" * 128 gives fewer ids than the sequence holds: really cut


def test_pieces_stay_in_words_hand_examples():
    from albert_tf.text import pieces_stay_in_words  # pylint: disable=import-outside-toplevel

    assert pieces_stay_in_words(["▁", "▁the", "re", "<unk>", "3.0,"])
    assert not pieces_stay_in_words(["▁the", "of▁the"])  # a piece across a word boundary
    assert not pieces_stay_in_words(["▁the", "a b"])
    assert not pieces_stay_in_words(["the▁"])  # treat_whitespace_as_suffix


# Letters whose lowercase mapping arrived in Unicode 14.0: Python 3.11 lowercases them, TF's ICU (tf.strings.lower)
# does not. Documented in docs/numerics.md; the boundary is tested below.
UNICODE_14_CASED = [0x2C2F, 0xA7C0, 0xA7D0, 0xA7D6, 0xA7D8] + list(range(0x10570, 0x105A2))


def test_icu_and_python_unicode_tables_differ_only_where_documented(tiny_tokenizer):
    """Every code point below U+30000 that Python 3.11 assigns normalizes the same in-graph, except the Unicode 14
    case pairs (which must really differ: the boundary); unassigned ones may differ (TF Text's newer ICU)."""
    import unicodedata  # pylint: disable=import-outside-toplevel

    if unicodedata.unidata_version != "14.0.0":
        pytest.skip(f"the documented list is for Python's Unicode 14.0.0, this is {unicodedata.unidata_version}")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if tuple(int(x) for x in tf.__version__.split(".")[:2]) < (2, 21):
        # TF 2.18's ICU is older than Python 3.11's tables: more characters differ there (docs/numerics.md: the list is
        # TensorFlow 2.21's; CI part 2 runs 2.18 and the TPU wheel 2.20).
        pytest.skip(f"the documented list is TensorFlow 2.21's ICU; this is TensorFlow {tf.__version__}")
    chars = [c for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"]
    texts = ["a" + chr(c) + "b" for c in chars]
    got = [s.decode("utf-8") for s in tiny_tokenizer.tf_normalize(texts).numpy()]
    differ = {c for c, t, g in zip(chars, texts, got) if normalize(t) != g}
    documented = {c for c in UNICODE_14_CASED if chr(c).lower() != chr(c)}
    assert differ == documented
    assert normalize("\u2C2E") != "\u2C2E" and tiny_tokenizer.tf_normalize("\u2C2E").numpy().decode() == "\u2C5E"
