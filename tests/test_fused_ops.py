"""The fused training kernels (albert_tf.modeling.fused) against the plain keras.ops math and autodiff, and the
whole pretrainer's training path (fused) against the numpy reference and against the unfused path's gradients."""
import contextlib

import numpy as np
import pytest
import tensorflow as tf

import numpy_albert as ref
from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.checkpoints.tensors import assign_from_tensors, tf1_name_map
from albert_tf.modeling import fused
from albert_tf.runtime import host_xla
from helpers import SMALL, compare, make_inputs

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


def _value_and_grads(fn, inputs, seed=0):
    """fn(*inputs), and the gradients of Σ fn(*inputs)·w (w random) with respect to every input."""
    inputs = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = fn(*inputs)
        weights = tf.constant(np.random.default_rng(seed).normal(size=out.shape), out.dtype)
        total = tf.reduce_sum(tf.cast(out * weights, tf.float32))
    return out.numpy(), [g.numpy() for g in tape.gradient(total, inputs)]


def _gelu_numpy(z):
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z ** 3)))


CASES = {
    "bias_gelu": (lambda fused_: lambda h, b: fused.bias_gelu(h, b, fused=fused_),
                  lambda rng: [rng.normal(size=(2, 5, 12)) * 2, rng.normal(size=(12,))]),
    "residual_layer_norm": (lambda fused_: lambda y, r, g, b: fused.residual_layer_norm(y, r, g, b, 1e-12,
                                                                                        fused=fused_),
                            lambda rng: [rng.normal(size=(2, 5, 16)), rng.normal(size=(2, 5, 16)) * 3 + 1,
                                         rng.normal(size=(16,)), rng.normal(size=(16,))]),
    "residual_layer_norm_bias": (
        lambda fused_: lambda y, r, g, b, c: fused.residual_layer_norm(y, r, g, b, 1e-12, bias=c, fused=fused_),
        lambda rng: [rng.normal(size=(2, 5, 16)), rng.normal(size=(2, 5, 16)) * 3 + 1, rng.normal(size=(16,)),
                     rng.normal(size=(16,)), rng.normal(size=(16,)) * 2]),
    # two copies (concatenated, so that they get different upstream gradients), summed in the backward kernel
    "residual_layer_norm_copies": (
        lambda fused_: lambda y, r, g, b: tf.concat(
            fused.residual_layer_norm(y, r, g, b, 1e-12, copies=2, fused=fused_), -1),
        lambda rng: [rng.normal(size=(2, 5, 16)), rng.normal(size=(2, 5, 16)), rng.normal(size=(16,)),
                     rng.normal(size=(16,))]),
    # the three heads concatenated on the last axis, so one output carries every gradient
    "split_heads": (lambda fused_: lambda x, b: tf.concat(fused.split_heads(x, b, 2, fused=fused_), -1),
                    lambda rng: [rng.normal(size=(2, 5, 12)), rng.normal(size=(12,))]),
    "masked_softmax": (lambda fused_: lambda s, b: fused.masked_softmax(s, b, 0.25, fused=fused_),
                       lambda rng: [rng.normal(size=(2, 3, 6, 6)) * 4,
                                    np.where(rng.random((2, 1, 1, 6)) < 0.3, -10000.0, 0.0)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_matches_unfused_values_and_gradients(name):
    make, draw = CASES[name]
    inputs = [x.astype("float32") for x in draw(np.random.default_rng(3))]
    want, want_grads = _value_and_grads(make(False), inputs)
    got, got_grads = _value_and_grads(make(True), inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if name == "masked_softmax" and i == 1:
            continue  # the mask bias is not trained: the fused kernel gives it no gradient
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name}: gradient of input {i}")


def test_fused_gelu_against_numpy_formula():
    rng = np.random.default_rng(0)
    h, b = rng.normal(size=(4, 7)).astype("float32") * 3, rng.normal(size=(7,)).astype("float32")
    got = fused.bias_gelu(tf.constant(h), tf.constant(b), fused=True).numpy()
    np.testing.assert_allclose(got, _gelu_numpy((h + b).astype("float64")), rtol=1e-5, atol=1e-6)
    # the derivative, against central differences of the numpy formula
    _, (dh, db) = _value_and_grads(lambda x, y: fused.bias_gelu(x, y, fused=True), [h, b], seed=1)
    w = np.random.default_rng(1).normal(size=h.shape)
    eps = 1e-4
    z = (h + b).astype("float64")
    numeric = (_gelu_numpy(z + eps) - _gelu_numpy(z - eps)) / (2 * eps) * w
    np.testing.assert_allclose(dh, numeric, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(db, numeric.sum(0), rtol=1e-4, atol=1e-4)


def test_split_heads_against_numpy_indexing():
    rng = np.random.default_rng(0)
    batch, length, heads, size = 2, 3, 4, 5
    hidden = heads * size
    qkv, bias = rng.normal(size=(batch, length, 3 * hidden)), rng.normal(size=(3 * hidden,))
    got = fused.split_heads(tf.constant(qkv, tf.float32), tf.constant(bias, tf.float32), heads, fused=True)
    for which, tensor in enumerate(got):
        assert tensor.shape == (batch, heads, length, size)
        for b, n, t, d in np.ndindex(batch, heads, length, size):
            column = which * hidden + n * size + d
            assert abs(tensor[b, n, t, d].numpy() - (qkv[b, t, column] + bias[column])) < 1e-5


def test_layer_norm_bias_against_numpy():
    rng = np.random.default_rng(2)
    y, r = rng.normal(size=(3, 8)), rng.normal(size=(3, 8))
    gamma, beta, bias = rng.normal(size=8), rng.normal(size=8), rng.normal(size=8)
    out = fused.residual_layer_norm(*[tf.constant(x, tf.float32) for x in (y, r, gamma, beta)], 1e-12,
                                    bias=tf.constant(bias, tf.float32), fused=True)
    z = y + r + bias
    expected = (z - z.mean(-1, keepdims=True)) / z.std(-1, keepdims=True) * gamma + beta
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("uses,streams", [(1, 1), (3, 1), (1, 2), (3, 2)])
def test_shared_cast_sums_the_gradients_of_its_uses_in_float32(uses, streams):
    rng = np.random.default_rng(4)
    w = tf.constant(rng.normal(size=(4, 6)), tf.float32)
    # bfloat16-exact upstream gradients whose float32 sum is not bfloat16-exact
    upstream = [tf.cast(tf.cast(rng.normal(size=(4, 6)) * 10 ** (i % 4), tf.bfloat16), tf.float32)
                for i in range(uses * streams)]
    with tf.GradientTape() as tape:
        tape.watch(w)
        copies = fused.shared_cast(w, "bfloat16", uses, fused=True, streams=streams)
        total = tf.add_n([tf.reduce_sum(tf.cast(c, tf.float32) * u) for c, u in zip(copies, upstream)])
    assert len(copies) == uses * streams and all(c.dtype == tf.bfloat16 for c in copies)
    np.testing.assert_array_equal(copies[-1].numpy(), tf.cast(w, tf.bfloat16).numpy())
    grad = tape.gradient(total, w)
    assert grad.dtype == tf.float32
    np.testing.assert_allclose(grad.numpy(), np.sum([u.numpy() for u in upstream], 0), rtol=1e-6)


def test_bfloat16_inputs_keep_their_dtype_and_compute_in_float32():
    rng = np.random.default_rng(0)
    y = tf.cast(tf.constant(rng.normal(size=(3, 8)).astype("float32")), tf.bfloat16)
    r = tf.cast(tf.constant(rng.normal(size=(3, 8)).astype("float32") + 100.0), tf.bfloat16)
    gamma, beta = tf.ones((8,)), tf.zeros((8,))
    out = fused.residual_layer_norm(y, r, gamma, beta, 1e-12, fused=True)
    assert out.dtype == tf.bfloat16
    z = tf.cast(y, tf.float32) + tf.cast(r, tf.float32)
    expected = (z - tf.reduce_mean(z, -1, keepdims=True)) / tf.math.reduce_std(z, -1, keepdims=True)
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), expected.numpy(), atol=2e-2)


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the calls of each fused kernel (the layers look them up at call time)."""
    calls = {name: 0 for name in fused.tf_kernels()}

    def counting(name, kernel):
        def wrapper(*args):
            calls[name] += 1
            return kernel(*args)
        return wrapper

    for name, kernel in list(fused.tf_kernels().items()):
        monkeypatch.setitem(fused.tf_kernels(), name, counting(name, kernel))
    return calls


def _model_and_batch(sharing="all", **model_args):
    cfg = dict(SMALL, sharing=sharing, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    weights = ref.random_weights(cfg, np.random.default_rng(0))
    model = AlbertPretrainer(AlbertConfig.from_dict(cfg), **model_args)
    assign_from_tensors(model, weights, tf1_name_map(model), "random weights")
    return cfg, weights, model, make_inputs(cfg)


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_training_path_matches_numpy_reference(sharing, kernel_calls):
    cfg, weights, model, batch = _model_and_batch(sharing)
    expected = ref.forward(weights, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                           batch["masked_lm_positions"])
    model(batch, training=False)
    assert not any(kernel_calls.values()), "inference must not use the fused (XLA) kernels"
    diff = compare(model(batch, training=True), expected, batch["input_mask"])
    blocks = cfg["num_hidden_layers"] * cfg["inner_group_num"]
    keys = model.encoder.block_keys  # shared weights (a key applied more than once) are cast once per step
    shared = sum(1 for half in zip(*keys) for key in set(half) if half.count(key) > 1)
    assert (shared > 0) == (sharing == "all")
    # per shared sublayer: its two kernels and its float32 vectors (biases, γ, β: shared_vectors)
    assert kernel_calls == {"bias_gelu": blocks, "residual_layer_norm": 2 * blocks, "masked_softmax": blocks,
                            "split_heads": blocks, "shared_cast": 3 * shared}
    assert diff < 1e-5


def test_training_path_gradients_match_unfused(kernel_calls):
    _, _, model, batch = _model_and_batch()
    labels = np.random.default_rng(5).integers(0, SMALL["vocab_size"], batch["masked_lm_positions"].shape)

    def grads(model):
        with tf.GradientTape() as tape:
            out = model(batch, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, out["mlm_logits"])) + \
                tf.reduce_mean(out["sop_logits"][:, 0] ** 2) + tf.reduce_mean(out["sequence_output"] ** 2)
        return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]

    got = grads(model)
    assert kernel_calls["bias_gelu"] > 0
    calls = dict(kernel_calls)
    unfused = _model_and_batch(fused=False)[2]  # the same weights, the plain graph in training too
    assert not unfused.get_config()["fused"] and AlbertPretrainer.from_config(unfused.get_config()).fused is False
    want = grads(unfused)
    assert kernel_calls == calls, "a model built with fused=False must not use the fused kernels"
    for g, w, v in zip(got, want, model.trainable_variables):
        # atol scaled to the tensor's largest entry: a shared weight's gradient sums the uses of every layer, whose
        # float32 summation order differs between the paths (fused: a running sum as the backward reaches each
        # use; seen on TF 2.18: 1.4e-6 on a 0.002 entry of a bias gradient whose largest entry is 1.8; on
        # tensorflow-tpu 2.20: 2.2e-6 on a 0.005 entry of the token-type table's, largest 0.6): a summation error
        # of a few hundred float32 terms, ~1e-5 of the largest
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=_summation_atol(w), err_msg=v.path)


def _summation_atol(want):
    """The absolute tolerance of a gradient summed in another float32 order: 1e-5 of its largest entry (at least
    1e-6)."""
    return 1e-5 * max(0.1, float(np.abs(want).max()))


def test_training_streams_compute_the_same_function():
    """Splitting the batch into concurrent slices (`training_streams`) changes neither outputs nor gradients."""
    _, _, model, batch = _model_and_batch()
    labels = np.random.default_rng(6).integers(0, SMALL["vocab_size"], batch["masked_lm_positions"].shape)

    def run(streams):
        model = _model_and_batch(training_streams=streams)[2]
        assert AlbertPretrainer.from_config(model.get_config()).encoder.training_streams == streams
        with tf.GradientTape() as tape:
            out = model(batch, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, out["mlm_logits"])) + \
                tf.reduce_mean(out["sop_logits"][:, 0] ** 2) + tf.reduce_mean(out["encoder_outputs"][1] ** 2)
        grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]
        return {k: v.numpy() for k, v in out.items() if k != "encoder_outputs"}, grads

    assert batch["input_word_ids"].shape[0] % 3 == 0
    want_out, want_grads = run(1)
    for streams in (3, 2):  # 2 does not divide the batch of 3: runs as one stream
        got_out, got_grads = run(streams)
        for k in want_out:
            # atol 2e-6: op by op (no host XLA, the TPU wheel) a reduction's order depends on the batch shape
            np.testing.assert_allclose(got_out[k], want_out[k], rtol=1e-5, atol=2e-6, err_msg=k)
        for g, w, v in zip(got_grads, want_grads, model.trainable_variables):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6, err_msg=v.path)


def test_training_streams_sum_each_shared_gradient_in_a_fixed_order():
    """With the batch in slices, each gradient of a shared block weight, kernels and float32 vectors (biases, γ,
    β) alike, joins its running float32 sum in shared_cast's link: no TensorFlow AddN of weight-sized gradients (a
    pass over memory per block), and no AddN of more than two vector gradients. AddN adds first whichever input
    buffer it can reuse, which depends on what the concurrent slices still hold: with three or more inputs the
    sum's rounding varied from run to run (two: a + b = b + a)."""
    cfg, _, model, batch = _model_and_batch(training_streams=3)
    hidden, inner = cfg["hidden_size"], cfg["intermediate_size"]
    kernel_shapes = {(hidden, 3 * hidden), (hidden, hidden), (hidden, inner), (inner, hidden)}
    vector_shapes = {(hidden,), (3 * hidden,), (inner,), (6 * hidden,), (inner + 3 * hidden,)}  # and concatenated
    labels = np.random.default_rng(6).integers(0, SMALL["vocab_size"], batch["masked_lm_positions"].shape)

    @tf.function
    def grads():
        with tf.GradientTape() as tape:
            out = model(batch, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, out["mlm_logits"]))
        return tape.gradient(loss, model.trainable_variables)

    graph = grads.get_concrete_function().graph
    sums = [op for op in graph.get_operations() if op.type == "AddN"]
    assert sums, "no AddN at all: the wrong graph was searched (a LayerNorm's own gradients are summed by AddN)"
    weight_sized = [op.name for op in sums if tuple(op.outputs[0].shape) in kernel_shapes]
    assert not weight_sized, weight_sized
    unordered = [(op.name, len(op.inputs)) for op in sums
                 if len(op.inputs) > 2 and tuple(op.outputs[0].shape) in vector_shapes]
    assert not unordered, unordered


