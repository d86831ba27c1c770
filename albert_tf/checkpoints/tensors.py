"""Checkpoint tensors by name: the maps from Google's TF1 names and Hugging Face's names to an albert_tf model's
variables, the readers of both files, and the assignment that wants every weight found and every tensor used.

Nothing here builds a model: the maps take the model they fill (an AlbertPretrainer, or an AlbertEncoder for its
rows only), so `from_pretrained` (albert_tf.modeling, through albert_tf.checkpoints.handles) reads a released
checkpoint or a Hugging Face directory straight into the model it builds, and `albert-tf convert`
(albert_tf.checkpoints.convert) writes the same model as a pretrained-model directory.

Every model weight must receive a tensor of the right shape, and every checkpoint tensor must find a home, except
optimizer slots (`adam_m`, `adam_v`) and `global_step`. A checkpoint with no pretraining-head tensors at all (an
encoder-only export such as Hugging Face `AlbertModel`) is accepted by `convert` (heads_optional): the heads keep
their initialization and a warning says so. Anything else that does not fit is an error naming each tensor.
"""
import json
import os
import re

import numpy as np
import tensorflow as tf
from safetensors.numpy import load as load_safetensors

from albert_tf.config import AlbertConfig
from albert_tf.text import vocabulary

_SKIPPED_TF1 = re.compile(r"(/adam_[mv]$|^global_step$|/Momentum$|/lamb_[mv]$)")


# ---------------------------------------------------------------------------------------------------- name maps
def _transpose(x):
    return np.ascontiguousarray(np.transpose(x))


def _identity(x):
    return x


def _dense(prefix, layer, transpose=False):
    """(name, variable, transform) rows for a Dense layer. TF1 kernels are [in, out] like Keras; torch's Linear
    weights are [out, in], hence `transpose`."""
    kernel_name, bias_name = (f"{prefix}.weight", f"{prefix}.bias") if transpose else (
        f"{prefix}/kernel", f"{prefix}/bias")
    return [(kernel_name, layer.kernel, _transpose if transpose else _identity), (bias_name, layer.bias, _identity)]


def _layer_norm(prefix, layer, hf=False):
    if hf:
        return [(f"{prefix}.weight", layer.gamma, _identity), (f"{prefix}.bias", layer.beta, _identity)]
    return [(f"{prefix}/gamma", layer.gamma, _identity), (f"{prefix}/beta", layer.beta, _identity)]


def _tf1_block_prefix(key):
    kind, a, j = key
    group = f"group_{a}" if kind == "group" else f"layer_{a}"  # "layer_i" only for the non-original sharing modes
    return f"bert/encoder/transformer/{group}/inner_group_{j}"


def _embedding_rows(emb, hf):
    """The factorized embedding's rows, under TF1 names (bert/embeddings/...) or Hugging Face's (albert.embeddings.)."""
    tables = ("word_embeddings", "position_embeddings", "token_type_embeddings")
    if hf:
        rows = [(f"albert.embeddings.{t}.weight", getattr(emb, t), _identity) for t in tables]
    else:
        rows = [(f"bert/embeddings/{t}", getattr(emb, t), _identity) for t in tables]
    rows += _layer_norm("albert.embeddings.LayerNorm" if hf else "bert/embeddings/LayerNorm", emb.layer_norm, hf=hf)
    if emb.projection is not None:
        rows += _dense("albert.encoder.embedding_hidden_mapping_in" if hf else
                       "bert/encoder/embedding_hidden_mapping_in", emb.projection, transpose=hf)
    return rows


