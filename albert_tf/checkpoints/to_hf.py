"""Export to Hugging Face transformers: an albert_tf model (a pretrained-model directory or an export, read by
albert_tf.checkpoints.load.load_model) written as a Hugging Face ALBERT directory that
`transformers.AlbertModel.from_pretrained` / `AlbertForPreTraining.from_pretrained` / `AutoTokenizer` read:

    config.json              model_type "albert", the albert_config.json keys, hidden_act mapped back (ours "gelu",
                             the tanh approximation, is their "gelu_new"; ours "gelu_exact" their "gelu")
    model.safetensors        float32 tensors under Hugging Face's names (albert_tf.checkpoints.tensors.hf_name_map);
                             AlbertForPreTraining's when the source holds the MLM and SOP heads, else AlbertModel's
                             (no `albert.` prefix), as their save_pretrained writes them (tied decoder left out)
    spiece.model             the SentencePiece model, when the source has one, with
    tokenizer_config.json    AlbertTokenizer's settings: do_lower_case / keep_accents from the vocabulary's record
    tokenizer.json           the fast tokenizer, as transformers' converter makes it (written here without
                             protobuf: that converter needs sentencepiece's protobuf module, which a protobuf older
                             than the one it was generated for refuses to import)
    special_tokens_map.json  the special pieces

No torch is needed to write it (the safetensors numpy API). What Hugging Face's AlbertModel cannot hold is refused
in one line (`check_hf`) before anything is written.
"""
import base64
import json
import os

import numpy as np
import tensorflow as tf
from safetensors.numpy import save as save_safetensors

from albert_tf.checkpoints.tensors import hf_name_map
from albert_tf.files import atomic_copy, atomic_directory, atomic_output, check_output_dir
from albert_tf.text.in_graph import unicode_classes
from albert_tf.text.sentencepiece import AlbertTokenizer

HF_CONFIG_FILE = "config.json"
HF_WEIGHTS_FILE = "model.safetensors"
HF_SPM_FILE = "spiece.model"
HF_TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
HF_TOKENIZER_FILE = "tokenizer.json"
HF_SPECIAL_TOKENS_FILE = "special_tokens_map.json"
# ours → Hugging Face's ACT2FN names (the inverse of tensors.config_from_hf's map)
HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
                  "linear": "linear", "swish": "swish", "silu": "silu"}


def check_hf(config):
    """Refuses (ValueError, one line) a config that Hugging Face's AlbertModel cannot run as albert_tf does:
    per-layer parameters (`sharing` other than "all": its layers exist only per group), and more inner blocks per
    group than the group has layers (its AlbertTransformer indexes the head mask, length num_hidden_layers /
    num_hidden_groups, by inner block: an IndexError at the first call)."""
    if config.sharing != "all":
        raise ValueError(f"Hugging Face ALBERT cannot hold sharing={config.sharing!r}: its layers share every "
                         "parameter within a group (sharing 'all' only)")
    per_group = config.num_hidden_layers // config.num_hidden_groups
    if config.inner_group_num > per_group:
        raise ValueError(f"Hugging Face ALBERT cannot run inner_group_num={config.inner_group_num} with "
                         f"{per_group} layer(s) per group (num_hidden_layers={config.num_hidden_layers}, "
                         f"num_hidden_groups={config.num_hidden_groups}): its forward pass fails")


def hf_config(config, architecture):
    """The Hugging Face config.json dict of an AlbertConfig."""
    values = {key: value for key, value in config.to_dict().items() if key != "sharing"}
    values.update(hidden_act=HF_ACTIVATIONS[config.hidden_act], model_type="albert", architectures=[architecture],
                  layer_norm_eps=1e-12, position_embedding_type="absolute", pad_token_id=0, bos_token_id=2,
                  eos_token_id=3, torch_dtype="float32")
    for key in ("down_scale_factor", "net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep"):
        values.pop(key, None)
    return values


_SPECIAL = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
            "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}


def _added_token(piece):
    """transformers' AddedToken fields of a special piece ([MASK] strips the space before it, as theirs)."""
    return {"content": piece, "single_word": False, "lstrip": piece == "[MASK]", "rstrip": False,
            "normalized": False, "special": True}


def hf_tokenizer_config(lower_case, keep_accents, max_length):
    """tokenizer_config.json for transformers' AlbertTokenizer and AlbertTokenizerFast: ALBERT's preprocessing
    (whitespace collapsed, NFKD and accents stripped unless `keep_accents`, lowercased when `lower_case`)."""
    return {"tokenizer_class": "AlbertTokenizer", "do_lower_case": bool(lower_case), "remove_space": True,
            "keep_accents": bool(keep_accents), "model_max_length": int(max_length),
            "clean_up_tokenization_spaces": False,
            "added_tokens_decoder": {str(i): _added_token(p) for i, p in enumerate(_SPECIAL_PIECES)}, **_SPECIAL}


_SPECIAL_PIECES = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4 (albert_tf.text.sentencepiece)


def _proto_field(data, number):
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


