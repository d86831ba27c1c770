"""Hugging Face tokenizer files of an ALBERT SentencePiece vocabulary, and the vocabulary back from them. No
TensorFlow, no protobuf module (the files are read and written by hand: sentencepiece's generated protobuf module
refuses a protobuf runtime older than the one it was generated with).

Out (`albert-tf convert --to hf`, albert_tf.checkpoints.to_hf):

    spiece.model             the SentencePiece model as it is: transformers 4's SentencePiece AlbertTokenizer
    tokenizer.json           the `tokenizers` file: ALBERT's normalization (albert_tf.text.normalize) as its normalizer
                             steps, SentencePiece's pieces and scores as a Unigram model
    tokenizer_config.json    tokenizer_class PreTrainedTokenizerFast: AutoTokenizer loads tokenizer.json as it is
                             in transformers 4 and 5 (transformers 5's AlbertTokenizer class builds a normalizer of
                             its own instead, from do_lower_case / keep_accents); model_input_names with
                             token_type_ids (transformers 5's default leaves them out, and a pair's second segment
                             would read as the first)
    special_tokens_map.json  the special pieces

What no transformers tokenizer can do as albert_tf does (`unexpressed_rules` says it in one line at export time;
docs/fine-tuning.md gives how often on real text):
  * the digit-comma rule (albert_tf.text.sentencepiece): a piece such as "3," that SentencePiece picks is replaced by
    the pieces of "3" and ","; tokenizers' Unigram model gives one id per piece it picks, so tokenizer.json lowers
    such pieces' scores by 100 (transformers' own converter does the same), which picks the best segmentation
    without them, and makes such a piece a word of its own at a word's start where SentencePiece must pick it
    (`digit_comma_starts`). Inside a word ("635," as "63" + "5,") SentencePiece's pick depends on the best
    segmentation of the whole word, which no normalizer or pre-tokenizer computes: often, not always, the same ids;
  * SentencePiece (the AlbertTokenizer of transformers 4) meets ties between orders of pieces that are powers of one
    string ("=" + "====" and "====" + "=") and breaks them by float32 rounding; albert_tf puts each such run in
    ascending order (`canonical_order`), as tokenizers' exact sums do;
  * the AlbertTokenizer of transformers 4 keeps words longer than MAX_WORD_CHARS characters whole, and its
    tokenize() lowercases character by character before ALBERT's preprocessing (a word-final Σ gives σ, not ς);
  * the AlbertTokenizer class of transformers 5 rebuilds its normalizer: every nonspacing mark dropped (Devanagari's
    vowel signs too), lowercasing character by character (Greek final sigma), Hangul left decomposed.

In (`albert-tf convert --from hf` of a directory transformers 5 saved, which has no spiece.model): `spm_from_hf`
builds the SentencePiece model from tokenizer.json's Unigram pieces, scores (the digit-comma pieces' 100 given
back), special pieces and the precompiled normalization map; any other model type is refused in one line.
"""
import base64
import json
import os
import struct

from albert_tf.files import atomic_output, isfile, read_text
from albert_tf.text.normalize import MAX_WORD_CHARS, unicode_classes
from albert_tf.text.record import read_model_bytes
from albert_tf.text.sentencepiece import SPIECE_UNDERLINE, AlbertTokenizer

HF_SPM_FILE = "spiece.model"
HF_TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
HF_TOKENIZER_FILE = "tokenizer.json"
HF_SPECIAL_TOKENS_FILE = "special_tokens_map.json"
TOKENIZER_FILES = (HF_SPM_FILE, HF_TOKENIZER_CONFIG_FILE, HF_TOKENIZER_FILE, HF_SPECIAL_TOKENS_FILE)
SPECIAL_PIECES = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4 (albert_tf.text.sentencepiece)
SPECIAL = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
           "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}