def tf1_name_map(pretrainer):
    """[(original TF1 variable name, Keras variable, numpy transform checkpoint→Keras)] for an AlbertPretrainer;
    given an AlbertEncoder (no heads), the encoder's rows only.

    With sharing "all" the names are exactly google-research/albert's. The other sharing modes, which the original
    code does not have, use `layer_{i}` in place of `group_{g}` for their per-layer halves.
    Rows under `cls/` are the pretraining heads.
    """
    enc = getattr(pretrainer, "encoder", pretrainer)
    rows = _embedding_rows(enc.embeddings, hf=False)
    for key, att in enc.attention_layers.items():
        p = _tf1_block_prefix(key)
        rows += _dense(f"{p}/attention_1/self/query", att.query)
        rows += _dense(f"{p}/attention_1/self/key", att.key)
        rows += _dense(f"{p}/attention_1/self/value", att.value)
        rows += _dense(f"{p}/attention_1/output/dense", att.output_dense)
        rows += _layer_norm(f"{p}/LayerNorm", att.layer_norm)
    for key, ffn in enc.ffn_layers.items():
        p = _tf1_block_prefix(key)
        rows += _dense(f"{p}/ffn_1/intermediate/dense", ffn.intermediate)
        rows += _dense(f"{p}/ffn_1/intermediate/output/dense", ffn.output_dense)
        rows += _layer_norm(f"{p}/LayerNorm_1", ffn.layer_norm)
    rows += _dense("bert/pooler/dense", enc.pooler)
    if not has_heads(pretrainer):
        return rows
    mlm, sop = pretrainer.mlm_head, pretrainer.sop_head
    rows += _dense("cls/predictions/transform/dense", mlm.transform)
    rows += _layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm)
    rows += [
        ("cls/predictions/output_bias", mlm.output_bias, _identity),
        ("cls/seq_relationship/output_weights", sop.dense.kernel, _transpose),  # stored [2, H]
        ("cls/seq_relationship/output_bias", sop.dense.bias, _identity),
    ]
    return rows


def hf_name_map(pretrainer):
    """[(Hugging Face AlbertForPreTraining tensor name, Keras variable, transform)]; names of the encoder carry the
    `albert.` prefix (an AlbertModel file has them without it, handled by the loader). Sharing "all" only. Given
    an AlbertEncoder (no heads), the encoder's rows only. Each transform is its own inverse (Keras ↔ torch)."""
    if pretrainer.config.sharing != "all":
        raise ValueError(f"Hugging Face ALBERT has only full cross-layer sharing; this model has "
                         f"sharing={pretrainer.config.sharing!r}")
    enc = getattr(pretrainer, "encoder", pretrainer)
    rows = _embedding_rows(enc.embeddings, hf=True)
    for (_, g, j), att in enc.attention_layers.items():
        p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}"
        ffn = enc.ffn_layers[("group", g, j)]
        rows += _dense(f"{p}.attention.query", att.query, transpose=True)
        rows += _dense(f"{p}.attention.key", att.key, transpose=True)
        rows += _dense(f"{p}.attention.value", att.value, transpose=True)
        rows += _dense(f"{p}.attention.dense", att.output_dense, transpose=True)
        rows += _layer_norm(f"{p}.attention.LayerNorm", att.layer_norm, hf=True)
        rows += _dense(f"{p}.ffn", ffn.intermediate, transpose=True)
        rows += _dense(f"{p}.ffn_output", ffn.output_dense, transpose=True)
        rows += _layer_norm(f"{p}.full_layer_layer_norm", ffn.layer_norm, hf=True)
    rows += _dense("albert.pooler", enc.pooler, transpose=True)
    if not has_heads(pretrainer):
        return rows
    mlm, sop = pretrainer.mlm_head, pretrainer.sop_head
    rows += _dense("predictions.dense", mlm.transform, transpose=True)
    rows += _layer_norm("predictions.LayerNorm", mlm.layer_norm, hf=True)
    rows += [("predictions.bias", mlm.output_bias, _identity)]
    rows += _dense("sop_classifier.classifier", sop.dense, transpose=True)
    return rows


# ---------------------------------------------------------------------------------------------------- assignment
def has_heads(model):
    """True for a model with the pretraining heads (an AlbertPretrainer), False for an encoder or a task model."""
    return hasattr(model, "mlm_head")


def is_head(name):
    """True for a pretraining-head tensor's name (TF1 `cls/...`, Hugging Face `predictions.` / `sop_classifier.`)."""
    return name.startswith(("cls/", "predictions.", "sop_classifier."))


