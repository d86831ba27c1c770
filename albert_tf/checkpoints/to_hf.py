"""Export to Hugging Face transformers: an albert_tf model (a pretrained-model directory or an export, read by
albert_tf.checkpoints.load.load_model) written as a Hugging Face ALBERT directory that
`transformers.AlbertModel.from_pretrained` / `AlbertForPreTraining.from_pretrained` / `AutoTokenizer` read:

    config.json              model_type "albert", the albert_config.json keys, hidden_act mapped back (ours "gelu",
                             the tanh approximation, is their "gelu_new"; ours "gelu_exact" their "gelu")
    model.safetensors        float32 tensors under Hugging Face's names (albert_tf.checkpoints.tensors.hf_name_map);
                             AlbertForPreTraining's when the source holds the MLM and SOP heads, else AlbertModel's
                             (no `albert.` prefix), as their save_pretrained writes them (tied decoder left out)
    spiece.model, tokenizer.json, tokenizer_config.json, special_tokens_map.json
                             the tokenizer, when the source has a vocabulary (albert_tf.checkpoints.hf_tokenizer):
                             do_lower_case / keep_accents from the vocabulary's record

No torch is needed to write it (the safetensors numpy API). What Hugging Face's AlbertModel cannot hold is refused
in one line (`check_hf`) before anything is written.
"""
import os

import numpy as np
import tensorflow as tf
from safetensors.numpy import save as save_safetensors

from albert_tf.checkpoints.hf_tokenizer import write_json, write_tokenizer_files
from albert_tf.checkpoints.tensors import hf_name_map
from albert_tf.files import atomic_directory, atomic_output, check_output_dir

HF_CONFIG_FILE = "config.json"
HF_WEIGHTS_FILE = "model.safetensors"
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
    `output`, atomically, with the SentencePiece model `spm_model` (if any) and its tokenizer config. Returns (the
    file names written, the parameters written, those of the encoder: the tensors under `albert.` of an
    AlbertForPreTraining, all of an AlbertModel), the counts transformers' `num_parameters()` gives."""
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
            written += write_tokenizer_files(tmp, spm_model, lower_case, keep_accents,
                                             model.config.max_position_embeddings)
        write_json(os.path.join(tmp, HF_CONFIG_FILE), hf_config(model.config, architecture))
    prefix = "albert." if architecture == "AlbertForPreTraining" else ""
    return (written, sum(t.size for t in tensors.values()),
            sum(t.size for name, t in tensors.items() if name.startswith(prefix)))
