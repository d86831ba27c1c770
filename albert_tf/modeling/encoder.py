"""AlbertEncoder: factorized embedding, cross-layer-shared post-LN transformer, pooler."""
import collections
import types

import keras
import tensorflow as tf
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.attention import AttentionSublayer, attention_bias
from albert_tf.modeling.base import INPUT_NAMES, AlbertModelBase
from albert_tf.modeling.embedding import FactorizedEmbedding
from albert_tf.modeling.feedforward import FeedForwardSublayer
from albert_tf.modeling.fused import use_fused
from albert_tf.modeling.layers import dense, split_input


def _sublayer_keys(config):
    """For each applied block (layer i, inner block j) in order, the keys of the attention and FFN parameter sets
    it uses.

    Layer i uses group g = int(i·G/L) (the original). With sharing "all" both halves are keyed by (g, j) — the
    original ALBERT. "attention" keys attention by (g, j) and the FFN per layer (i, j); "ffn" the reverse; "none"
    keys both per layer (no sharing, BERT). LayerNorms belong to the half they follow.
    """
    keys = []
    for i in range(config.num_hidden_layers):
        g = config.group_of_layer(i)
        for j in range(config.inner_group_num):
            shared, own = ("group", g, j), ("layer", i, j)
            attention_key = shared if config.sharing in ("all", "attention") else own
            ffn_key = shared if config.sharing in ("all", "ffn") else own
            keys.append((attention_key, ffn_key))
    return keys


def _key_name(key):
    kind, a, j = key
    return f"group_{a}_inner_group_{j}" if kind == "group" else f"layer_{a}_inner_group_{j}"



def _rematerialized_block(attention, ffn, x, bias, weights, training, copies):
    """One application of a block (attention then FFN, their `train_call`s) under `tf.recompute_grad`: only its
    inputs are kept for the backward pass, which runs the block's forward again first.

    The dropout seeds are drawn here, outside the recomputed function, and passed in: the recomputation applies
    the same masks (and draws nothing). Every tensor the block reads (x, the attention bias, the step's weight
    tensors, the seeds) is an argument, so the gradients reach them; the block reads no variable.
    Args/returns: as `AttentionSublayer.train_call` (x a tensor or a pair, bias, weights = (attention, FFN) dicts
    of `step_weights`), copies of the FFN's output.
    """
    seeds = (attention.dropout_seeds(training), ffn.dropout_seeds(training))
    args = (split_input(x), bias, weights, seeds)
    flat = tf.nest.flatten(args)
    present = [i for i, value in enumerate(flat) if value is not None]  # seeds are None without dropout

    def block(*tensors):
        values = list(flat)
        for i, tensor in zip(present, tensors):
            values[i] = tensor
        pair, block_bias, (attention_w, ffn_w), (attention_seeds, ffn_seeds) = tf.nest.pack_sequence_as(
            args, values)
        h = attention.train_call(tuple(pair), block_bias, attention_w, training, copies=2, seeds=attention_seeds)
        return ffn.train_call(h, ffn_w, training, copies=copies, seeds=ffn_seeds)

    return recompute_grad(block, [flat[i] for i in present])