def assign_from_tensors(model, tensors, rows, source, heads_optional=True):
    """Assigns `tensors` ({name: numpy array}) to `model` through `rows` (its name map). A model without heads (an
    encoder) leaves the checkpoint's head tensors unread.

    Raises ValueError listing every model weight without a tensor, every shape mismatch and every tensor without
    a home. heads_optional: a checkpoint with no head tensors at all fills the encoder and leaves the heads at
    their initialization, with a warning (else their absence is an error, in one line). Returns the warnings.
    """
    warnings = []
    if not has_heads(model):
        tensors = {name: value for name, value in tensors.items() if not is_head(name)}
    names = {name for name, _, _ in rows}
    missing = [name for name in names if name not in tensors]
    encoder_only = missing and all(is_head(n) for n in missing) and not any(is_head(n) for n in tensors)
    if encoder_only and not heads_optional:
        raise ValueError(f"{source}: an encoder-only checkpoint (no pretraining-head tensors); a model with the MLM "
                         "and sentence-order heads cannot be read from it (read its encoder instead)")
    if encoder_only:
        warnings.append(f"{source}: encoder-only checkpoint (no pretraining-head tensors); the MLM and "
                        "sentence-order heads keep their random initialization")
        missing = []
        rows = [r for r in rows if not is_head(r[0])]
    problems = [f"model weight '{n}' has no tensor in the checkpoint" for n in sorted(missing)]
    unused = sorted(set(tensors) - names)
    problems += [f"checkpoint tensor '{n}' {tuple(tensors[n].shape)} matches no model weight" for n in unused]
    values = []
    for name, variable, transform in rows:
        if name not in tensors:
            continue
        value = transform(np.asarray(tensors[name]))
        if tuple(value.shape) != tuple(variable.shape):
            problems.append(f"tensor '{name}' has shape {tuple(np.asarray(tensors[name]).shape)}, the model "
                            f"expects {tuple(variable.shape) if transform is _identity else tuple(variable.shape)[::-1]}")
            continue
        values.append((variable, value))
    if problems:
        raise ValueError(f"{source}: checkpoint does not fit the config:\n  " + "\n  ".join(problems))
    for variable, value in values:
        variable.assign(value.astype(variable.dtype))
    return warnings


def read_tf1_checkpoint(path):
    """{name: numpy array} of a TF1 checkpoint prefix (e.g. .../model.ckpt-best), without optimizer slots and
    global_step, and with a TF-Hub `module/` prefix removed."""
    try:
        reader = tf.train.load_checkpoint(path)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as e:
        raise FileNotFoundError(f"{path}: not a readable TF checkpoint ({str(e).splitlines()[0]})") from None
    names = reader.get_variable_to_shape_map()
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in names:
        raise ValueError(f"{path}: a TF2 object-based checkpoint (as albert-tf pretrain and convert write), not a "
                         "TF1 one; its directory is already a pretrained-model directory: load it with "
                         "from_pretrained or pass it to pretrain's or finetune's --init, no conversion needed")
    tensors = {}
    for name in names:
        if _SKIPPED_TF1.search(name):
            continue
        key = name[len("module/"):] if name.startswith("module/") else name
        tensors[key] = reader.get_tensor(name)
    return tensors


def load_tf1_checkpoint(model, path, heads_optional=True):
    """Assigns a google-research/albert (or TF-Hub) TF1 checkpoint to `model` (an AlbertPretrainer, or an
    AlbertEncoder: the encoder's tensors). Returns warnings."""
    return assign_from_tensors(model, read_tf1_checkpoint(path), tf1_name_map(model), path, heads_optional)


# ---------------------------------------------------------------------------------------------------- Hugging Face
_HF_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
            "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
            "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size", "initializer_range")


def config_from_hf(path):
    """AlbertConfig from a Hugging Face ALBERT config.json. Their "gelu_new" is the original's tanh GELU; their
    "gelu" is the exact one."""
    with tf.io.gfile.GFile(path, "r") as f:
        values = json.load(f)
    if values.get("model_type", "albert") != "albert":
        raise ValueError(f"{path}: field 'model_type' is {values['model_type']!r}, expected 'albert'")
    eps = values.get("layer_norm_eps", 1e-12)
    if abs(eps - 1e-12) > 1e-15:
        raise ValueError(f"{path}: field 'layer_norm_eps' is {eps}, ALBERT uses 1e-12")
    picked = {k: values[k] for k in _HF_KEYS if k in values}
    act = picked.get("hidden_act", "gelu_new")
    picked["hidden_act"] = {"gelu_new": "gelu", "gelu": "gelu_exact", "gelu_pytorch_tanh": "gelu"}.get(act, act)
    return AlbertConfig.from_dict(picked, source=path)


