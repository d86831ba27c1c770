"""Export to keras-hub: an albert_tf encoder written as a keras-hub preset directory, which
`keras_hub.models.AlbertBackbone.from_preset(DIR)` and `keras_hub.models.AlbertTokenizer.from_preset(DIR)` load
(and so `AlbertTextClassifier.from_preset(DIR, num_classes=...)`):

    config.json, metadata.json, model.weights.h5     the AlbertBackbone, written by keras-hub's own saver
    tokenizer.json, assets/tokenizer/vocabulary.spm  the AlbertTokenizer, likewise (when the source has spm.model)

Writing needs keras-hub (`pip install keras-hub`): the preset is built as keras-hub's AlbertBackbone with our
weights assigned by name (`keras_hub_name_map`) and saved by `save_to_preset`, so the files are exactly what
keras-hub writes and reads. The backbone holds no pretraining heads (keras-hub's AlbertMaskedLM has its own MLM
head, with LayerNorm epsilon 1e-5 instead of ALBERT's 1e-12, and no sentence-order head): only the encoder is
written. What AlbertBackbone cannot hold is refused in one line (`check_keras_hub`).
"""
import os

import numpy as np
import tensorflow as tf

from albert_tf.files import atomic_directory, check_output_dir
from albert_tf.runtime import leftovers

# keras-hub's file names (keras_hub/src/utils/preset_utils.py); `save_to_preset` writes them
KERAS_HUB_CONFIG_FILE = "config.json"
KERAS_HUB_WEIGHTS_FILE = "model.weights.h5"
KERAS_HUB_TOKENIZER_FILE = "tokenizer.json"
WORK = "keras_hub"  # the preset is saved in a work folder first: albert_tf_keras_hub_* (albert_tf.runtime.leftovers)


def _keras_hub():
    try:
        import keras_hub  # pylint: disable=import-outside-toplevel  (optional: only this export needs it)
    except ImportError:
        raise ValueError("--to keras-hub needs keras-hub: pip install 'keras-hub>=0.32,<0.33'") from None
    return keras_hub


def check_keras_hub(config):
    """Refuses (ValueError, one line) what keras-hub's AlbertBackbone cannot hold: per-layer parameters (`sharing`
    other than "all"), an activation other than the tanh GELU (its blocks hard-code it), and different hidden and
    attention dropout rates (it has one)."""
    if config.sharing != "all":
        raise ValueError(f"keras-hub's AlbertBackbone cannot hold sharing={config.sharing!r}: its layers share "
                         "every parameter within a group (sharing 'all' only)")
    if config.hidden_act not in ("gelu", "gelu_new"):
        raise ValueError(f"keras-hub's AlbertBackbone cannot hold hidden_act={config.hidden_act!r}: its blocks use "
                         "the tanh GELU ('gelu') only")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        raise ValueError(f"keras-hub's AlbertBackbone has one dropout rate; this model has hidden_dropout_prob="
                         f"{config.hidden_dropout_prob} and attention_probs_dropout_prob="
                         f"{config.attention_probs_dropout_prob}")


def backbone_kwargs(config):
    """keras_hub.models.AlbertBackbone's constructor arguments for an AlbertConfig."""
    return {"vocabulary_size": config.vocab_size, "num_layers": config.num_hidden_layers,
            "num_heads": config.num_attention_heads, "embedding_dim": config.embedding_size,
            "hidden_dim": config.hidden_size, "intermediate_dim": config.intermediate_size,
            "num_groups": config.num_hidden_groups, "num_inner_repetitions": config.inner_group_num,
            "dropout": config.hidden_dropout_prob, "max_sequence_length": config.max_position_embeddings,
            "num_segments": config.type_vocab_size}


def _pairs(theirs, ours):
    return [(theirs.kernel, ours.kernel), (theirs.bias, ours.bias)]


def _norm(theirs, ours):
    return [(theirs.gamma, ours.gamma), (theirs.beta, ours.beta)]