@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 9), (1, 1, 4)])
@pytest.mark.parametrize("matvec", [True, False])
def test_column_sums_and_row_means_match_numpy(shape, matvec):
    """The kernels' bias/γ/β gradient sums (column_sums: a matvec outside XLA; sum_leading: inside) and row means
    (mean_last, sum_last: matvecs or reductions inside XLA) against numpy."""
    from albert_tf.modeling.tf_kernels import column_sums, mean_last, sum_last, sum_leading, xla

    rng = np.random.default_rng(3)
    x, y = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    got = [s.numpy() for s in column_sums(tf.constant(x), tf.constant(y))]
    inside = xla(sum_leading)(tf.constant(x)).numpy()
    for a, want in ((got[0], x), (got[1], y), (inside, x)):
        assert a.shape == shape[-1:]
        np.testing.assert_allclose(a, want.reshape(-1, shape[-1]).sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xla(mean_last)(tf.constant(x), matvec).numpy(), x.mean(axis=-1, keepdims=True),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xla(sum_last)(tf.constant(x), matvec).numpy(), x.sum(axis=-1, keepdims=True),
                               rtol=1e-5, atol=1e-5)
    # unknown sizes (fine-tuning's length buckets trace with None lengths)
    spec = tf.TensorSpec([None] * len(shape), tf.float32)
    for fn, want in ((mean_last, x.mean(axis=-1, keepdims=True)), (sum_last, x.sum(axis=-1, keepdims=True))):
        traced = tf.function(lambda t, fn=fn: fn(t, matvec), input_signature=[spec])
        np.testing.assert_allclose(traced(tf.constant(x)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_matvec_reductions_only_outside_a_whole_step_xla_compilation():
    """On this CPU-only machine the kernels' reductions are matvecs when the step runs op by op, and plain
    reductions inside an XLA-compiled function (`--xla on`, a TPU replica), where a matvec would be an XLA dot
    (in bfloat16 passes on a TPU); the fused gradients agree either way."""
    from albert_tf.modeling.tf_kernels import matvec_reductions

    seen = {}

    def probe(name):
        seen[name] = matvec_reductions()
        return tf.constant(0.0)

    tf.function(lambda: probe("graph")).get_concrete_function()  # traced only: the TPU wheel cannot compile
    tf.function(lambda: probe("xla"), jit_compile=True).get_concrete_function()  # for the host
    assert seen == {"graph": True, "xla": False}
    if not host_xla.available():  # the tensorflow-tpu wheel (.ci/run's tpu_stack run): no XLA for the host to compare
        return

    rng = np.random.default_rng(5)
    inputs = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in ((2, 5, 16), (2, 5, 16), (16,), (16,),
                                                                            (16,))]

    def grads(*args):
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = fused.residual_layer_norm(*args[:4], 1e-12, bias=args[4], copies=2, fused=True)
            total = tf.reduce_sum(out[0] * out[0]) + tf.reduce_sum(tf.sin(out[1]))
        return tape.gradient(total, args)

    op_by_op = tf.function(grads)(*inputs)
    compiled = tf.function(grads, jit_compile=True)(*inputs)
    for a, b in zip(op_by_op, compiled):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_a_training_step_without_dropout_runs_the_fused_path(kernel_calls):
    """`pretrain --no-dropout` calls the model with training=False inside its train step: within
    fused.training_step() that takes the fused training path (the recipe's speed), with the plain path's outputs
    and gradients (a model built with fused=False, same weights, training=False); a call outside the block
    (evaluation, export) stays on the inference graph."""
    cfg = dict(SMALL, sharing="all", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)  # rates ignored
    weights = ref.random_weights(cfg, np.random.default_rng(0))
    batch = make_inputs(cfg)
    labels = np.random.default_rng(7).integers(0, SMALL["vocab_size"], batch["masked_lm_positions"].shape)

    def grads(model_args, in_step):
        model = AlbertPretrainer(AlbertConfig.from_dict(cfg), **model_args)
        assign_from_tensors(model, weights, tf1_name_map(model), "random weights")
        with tf.GradientTape() as tape:
            with fused.training_step() if in_step else contextlib.nullcontext():
                out = model(batch, training=False)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, out["mlm_logits"])) + \
                tf.reduce_mean(out["sop_logits"][:, 0] ** 2)
        return loss.numpy(), [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]

    plain_loss, plain = grads({"fused": False}, True)
    assert not any(kernel_calls.values())
    outside_loss, _ = grads({}, False)
    assert not any(kernel_calls.values()), "training=False outside a training step must stay on the inference graph"
    loss, got = grads({}, True)
    assert kernel_calls["residual_layer_norm"] > 0 and kernel_calls["bias_gelu"] > 0
    np.testing.assert_allclose(loss, plain_loss, rtol=1e-5)
    np.testing.assert_allclose(outside_loss, plain_loss, rtol=1e-5)
    for g, w in zip(got, plain):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=_summation_atol(w))


