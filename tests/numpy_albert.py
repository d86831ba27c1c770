"""An independent float64 numpy ALBERT forward pass, written from the paper and the original's numerics (docs/numerics.md).

Weights are a dict keyed by the ORIGINAL google-research/albert TF1 variable names (kernels [in, out],
cls/seq_relationship/output_weights [2, H]). For the sharing modes the original code does not have, per-layer halves
are named with `layer_{i}` in place of `group_{g}`. This module shares no code with albert_tf.
"""
import math

import numpy as np

EPS = 1e-12


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * gamma + beta


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def block_prefixes(cfg, layer, inner):
    """(attention prefix, ffn prefix) of applied block (layer, inner) under the config's sharing mode."""
    g = int(layer * cfg["num_hidden_groups"] / cfg["num_hidden_layers"])
    sharing = cfg.get("sharing", "all")
    shared = f"bert/encoder/transformer/group_{g}/inner_group_{inner}"
    own = f"bert/encoder/transformer/layer_{layer}/inner_group_{inner}"
    return (shared if sharing in ("all", "attention") else own, shared if sharing in ("all", "ffn") else own)


def forward(w, cfg, input_ids, input_mask, type_ids, masked_positions=None):
    """Returns dict(sequence_output, pooled_output, encoder_outputs, mlm_logits, sop_logits) in float64."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    b, n = input_ids.shape
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // heads
    x = (w["bert/embeddings/word_embeddings"][input_ids]
         + w["bert/embeddings/token_type_embeddings"][type_ids]
         + w["bert/embeddings/position_embeddings"][:n][None])
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    if cfg["embedding_size"] != cfg["hidden_size"]:
        x = x @ w["bert/encoder/embedding_hidden_mapping_in/kernel"] + w["bert/encoder/embedding_hidden_mapping_in/bias"]
    bias = (1.0 - input_mask.astype(np.float64))[:, None, None, :] * -10000.0
    outs = []
    for layer in range(cfg["num_hidden_layers"]):
        for inner in range(cfg["inner_group_num"]):
            pa, pf = block_prefixes(cfg, layer, inner)

            def proj(t, name, prefix=pa):
                return t @ w[f"{prefix}/attention_1/{name}/kernel"] + w[f"{prefix}/attention_1/{name}/bias"]

            q = proj(x, "self/query").reshape(b, n, heads, d).transpose(0, 2, 1, 3)
            k = proj(x, "self/key").reshape(b, n, heads, d).transpose(0, 2, 1, 3)
            v = proj(x, "self/value").reshape(b, n, heads, d).transpose(0, 2, 1, 3)
            probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, heads * d)
            att = layer_norm(proj(ctx, "output/dense") + x, w[f"{pa}/LayerNorm/gamma"], w[f"{pa}/LayerNorm/beta"])
            h = gelu(att @ w[f"{pf}/ffn_1/intermediate/dense/kernel"] + w[f"{pf}/ffn_1/intermediate/dense/bias"])
            h = h @ w[f"{pf}/ffn_1/intermediate/output/dense/kernel"] + w[f"{pf}/ffn_1/intermediate/output/dense/bias"]
            x = layer_norm(h + att, w[f"{pf}/LayerNorm_1/gamma"], w[f"{pf}/LayerNorm_1/beta"])
            outs.append(x)
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    result = {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": outs}
    if "cls/predictions/output_bias" in w:
        if masked_positions is not None:
            gathered = np.take_along_axis(x, masked_positions[..., None], axis=1)
            t = gelu(gathered @ w["cls/predictions/transform/dense/kernel"] + w["cls/predictions/transform/dense/bias"])
            t = layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"], w["cls/predictions/transform/LayerNorm/beta"])
            result["mlm_logits"] = t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
        result["sop_logits"] = pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]
    return result


def random_weights(cfg, rng, sharing=None):
    """Random weights for every name the config needs (scale large enough that bugs show)."""
    cfg = dict(cfg, sharing=sharing or cfg.get("sharing", "all"))
    V, E, H, I = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"], cfg["intermediate_size"]
    w = {}

    def mat(*shape, scale=0.2):
        return rng.normal(0.0, scale, shape)

    w["bert/embeddings/word_embeddings"] = mat(V, E, scale=0.5)
    w["bert/embeddings/position_embeddings"] = mat(cfg["max_position_embeddings"], E, scale=0.5)
    w["bert/embeddings/token_type_embeddings"] = mat(cfg["type_vocab_size"], E, scale=0.5)
    w["bert/embeddings/LayerNorm/gamma"] = 1.0 + mat(E, scale=0.1)
    w["bert/embeddings/LayerNorm/beta"] = mat(E, scale=0.1)
    if E != H:
        w["bert/encoder/embedding_hidden_mapping_in/kernel"] = mat(E, H)
        w["bert/encoder/embedding_hidden_mapping_in/bias"] = mat(H, scale=0.1)
    for layer in range(cfg["num_hidden_layers"]):
        for inner in range(cfg["inner_group_num"]):
            pa, pf = block_prefixes(cfg, layer, inner)
            if f"{pa}/LayerNorm/gamma" not in w:
                for name in ("self/query", "self/key", "self/value", "output/dense"):
                    w[f"{pa}/attention_1/{name}/kernel"] = mat(H, H)
                    w[f"{pa}/attention_1/{name}/bias"] = mat(H, scale=0.1)
                w[f"{pa}/LayerNorm/gamma"] = 1.0 + mat(H, scale=0.1)
                w[f"{pa}/LayerNorm/beta"] = mat(H, scale=0.1)
            if f"{pf}/LayerNorm_1/gamma" not in w:
                w[f"{pf}/ffn_1/intermediate/dense/kernel"] = mat(H, I)
                w[f"{pf}/ffn_1/intermediate/dense/bias"] = mat(I, scale=0.1)
                w[f"{pf}/ffn_1/intermediate/output/dense/kernel"] = mat(I, H)
                w[f"{pf}/ffn_1/intermediate/output/dense/bias"] = mat(H, scale=0.1)
                w[f"{pf}/LayerNorm_1/gamma"] = 1.0 + mat(H, scale=0.1)
                w[f"{pf}/LayerNorm_1/beta"] = mat(H, scale=0.1)
    w["bert/pooler/dense/kernel"] = mat(H, H)
    w["bert/pooler/dense/bias"] = mat(H, scale=0.1)
    w["cls/predictions/transform/dense/kernel"] = mat(H, E)
    w["cls/predictions/transform/dense/bias"] = mat(E, scale=0.1)
    w["cls/predictions/transform/LayerNorm/gamma"] = 1.0 + mat(E, scale=0.1)
    w["cls/predictions/transform/LayerNorm/beta"] = mat(E, scale=0.1)
    w["cls/predictions/output_bias"] = mat(V, scale=0.1)
    w["cls/seq_relationship/output_weights"] = mat(2, H)
    w["cls/seq_relationship/output_bias"] = mat(2, scale=0.1)
    return {k: v.astype(np.float32) for k, v in w.items()}


def hf_names(w, cfg):
    """The same weights under Hugging Face AlbertForPreTraining names (torch Linear weights are [out, in])."""
    out = {}
    T = np.transpose
    out["albert.embeddings.word_embeddings.weight"] = w["bert/embeddings/word_embeddings"]
    out["albert.embeddings.position_embeddings.weight"] = w["bert/embeddings/position_embeddings"]
    out["albert.embeddings.token_type_embeddings.weight"] = w["bert/embeddings/token_type_embeddings"]
    out["albert.embeddings.LayerNorm.weight"] = w["bert/embeddings/LayerNorm/gamma"]
    out["albert.embeddings.LayerNorm.bias"] = w["bert/embeddings/LayerNorm/beta"]
    if cfg["embedding_size"] != cfg["hidden_size"]:
        out["albert.encoder.embedding_hidden_mapping_in.weight"] = T(w["bert/encoder/embedding_hidden_mapping_in/kernel"])
        out["albert.encoder.embedding_hidden_mapping_in.bias"] = w["bert/encoder/embedding_hidden_mapping_in/bias"]
    for g in range(cfg["num_hidden_groups"]):
        for j in range(cfg["inner_group_num"]):
            src = f"bert/encoder/transformer/group_{g}/inner_group_{j}"
            dst = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}"
            pairs = {"attention.query": "attention_1/self/query", "attention.key": "attention_1/self/key",
                     "attention.value": "attention_1/self/value", "attention.dense": "attention_1/output/dense",
                     "ffn": "ffn_1/intermediate/dense", "ffn_output": "ffn_1/intermediate/output/dense"}
            for hf, tf1 in pairs.items():
                out[f"{dst}.{hf}.weight"] = T(w[f"{src}/{tf1}/kernel"])
                out[f"{dst}.{hf}.bias"] = w[f"{src}/{tf1}/bias"]
            out[f"{dst}.attention.LayerNorm.weight"] = w[f"{src}/LayerNorm/gamma"]
            out[f"{dst}.attention.LayerNorm.bias"] = w[f"{src}/LayerNorm/beta"]
            out[f"{dst}.full_layer_layer_norm.weight"] = w[f"{src}/LayerNorm_1/gamma"]
            out[f"{dst}.full_layer_layer_norm.bias"] = w[f"{src}/LayerNorm_1/beta"]
    out["albert.pooler.weight"] = T(w["bert/pooler/dense/kernel"])
    out["albert.pooler.bias"] = w["bert/pooler/dense/bias"]
    out["predictions.dense.weight"] = T(w["cls/predictions/transform/dense/kernel"])
    out["predictions.dense.bias"] = w["cls/predictions/transform/dense/bias"]
    out["predictions.LayerNorm.weight"] = w["cls/predictions/transform/LayerNorm/gamma"]
    out["predictions.LayerNorm.bias"] = w["cls/predictions/transform/LayerNorm/beta"]
    out["predictions.bias"] = w["cls/predictions/output_bias"]
    out["predictions.decoder.weight"] = w["bert/embeddings/word_embeddings"]
    out["predictions.decoder.bias"] = w["cls/predictions/output_bias"]
    out["sop_classifier.classifier.weight"] = w["cls/seq_relationship/output_weights"]
    out["sop_classifier.classifier.bias"] = w["cls/seq_relationship/output_bias"]
    return {k: np.ascontiguousarray(v) for k, v in out.items()}