def recompute_grad(fn, args):
    """`fn(*args)` whose backward pass runs `fn` again (under a tape) instead of keeping its intermediates:
    rematerialization, as `tf.recompute_grad`, with a barrier that XLA cannot remove.

    The recomputation must not start before the backward reaches it, and must not be merged with the forward
    (XLA's common-subexpression elimination would, leaving the memory unchanged). tf.recompute_grad adds to its
    inputs a zero computed from the incoming gradient as where(b == b, 0, nan), which XLA folds to 0 (compare(x, x)
    of a bool is true) and then drops, so its recomputation disappears in XLA-compiled steps. Here the zero is
    min(|g|, 0) of the first element g of the incoming gradient: XLA and Grappler cannot prove it zero (it is NaN
    when g is NaN, when the gradient is NaN anyway), so the recomputed block's inputs differ from the forward's.
    tests/test_remat_accumulation.py counts the dots of the compiled step.

    Args:
      fn: a function of tensors returning a tensor or a list of tensors; it must read no variable (pass their
        values as arguments) and draw no random numbers (pass seeds).
      args: a list of tensors. Gradients flow to the floating-point ones.
    """
    @tf.custom_gradient
    def inner(*inputs):
        result = fn(*inputs)

        def grad(*upstream):
            first = tf.reshape(upstream[0], [-1])[:1]
            zero = tf.minimum(tf.reduce_max(tf.abs(tf.cast(first, tf.float32))), 0.0)
            floating = [i for i, a in enumerate(inputs) if a.dtype.is_floating]
            replay = list(inputs)
            for i in floating:
                replay[i] = inputs[i] + tf.cast(zero, inputs[i].dtype)
            with tf.GradientTape() as tape:
                tape.watch([replay[i] for i in floating])
                recomputed = fn(*replay)
            sources = [replay[i] for i in floating]
            if isinstance(recomputed, (list, tuple)):
                grads = tape.gradient(list(recomputed), sources, output_gradients=list(upstream))
            else:
                grads = tape.gradient(recomputed, sources, output_gradients=upstream[0])
            out = [None] * len(inputs)
            for i, g in zip(floating, grads):
                out[i] = g
            return out

        return result, grad

    return inner(*args)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(AlbertModelBase):
    """The ALBERT encoder as a functional Keras model.

    Inputs (dict, TF-Hub BERT names): `input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, L].
    Outputs (dict):
      sequence_output  float [B, L, H]   the last block's output
      pooled_output    float [B, H]      tanh(dense(sequence_output[:, 0]))
      encoder_outputs  list of float [B, L, H], one per applied block (num_hidden_layers × inner_group_num)

    Args:
      config: an AlbertConfig, dict, preset name or path to albert_config.json.
      dropout: False builds the model with both dropout rates set to 0 (the paper's dropout removal).
      fused: with training=True (TensorFlow backend), run the training path (`_training_forward`: fused kernels,
        shared weights cast once per step; see albert_tf/modeling/fused.py). False runs the plain keras.ops graph
        in training too. Inference runs the plain graph; exports run it on the batch's tokens only
        (`unpadded_call`).
      remat: rematerialization (training path, TensorFlow): each application of a block (attention + FFN, per
        stream) keeps only its input for the backward pass and recomputes its activations there
        (`tf.recompute_grad`), with the same dropout masks (their seeds are drawn once, before the block). Memory:
        one block's activations instead of all of them; time: one more forward of the blocks per step. Needs
        `fused=True`. With remat, training=False calls (a training step without dropout, evaluation) run the
        training path too, without dropout.
      training_streams: training path only: the batch is split into this many slices that run through the blocks
        as independent chains, which TensorFlow executes concurrently. On CPU this overlaps one slice's
        single-threaded fused elementwise kernels with the other's multi-threaded matmuls (`albert-tf pretrain`
        uses 2 on CPU). The function is the same (up to float rounding) for any value, except that dropout masks
        are drawn per slice. A batch it does not divide runs as one slice.
    """

    INPUT_NAMES = INPUT_NAMES
    CONFIG_ARGS = ("fused", "training_streams", "remat")
    RESTORE_PART = "encoder"

    def __init__(self, config, dropout=True, fused=True, training_streams=1, remat=False, **kwargs):
        config = load_config(config)
        if not dropout:
            config = config.without_dropout()
        if int(training_streams) < 1:
            raise ValueError(f"training_streams must be a positive integer, got {training_streams!r}")
        if remat and not fused:
            raise ValueError("remat=True needs fused=True: rematerialization is implemented on the training path "
                             "(AlbertEncoder._training_forward), which fused=False turns off")
        self.config = config
        c = config

        embeddings = FactorizedEmbedding(c, name="embeddings")
        attention_layers, ffn_layers = {}, {}
        keys = _sublayer_keys(c)
        for attention_key, ffn_key in keys:
            if attention_key not in attention_layers:
                attention_layers[attention_key] = AttentionSublayer(c, fused=fused, name=f"attention_{_key_name(attention_key)}")
            if ffn_key not in ffn_layers:
                ffn_layers[ffn_key] = FeedForwardSublayer(c, fused=fused, name=f"ffn_{_key_name(ffn_key)}")
        pooler = dense(c.hidden_size, c, "pooler_dense", activation_fn="tanh")

        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        encoder_outputs = []
        for attention_key, ffn_key in keys:
            x = attention_layers[attention_key](x, inputs["input_mask"])
            x = ffn_layers[ffn_key](x)
            encoder_outputs.append(x)
        pooled = pooler(x[:, 0, :])
        outputs = {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": encoder_outputs}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        self.embeddings = embeddings
        # Read-only views, which neither Keras nor TensorFlow tracks: a tracked dict with tuple keys makes
        # tf.saved_model.save fail ("non-string key"). The sublayers are tracked as the functional model's layers,
        # so the checkpoint object graph is the same as before (checkpoints written earlier restore unchanged).
        self.attention_layers = types.MappingProxyType(attention_layers)  # {("group", g, j) or ("layer", i, j): ..}
        self.ffn_layers = types.MappingProxyType(ffn_layers)
        self.block_keys = tuple(keys)  # per applied block: (attention key, ffn key)
        self.pooler = pooler
        self.fused = bool(fused)
        self.training_streams = int(training_streams)
        self.remat = bool(remat)

    def call(self, inputs, training=None, mask=None):
        remat = self.remat and training is False and keras.backend.backend() == "tensorflow"
        if (use_fused(training, self.fused) or remat) and isinstance(inputs, dict):
            return self._training_forward(inputs, training)
        return super().call(inputs, training=training, mask=mask)

    def unpadded_call(self, inputs):
        """Inference (training=False, dropout off) computed on the batch's tokens only: the outputs of
        `self(inputs, training=False)` up to float rounding, without the arithmetic on padding.

        The embeddings run on the [B, L] batch; every block's dense layers, GELU and LayerNorms then run on the
        [T, H] rows of its tokens (T = the number of positions with input_mask 1, plus position 0 of each row and
        every position of a row without any), and only the attention's scores and context go through the
        [B, L] layout (a scatter before, a gather after). Padding is masked out of attention, so each token's
        outputs are those of the padded computation; on a batch of mixed lengths most of the FLOPs spent on
        padding go. Inputs as `call`. Returns {"sequence_output": float [B, L, H], zero where input_mask is 0,
        "pooled_output": float [B, H]}.
        """
        mask = ops.not_equal(inputs["input_mask"], 0)
        batch, length = ops.shape(mask)[0], ops.shape(mask)[1]
        keep = mask | (ops.arange(length) == 0)[None, :] | ~ops.any(mask, axis=1, keepdims=True)
        tokens = ops.nonzero(ops.reshape(keep, (-1,)))[0]  # [T] flat positions b·L + l, in order
        x = self.embeddings(inputs["input_word_ids"], inputs["input_type_ids"], training=False)
        x = ops.take(ops.reshape(x, (batch * length, -1)), tokens, axis=0)  # [T, H]
        bias = attention_bias(inputs["input_mask"])
        for attention_key, ffn_key in self.block_keys:
            x = self.attention_layers[attention_key].unpadded_call(x, tokens, (batch, length), bias)
            x = self.ffn_layers[ffn_key](x, training=False)
        hidden = ops.shape(x)[-1]
        sequence = ops.reshape(ops.scatter(tokens[:, None], x, (batch * length, hidden)), (batch, length, hidden))
        pooled = self.pooler(sequence[:, 0, :])
        return {"sequence_output": sequence * ops.cast(mask, sequence.dtype)[:, :, None], "pooled_output": pooled}

    def _training_forward(self, inputs, training):
        """The same function as the functional graph, for training (TensorFlow): each shared weight is read and
        cast to the compute dtype once per step, not once per applied block, with its gradient summed over the
        blocks in float32; the blocks run their fused `train_call`s, on `training_streams` slices of the batch
        that run as independent chains (see `training_streams`)."""
        x = self.embeddings(inputs["input_word_ids"], inputs["input_type_ids"], training=training)
        bias = attention_bias(inputs["input_mask"])
        streams = self.training_streams
        batch = x.shape[0]
        if streams > 1 and (batch is None or batch % streams):
            streams = 1  # an unknown or indivisible batch runs as one stream
        attention_uses = collections.Counter(key for key, _ in self.block_keys)
        ffn_uses = collections.Counter(key for _, key in self.block_keys)
        # per application, one weights dict per stream (their gradients join the shared sum in one kernel)
        attention_weights = {key: iter(layer.step_weights(attention_uses[key], streams))
                             for key, layer in self.attention_layers.items()}
        ffn_weights = {key: iter(layer.step_weights(ffn_uses[key], streams)) for key, layer in self.ffn_layers.items()}
        xs = ops.split(x, streams, axis=0) if streams > 1 else [x]
        biases = ops.split(bias, streams, axis=0) if streams > 1 else [bias]
        encoder_outputs = []
        last = len(self.block_keys) - 1
        for index, (attention_key, ffn_key) in enumerate(self.block_keys):
            attention, ffn = self.attention_layers[attention_key], self.ffn_layers[ffn_key]
            attention_slices = [next(attention_weights[attention_key]) for _ in xs]
            ffn_slices = [next(ffn_weights[ffn_key]) for _ in xs]
            # Each block output but the last feeds the next block twice (matmul, residual): a pair of copies.
            copies = 1 if index == last else 2
            if self.remat:
                xs = [_rematerialized_block(attention, ffn, x, bias, weights, training, copies)
                      for x, bias, weights in zip(xs, biases, zip(attention_slices, ffn_slices))]
            else:
                xs = [attention.train_call(x, bias, weights, training, copies=2)
                      for x, bias, weights in zip(xs, biases, attention_slices)]
                xs = [ffn.train_call(x, weights, training, copies=copies) for x, weights in zip(xs, ffn_slices)]
            outputs = [x if index == last else x[0] for x in xs]
            encoder_outputs.append(ops.concatenate(outputs, axis=0) if streams > 1 else outputs[0])
        x = encoder_outputs[-1]
        pooled = self.pooler(x[:, 0, :])
        return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": encoder_outputs}