@pytest.mark.parametrize("training", [True, False])
def test_pretraining_steps_with_and_without_dropout_both_run_the_fused_kernels(training, kernel_calls):
    """The pretraining step (make_train_step, as `pretrain` runs it) calls the fused kernels whether it trains with
    dropout or without (`--no-dropout`: training=False), and the evaluation step does not."""
    from albert_tf.training.pretrain_step import build_model_and_optimizer, make_eval_step, make_train_step

    cfg = dict(SMALL, sharing="all")
    model, optimizer, _ = build_model_and_optimizer(AlbertConfig.from_dict(cfg), 1e-3, 10, 1)
    batch = {k: tf.constant(v) for k, v in make_inputs(cfg).items()}
    positions = batch["masked_lm_positions"]
    batch.update(masked_lm_ids=tf.ones_like(positions), masked_lm_weights=tf.ones(positions.shape, tf.float32),
                 sentence_order_labels=tf.constant([0, 1, 0]))
    make_eval_step(model, 3)(batch)
    assert not any(kernel_calls.values()), "evaluation must stay on the inference graph"
    sums = make_train_step(model, optimizer, 3)(batch, training)
    assert kernel_calls["residual_layer_norm"] > 0 and kernel_calls["bias_gelu"] > 0, kernel_calls
    assert np.isfinite(float(sums["mlm_nll"]))