def read_hf_checkpoint(directory):
    """{name: numpy array} from DIR/model.safetensors (numpy API: no torch needed); names get the `albert.`
    prefix when the file is an AlbertModel's."""
    path = os.path.join(directory, "model.safetensors")
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path}: no model.safetensors (a Hugging Face ALBERT directory holds config.json "
                                "and model.safetensors)")
    with tf.io.gfile.GFile(path, "rb") as f:
        raw = load_safetensors(f.read())
    tensors = {}
    for name, value in raw.items():
        if name.endswith("position_ids") or name.startswith("predictions.decoder."):
            continue  # a buffer, and the decoder tied to the word embeddings / predictions.bias
        if not name.startswith(("albert.", "predictions.", "sop_classifier.")):
            name = "albert." + name
        tensors[name] = value
    return tensors


def load_hf_checkpoint(model, directory, heads_optional=True):
    """Assigns a Hugging Face AlbertModel / AlbertForPreTraining safetensors file to `model` (an AlbertPretrainer,
    or an AlbertEncoder: the encoder's tensors). With
    embedding_size == hidden_size (no projection here) an identity `embedding_hidden_mapping_in` (what
    `albert-tf convert --to hf` writes for such a model) is dropped; any other one is reported as unused."""
    tensors = read_hf_checkpoint(directory)
    if getattr(model, "encoder", model).embeddings.projection is None:
        weight = tensors.get("albert.encoder.embedding_hidden_mapping_in.weight")
        bias = tensors.get("albert.encoder.embedding_hidden_mapping_in.bias")
        if (weight is not None and bias is not None and weight.ndim == 2 and weight.shape[0] == weight.shape[1]
                and np.array_equal(weight, np.eye(len(weight), dtype=weight.dtype)) and not np.any(bias)):
            del tensors["albert.encoder.embedding_hidden_mapping_in.weight"]
            del tensors["albert.encoder.embedding_hidden_mapping_in.bias"]
    return assign_from_tensors(model, tensors, hf_name_map(model), os.path.join(directory, "model.safetensors"),
                               heads_optional)


# ---------------------------------------------------------------------------------------------------- vocabulary
def release_casing(source, checkpoint, cased_flag, spm_model):
    """The lowercasing to record with the converted vocabulary: the --cased/--uncased flag, else a Hugging Face
    tokenizer_config.json's do_lower_case, else the SentencePiece model's own record, else uncased (every
    google-research/albert release is uncased); None without a vocabulary. A flag contradicting a record: ValueError."""
    if spm_model is None:
        return None
    recorded, where = vocabulary.read_casing(spm_model), vocabulary.casing_path(spm_model)
    tokenizer_config = os.path.join(checkpoint, "tokenizer_config.json")
    if source == "hf" and recorded is None and tf.io.gfile.exists(tokenizer_config):
        with tf.io.gfile.GFile(tokenizer_config) as f:
            recorded, where = json.load(f).get("do_lower_case"), tokenizer_config
    return vocabulary.resolve_lower_case(recorded if isinstance(recorded, bool) else None, cased_flag, where)


def release_accents(source, checkpoint, spm_model):
    """Whether the converted vocabulary keeps accents: a Hugging Face tokenizer_config.json's keep_accents when the
    SentencePiece model has no record of its own, else None (the model's record, or the original's stripping)."""
    tokenizer_config = os.path.join(checkpoint, "tokenizer_config.json")
    if source != "hf" or spm_model is None or vocabulary.read_casing(spm_model) is not None:
        return None
    if not tf.io.gfile.exists(tokenizer_config):
        return None
    with tf.io.gfile.GFile(tokenizer_config) as f:
        keep = json.load(f).get("keep_accents")
    return keep if isinstance(keep, bool) else None