# SentencePiece's normalization rules that are NFKC (and more): its default nmt_nfkc, Google's ALBERT vocabularies'
NFKC_RULES = ("nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")
DIGIT_COMMA_PENALTY = 100.0  # subtracted from a digit-comma piece's score in tokenizer.json (transformers' value)
# Python's str.lower() (Unicode's Final_Sigma): Σ after a cased letter, not followed by one (case-ignorable
# characters such as "'" and "." skipped on both sides) lowercases to ς. \K starts the match at Σ.
FINAL_SIGMA = r"\p{Cased}\p{Case_Ignorable}*\K\x{3a3}(?!\p{Case_Ignorable}*\p{Cased})"


def is_digit_comma(piece):
    """Whether the digit-comma rule applies to `piece`: longer than one character, a comma after a digit."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def added_token(piece):
    """transformers' AddedToken fields of a special piece ([MASK] strips the space before it, as theirs)."""
    return {"content": piece, "single_word": False, "lstrip": piece == "[MASK]", "rstrip": False,
            "normalized": False, "special": True}


def tokenizer_config(lower_case, keep_accents, max_length):
    """tokenizer_config.json: AutoTokenizer builds tokenizer.json's tokenizer; transformers 4's AlbertTokenizer
    (SentencePiece) reads ALBERT's preprocessing from do_lower_case, remove_space and keep_accents."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "do_lower_case": bool(lower_case), "remove_space": True,
            "keep_accents": bool(keep_accents), "model_max_length": int(max_length),
            "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
            "clean_up_tokenization_spaces": False,
            "added_tokens_decoder": {str(i): added_token(p) for i, p in enumerate(SPECIAL_PIECES)}, **SPECIAL}


def special_tokens_map():
    """special_tokens_map.json."""
    return {**SPECIAL, "mask_token": {k: v for k, v in added_token("[MASK]").items() if k != "special"}}


def _replace(pattern, content, regex=True):
    return {"type": "Replace", "pattern": {"Regex" if regex else "String": pattern}, "content": content}


def normalizer_steps(charsmap, composes, lower_case, keep_accents):
    """tokenizer.json's normalizer steps: albert_tf.text.normalize, then SentencePiece's own normalizer.

    Whitespace as str.split sees it; each word cut to its first MAX_WORD_CHARS characters; `` and '' to "; NFKD with
    the marks unicodedata.combining names dropped (tokenizers' StripAccents drops every nonspacing mark), or NFKC
    with keep_accents; lowercasing with Python's final sigma (tokenizers' Lowercase maps Σ to σ everywhere); then
    SentencePiece's normalizer: NFKC first when its rules are NFKC's (`composes`: tokenizers' Precompiled composes
    only within graphemes shorter than 6 bytes, so decomposed Hangul would stay jamo), the model's own character map
    (`charsmap`, bytes, or None), its whitespace: runs of spaces to one, none at either end (an NFKD may leave one,
    as "´" -> " ́" does)."""
    whitespace, combining = unicode_classes()
    steps = [_replace(whitespace + "+", " "), {"type": "Strip", "strip_left": True, "strip_right": True},
             _replace(f"(?<=[^ ]{{{MAX_WORD_CHARS}}})[^ ]+", ""),
             _replace("``", '"', regex=False), _replace("''", '"', regex=False)]
    if keep_accents:
        steps.append({"type": "NFKC"})
    else:
        steps += [{"type": "NFKD"}, _replace(combining, "")]
    if lower_case:
        steps += [_replace(FINAL_SIGMA, "\u03c2"), {"type": "Lowercase"}]
    if composes:
        steps.append({"type": "NFKC"})
    if charsmap:
        steps.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    return steps + [_replace(" {2,}", " "), {"type": "Strip", "strip_left": True, "strip_right": True}]


def tokenizer_json(spm_model, lower_case, keep_accents):
    """tokenizer.json (the `tokenizers` library's file, what AutoTokenizer and transformers 4's AlbertTokenizerFast
    load): `normalizer_steps`, a Metaspace pre-tokenizer (then a Split of `digit_comma_starts`), [CLS] a [SEP]
    (b [SEP]) and a Unigram model of the SentencePiece model's pieces and scores, the digit-comma pieces' lowered by
    DIGIT_COMMA_PENALTY."""
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    sp = tokenizer._sp  # pylint: disable=protected-access  (scores: SentencePiece's own)
    vocab = []
    for i in range(tokenizer.vocab_size):
        piece, score = sp.id_to_piece(i), float(sp.get_score(i))
        vocab.append([piece, score - DIGIT_COMMA_PENALTY if is_digit_comma(piece) else score])
    spec = proto_field(tokenizer.model_proto, 3)  # normalizer_spec: its name, its precompiled_charsmap
    composes = proto_field(spec, 1).decode("utf-8", "replace") in NFKC_RULES
    charsmap = proto_field(spec, 2)
    metaspace = {"type": "Metaspace", "replacement": SPIECE_UNDERLINE, "prepend_scheme": "always", "split": True}
    starts = digit_comma_starts(sp, [p for p, _ in vocab])
    pre_tokenizer = metaspace
    if starts:  # "▁" + "3," -> "▁", "3," (then "3", ",": the piece's score is lowered)
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [
            metaspace, {"type": "Split", "pattern": {"Regex": starts}, "behavior": "Isolated", "invert": False}]}
    cls, sep = {"id": "[CLS]", "type_id": 0}, {"id": "[SEP]", "type_id": 0}

    def special(piece, type_id):
        return {"SpecialToken": {"id": piece, "type_id": type_id}}

    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, **added_token(p)} for i, p in enumerate(SPECIAL_PIECES)],
        "normalizer": {"type": "Sequence",
                       "normalizers": normalizer_steps(charsmap, composes, lower_case, keep_accents)},
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]", 0), {"Sequence": {"id": "A", "type_id": 0}}, special("[SEP]", 0)],
            "pair": [special("[CLS]", 0), {"Sequence": {"id": "A", "type_id": 0}}, special("[SEP]", 0),
                     {"Sequence": {"id": "B", "type_id": 1}}, special("[SEP]", 1)],
            "special_tokens": {"[CLS]": {**cls, "ids": [2], "tokens": ["[CLS]"]},
                               "[SEP]": {**sep, "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": 1, "vocab": vocab, "byte_fallback": False},
    }


def digit_comma_starts(sp, pieces):
    """The Split pattern (Oniguruma, on Metaspace's words) that makes a digit-comma piece at a word's start a word of
    its own, only where SentencePiece `sp` must pick it: it picks it for the word of the piece's text alone ("▁3,"
    as "▁" + "3,", not "▁3" + ","), and no piece of `pieces` runs on from the comma into the next character (so
    every segmentation ends a piece at the comma, and the word's start is segmented as that word alone). Elsewhere
    the best segmentation without such pieces stands. None when no piece qualifies.

    Splitting every such piece off a word's start splits "0," off "▁0," where SentencePiece may pick "▁0" + ","
    (docs/fine-tuning.md gives how often)."""
    after_comma = sorted({p[i + 1] for p in pieces for i in range(len(p) - 1) if p[i] == ","})
    unless = f"(?!{'|'.join(map(_escape, after_comma))})" if after_comma else ""
    found = []
    for piece in sorted((p for p in pieces if is_digit_comma(p)), key=lambda p: (-len(p), p)):
        alone = sp.encode(piece.lstrip(SPIECE_UNDERLINE), out_type=str)
        if piece.startswith(SPIECE_UNDERLINE) and alone[:1] == [piece]:
            found.append(_escape(piece) + unless)
        elif not piece.startswith(SPIECE_UNDERLINE) and alone[:2] == [SPIECE_UNDERLINE, piece]:
            found.append(f"(?<={SPIECE_UNDERLINE}){_escape(piece)}{unless}")
    return "|".join(found) or None


def _escape(text):
    """`text` as an Oniguruma pattern matching it literally."""
    return "".join("\\" + c if c in "\\^$.|?*+()[]{}" else c for c in text)


def unexpressed_rules(spm_model):
    """The one line `convert --to hf` prints about what transformers' tokenizers cannot do as albert_tf does for
    this vocabulary: its digit-comma pieces and its pieces that can tie (powers of one string), with their counts."""
    tokenizer = AlbertTokenizer(spm_model)
    digit_comma = sorted(tokenizer.digit_comma_ids)
    tying = sorted((i for i, root in enumerate(tokenizer.run_root) if root >= 0),
                   key=lambda i: (tokenizer.run_power[i] < 2, i))  # examples: "==" before "="

    def pieces(ids, what):
        examples = ", ".join(repr(tokenizer.id_to_piece(i)) for i in ids[:2])
        return f"the {len(ids)} {what} such as {examples}"

    parts = []
    if digit_comma:
        parts.append("AutoTokenizer (tokenizer.json) does not always split "
                     f"{pieces(digit_comma, 'digit-comma pieces')} as ALBERT does")
    slow = [f"breaks ties among {pieces(tying, 'pieces that repeat one string')} by float rounding"] if tying else []
    slow += [f"keeps words past {MAX_WORD_CHARS} characters whole", "lowercases a word-final Σ to σ"]
    parts.append(f"transformers 4's SentencePiece AlbertTokenizer {', '.join(slow[:-1])} and {slow[-1]}")
    parts.append("transformers 5's AlbertTokenizer class builds a normalizer of its own (load with AutoTokenizer)")
    return (f"transformers' tokenizers cannot follow every rule of albert_tf's: {'; '.join(parts)}; how often on real "
            "text: docs/fine-tuning.md")


def tokenizer_files(spm_model, lower_case, keep_accents, max_length):
    """{file name: bytes} of TOKENIZER_FILES (what `write_tokenizer_files` writes; needs no TensorFlow)."""
    return {HF_SPM_FILE: read_model_bytes(spm_model),
            HF_TOKENIZER_CONFIG_FILE: json_bytes(tokenizer_config(lower_case, keep_accents, max_length)),
            HF_TOKENIZER_FILE: json_bytes(tokenizer_json(spm_model, lower_case, keep_accents)),
            HF_SPECIAL_TOKENS_FILE: json_bytes(special_tokens_map())}


def write_tokenizer_files(directory, spm_model, lower_case, keep_accents, max_length):
    """Writes TOKENIZER_FILES into `directory` (local or gs://), each atomically. Returns their names."""
    for name, data in tokenizer_files(spm_model, lower_case, keep_accents, max_length).items():
        with atomic_output(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return list(TOKENIZER_FILES)


def json_bytes(values):
    """`values` as indented JSON with sorted keys, UTF-8 bytes."""
    return (json.dumps(values, indent=2, sort_keys=True) + "\n").encode("utf-8")


def write_json(path, values):
    """Writes `values` (`json_bytes`) to `path`, atomically."""
    with atomic_output(path, "wb") as f:
        f.write(json_bytes(values))


# ---------------------------------------------------------------------------------------------------- protobuf
def _varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def proto_field(data, number):
    """The bytes of the first length-delimited field `number` of a serialized protobuf message (b"" if none)."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if key >> 3 == number:
                return data[pos:pos + length]
            pos += length
        else:
            pos += {1: 8, 5: 4}[wire]
    return b""


def _encode_varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def _field(number, value):
    """One serialized protobuf field: bytes/str length-delimited, float fixed32, int varint (two's complement for
    negative ints, as protobuf's int32)."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, bytes):
        return _encode_varint(number << 3 | 2) + _encode_varint(len(value)) + value
    if isinstance(value, float):
        return _encode_varint(number << 3 | 5) + struct.pack("<f", value)
    return _encode_varint(number << 3) + _encode_varint(value & 0xFFFFFFFFFFFFFFFF)


# ---------------------------------------------------------------------------------------------------- back in
# sentencepiece_model.proto: ModelProto.pieces 1, trainer_spec 2, normalizer_spec 3; SentencePiece.piece 1, score 2,
# type 3 (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4); TrainerSpec.model_type 3 (UNIGRAM 1), vocab_size 4,
# unk_id 40, bos_id 41, eos_id 42, pad_id 43; NormalizerSpec.name 1, precompiled_charsmap 2, add_dummy_prefix 3,
# remove_extra_whitespaces 4, escape_whitespaces 5.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4


def spm_from_hf(directory):
    """The SentencePiece model (serialized ModelProto bytes) that the Unigram model of DIRECTORY/tokenizer.json was
    made from: its pieces and scores (a digit-comma piece scored below -DIGIT_COMMA_PENALTY gets the penalty back),
    the unknown piece, the special added tokens as control pieces, other added tokens as user-defined ones, and the
    precompiled character map of its normalizer (none: SentencePiece's identity).

    Raises:
      ValueError (one line naming --spm-model): no tokenizer.json, or a model that is not Unigram (WordPiece, BPE:
        no SentencePiece model holds it), or one without ALBERT's special pieces.
    """
    path = os.path.join(directory, HF_TOKENIZER_FILE)
    if not isfile(path):
        raise ValueError(f"{directory}: no {HF_SPM_FILE} and no {HF_TOKENIZER_FILE} to build the vocabulary from; "
                         "give the SentencePiece model with --spm-model")
    try:
        values = json.loads(read_text(path))
        model = values["model"]
        kind = model.get("type")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a tokenizers file ({e}); give the SentencePiece model with "
                         "--spm-model") from None
    if kind != "Unigram" or not isinstance(model.get("vocab"), list):
        raise ValueError(f"{path}: model type {kind!r}, expected 'Unigram' (a SentencePiece vocabulary); give the "
                         "SentencePiece model with --spm-model")
    vocab = [(str(piece), float(score)) for piece, score in model["vocab"]]
    pieces = [p for p, _ in vocab]
    if pieces[:len(SPECIAL_PIECES)] != list(SPECIAL_PIECES) or model.get("unk_id") != 1:
        raise ValueError(f"{path}: pieces 0-4 are {pieces[:len(SPECIAL_PIECES)]} (unk_id {model.get('unk_id')}), "
                         f"expected ALBERT's {list(SPECIAL_PIECES)} (unk_id 1); give the SentencePiece model with "
                         "--spm-model")
    added = {t.get("content"): bool(t.get("special")) for t in values.get("added_tokens") or ()}
    body = b""
    for i, (piece, score) in enumerate(vocab):
        kind = (_UNKNOWN if i == 1 else _CONTROL if added.get(piece) or i in (0, 2, 3, 4) else
                _USER_DEFINED if piece in added else _NORMAL)
        if is_digit_comma(piece) and score < -DIGIT_COMMA_PENALTY:
            score += DIGIT_COMMA_PENALTY
        body += _field(1, _field(1, piece) + _field(2, score) + _field(3, kind))
    trainer = _field(3, 1) + _field(4, len(vocab)) + _field(40, 1) + _field(41, -1) + _field(42, -1) + _field(43, 0)
    normalizer = _field(1, "nmt_nfkc" if _charsmap(values) else "identity")
    if _charsmap(values):
        normalizer += _field(2, _charsmap(values))
    normalizer += _field(3, 1) + _field(4, 1) + _field(5, 1)
    return body + _field(2, trainer) + _field(3, normalizer)


def _charsmap(values):
    """The precompiled character map of a tokenizers file's normalizer (bytes), or b""."""
    normalizer = values.get("normalizer") or {}
    steps = normalizer.get("normalizers", [normalizer]) if normalizer.get("type") == "Sequence" else [normalizer]
    for step in steps:
        if step.get("type") == "Precompiled" and step.get("precompiled_charsmap"):
            return base64.b64decode(step["precompiled_charsmap"])
    return b""


__all__ = ["TOKENIZER_FILES", "tokenizer_json", "tokenizer_config", "special_tokens_map", "write_tokenizer_files",
           "unexpressed_rules", "spm_from_hf", "write_json", "tokenizer_files", "json_bytes", "proto_field",
           "is_digit_comma", "digit_comma_starts"]