def _varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def hf_tokenizer_json(spm_model, lower_case, keep_accents):
    """tokenizer.json (the `tokenizers` library's file, what AlbertTokenizerFast and AutoTokenizer load): what
    transformers' AlbertConverter makes of the SentencePiece model, written without protobuf, with albert_tf's
    normalization made exact: whitespace as str.split sees it, and the marks unicodedata.combining names (their
    converter's StripAccents removes every nonspacing mark, Devanagari's vowel signs among them). The Unigram
    scores are SentencePiece's, less 100 for pieces ending in a digit and a comma (their form of the digit-comma
    rule); the model's own precompiled character map follows the lowercasing, as in their converter."""
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    sp = tokenizer._sp  # pylint: disable=protected-access  (scores: SentencePiece's own)
    vocab = []
    for i in range(tokenizer.vocab_size):
        piece, score = sp.id_to_piece(i), float(sp.get_score(i))
        digit_comma = len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()
        vocab.append([piece, score - 100 if digit_comma else score])
    whitespace, combining = unicode_classes()
    normalizers = [{"type": "Replace", "pattern": {"Regex": whitespace + "+"}, "content": " "},
                   {"type": "Strip", "strip_left": True, "strip_right": True},
                   {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
                   {"type": "Replace", "pattern": {"String": "''"}, "content": '"'}]
    if not keep_accents:  # ALBERT drops what unicodedata.combining marks (their StripAccents drops every Mn)
        normalizers += [{"type": "NFKD"}, {"type": "Replace", "pattern": {"Regex": combining}, "content": ""}]
    if lower_case:
        normalizers.append({"type": "Lowercase"})
    charsmap = _proto_field(_proto_field(tokenizer.model_proto, 3), 2)  # normalizer_spec.precompiled_charsmap
    if charsmap:
        normalizers.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    normalizers.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    cls, sep = {"id": "[CLS]", "type_id": 0}, {"id": "[SEP]", "type_id": 0}

    def special(piece, type_id):
        return {"SpecialToken": {"id": piece, "type_id": type_id}}

    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, **_added_token(p)} for i, p in enumerate(_SPECIAL_PIECES)],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": metaspace,
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


def hf_tensors(model):
    """{Hugging Face name: float32 numpy array} of an AlbertPretrainer (AlbertForPreTraining's names) or an
    AlbertEncoder (AlbertModel's). Every variable of the model is written exactly once (ValueError otherwise); a
    model without the E→H projection (embedding_size == hidden_size) gets an identity one, which computes the same.
    """
    check_hf(model.config)
    with_heads = hasattr(model, "mlm_head")
    rows = hf_name_map(model)
    tensors = {}
    for name, variable, transform in rows:
        if not with_heads:
            name = name[len("albert."):]
        # the map's transforms are their own inverses (identity or a 2-D transpose)
        tensors[name] = np.ascontiguousarray(transform(np.asarray(variable.numpy(), np.float32)))
    mapped = {id(variable) for _, variable, _ in rows}
    unmapped = [v.path for v in model.weights if id(v) not in mapped]
    if unmapped or len(mapped) != len(rows):
        raise ValueError(f"Hugging Face name map: variables without a name {unmapped}, or one mapped twice")
    encoder = getattr(model, "encoder", model)
    if encoder.embeddings.projection is None:
        prefix = "albert." if with_heads else ""
        size = model.config.hidden_size
        tensors[f"{prefix}encoder.embedding_hidden_mapping_in.weight"] = np.eye(size, dtype=np.float32)
        tensors[f"{prefix}encoder.embedding_hidden_mapping_in.bias"] = np.zeros([size], np.float32)
    return tensors


def write_hf(model, output, spm_model=None, lower_case=True, keep_accents=False):
    """Writes `model` (an AlbertPretrainer or AlbertEncoder, float32 weights) as a new Hugging Face ALBERT directory
    `output`, atomically, with the SentencePiece model `spm_model` (if any) and its tokenizer config. Returns the
    list of file names written."""
    check_hf(model.config)
    check_output_dir(output, "--output")
    tensors = hf_tensors(model)
    architecture = "AlbertForPreTraining" if hasattr(model, "mlm_head") else "AlbertModel"
    written = [HF_WEIGHTS_FILE, HF_CONFIG_FILE]
    with atomic_directory(output, markers=(HF_WEIGHTS_FILE, HF_CONFIG_FILE)) as tmp:
        tf.io.gfile.makedirs(tmp)
        with atomic_output(os.path.join(tmp, HF_WEIGHTS_FILE)) as f:
            f.write(save_safetensors(tensors, metadata={"format": "pt"}))
        if spm_model:
            atomic_copy(spm_model, os.path.join(tmp, HF_SPM_FILE))
            _write_json(os.path.join(tmp, HF_TOKENIZER_CONFIG_FILE),
                        hf_tokenizer_config(lower_case, keep_accents, model.config.max_position_embeddings))
            _write_json(os.path.join(tmp, HF_TOKENIZER_FILE), hf_tokenizer_json(spm_model, lower_case, keep_accents))
            _write_json(os.path.join(tmp, HF_SPECIAL_TOKENS_FILE),
                        {**_SPECIAL, "mask_token": {k: v for k, v in _added_token("[MASK]").items() if k != "special"}})
            written += [HF_SPM_FILE, HF_TOKENIZER_CONFIG_FILE, HF_TOKENIZER_FILE, HF_SPECIAL_TOKENS_FILE]
        _write_json(os.path.join(tmp, HF_CONFIG_FILE), hf_config(model.config, architecture))
    return written


def _write_json(path, values):
    with atomic_output(path, "w") as f:
        f.write(json.dumps(values, indent=2, sort_keys=True) + "\n")