def keras_hub_name_map(backbone, encoder):
    """[(keras-hub variable, our variable or None)] for every variable of `backbone` (an AlbertBackbone) from
    `encoder` (an AlbertEncoder); None: the E→H projection of a model without one (embedding_size ==
    hidden_size), which gets the identity. Values are reshaped to keras-hub's shapes (its attention kernels are
    [H, heads, head_size] and [heads, head_size, H])."""
    emb = encoder.embeddings
    rows = [(backbone.token_embedding.embeddings, emb.word_embeddings),
            (backbone.position_embedding.position_embeddings, emb.position_embeddings),
            (backbone.segment_embedding.embeddings, emb.token_type_embeddings),
            *_norm(backbone.embeddings_layer_norm, emb.layer_norm)]
    if emb.projection is not None:
        rows += _pairs(backbone.embeddings_projection, emb.projection)
    else:
        rows += [(backbone.embeddings_projection.kernel, None), (backbone.embeddings_projection.bias, None)]
    for (_, g, j), att in encoder.attention_layers.items():
        ffn = encoder.ffn_layers[("group", g, j)]
        block = backbone.get_layer(f"group_{g}_inner_layer_{j}")
        attention = block._self_attention_layer  # pylint: disable=protected-access  (keras-hub's own converter reads it)
        rows += _pairs(attention.query_dense, att.query) + _pairs(attention.key_dense, att.key)
        rows += _pairs(attention.value_dense, att.value) + _pairs(attention.output_dense, att.output_dense)
        rows += _norm(block._self_attention_layer_norm, att.layer_norm)  # pylint: disable=protected-access
        rows += _pairs(block._feedforward_intermediate_dense, ffn.intermediate)  # pylint: disable=protected-access
        rows += _pairs(block._feedforward_output_dense, ffn.output_dense)  # pylint: disable=protected-access
        rows += _norm(block._feedforward_layer_norm, ffn.layer_norm)  # pylint: disable=protected-access
    rows += _pairs(backbone.pooled_dense, encoder.pooler)
    return rows


def assign_backbone(backbone, encoder):
    """Copies `encoder`'s weights into `backbone`. ValueError unless every backbone variable receives exactly one
    value and every encoder variable is used."""
    rows = keras_hub_name_map(backbone, encoder)
    theirs = [id(t) for t, _ in rows]
    ours = {id(o) for _, o in rows if o is not None}
    unfilled = [v.path for v in backbone.weights if id(v) not in theirs]
    unused = [v.path for v in encoder.weights if id(v) not in ours]
    if unfilled or unused or len(set(theirs)) != len(theirs):
        raise ValueError(f"keras-hub name map: backbone variables without a value {unfilled}, encoder variables "
                         f"unused {unused}, or a variable filled twice")
    for target, source in rows:
        if source is None:  # the identity projection
            value = np.eye(*target.shape, dtype=np.float32) if len(target.shape) == 2 else np.zeros(target.shape)
        else:
            value = np.asarray(source.numpy(), np.float32)
            if value.size != np.prod(target.shape):
                raise ValueError(f"keras-hub name map: {source.path} {value.shape} does not fit {target.path} "
                                 f"{tuple(target.shape)}")
        target.assign(np.reshape(value, target.shape).astype(np.float32))


def write_keras_hub(model, output, spm_model=None):
    """Writes the encoder of `model` (an AlbertEncoder, or a pretrainer / task model holding `.encoder`) as a new
    keras-hub preset directory `output`, atomically, with the AlbertTokenizer of `spm_model` when given. Returns
    (the top-level file names written, the backbone's parameters: what keras-hub's `from_preset` loads)."""
    encoder = getattr(model, "encoder", model)
    check_keras_hub(encoder.config)
    check_output_dir(output, "--output")
    keras_hub = _keras_hub()
    backbone = keras_hub.models.AlbertBackbone(**backbone_kwargs(encoder.config), dtype="float32")
    assign_backbone(backbone, encoder)
    with leftovers.private_temp_dir(WORK) as local:  # a killed run's: removed by the next (leftovers.new_directory)
        backbone.save_to_preset(local)  # keras-hub's saver: config.json, metadata.json, model.weights.h5
        if spm_model:
            with tf.io.gfile.GFile(spm_model, "rb") as f:
                keras_hub.models.AlbertTokenizer(proto=f.read()).save_to_preset(local)
        with atomic_directory(output, markers=(KERAS_HUB_WEIGHTS_FILE, KERAS_HUB_CONFIG_FILE)) as tmp:
            for directory, _, names in os.walk(local):
                target = os.path.join(tmp, os.path.relpath(directory, local))
                tf.io.gfile.makedirs(target)
                for name in names:
                    tf.io.gfile.copy(os.path.join(directory, name), os.path.join(target, name), overwrite=True)
        return sorted(os.listdir(local)), backbone.count_params()
