"""Small shared pieces of the ALBERT layers: initializer, activations, LayerNorm (epsilon 1e-12)."""
import keras
import tensorflow as tf
from keras import ops

from albert_tf.modeling.fused import residual_layer_norm
from albert_tf.modeling.primitives import gelu_tanh

try:
    from keras.src.backend import AutocastScope
except ImportError:  # Keras' private module moved: float32_values reads without it
    AutocastScope = None

LAYER_NORM_EPSILON = 1e-12


def initializer(config):
    """Truncated normal with the config's initializer_range (0.02), as the original."""
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def activation(name):
    """Maps albert_config.json `hidden_act` to a function; "gelu" is the tanh approximation, as the original."""
    if name in ("gelu", "gelu_new"):
        return gelu_tanh
    if name == "gelu_exact":  # erf GELU (Hugging Face's "gelu"); not the original ALBERT's
        return lambda x: ops.gelu(x, approximate=False)
    return {"relu": ops.relu, "tanh": ops.tanh, "linear": lambda x: x, "swish": ops.silu, "silu": ops.silu}[name]


def layer_norm(name):
    """LayerNormalization over the last axis with the original's epsilon. `name` should contain "layer_norm" so
    LAMB's default exclusion regexes match its variables."""
    return keras.layers.LayerNormalization(axis=-1, epsilon=LAYER_NORM_EPSILON, name=name)


def dense(units, config, name, activation_fn=None):
    return keras.layers.Dense(units, activation=activation_fn, kernel_initializer=initializer(config), name=name)


def float32_values(*variables):
    """The variables' values as stored (float32 master copies under mixed precision), read as tensors without
    Keras' autocast: the training path casts each weight itself, once per step (see `fused.shared_cast`).
    TensorFlow backend."""
    if AutocastScope is None:  # a Keras without it: plain reads (possibly autocast; still correct, less precise sums)
        return [tf.convert_to_tensor(v.value) for v in variables]
    with AutocastScope(None):
        return [tf.convert_to_tensor(v.value) for v in variables]


def dropout_seed(dropout, training):
    """The seed of `dropout`'s next mask in a training step: its SeedGenerator's next value (int [2]), or None when
    this call drops nothing (not training, or rate 0). Drawing it apart from applying it lets a rematerialized
    block (`AlbertEncoder(remat=True)`) apply the same mask when it recomputes the forward."""
    if not training or dropout.rate <= 0:
        return None
    return dropout.seed_generator.next()


def seeded_dropout(x, dropout, seed):
    """`dropout`'s mask drawn from `seed` (a `dropout_seed` value; None: x unchanged): what the Keras Dropout layer
    computes on the TensorFlow backend (a stateless dropout from its generator's seed, taken modulo 2³¹ − 2 into
    int32), so both give the same mask for the same seed. TensorFlow backend."""
    if seed is None:
        return x

    if seed.dtype != tf.int32:
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    return tf.nn.experimental.stateless_dropout(x, rate=dropout.rate, seed=seed)


def add_bias_and_norm(y, residual, bias, norm, dropout, seed, copies=1):
    """The end of a sublayer in training (fused kernels): LayerNorm(Dropout(y + bias) + residual).

    With no dropout (`seed` None) the bias is added inside the fused LayerNorm kernel.
    Args:
      y, residual: float [..., H] in the compute dtype; bias, gamma/beta of `norm`: float32 [H];
      norm: a dict with "gamma" and "beta"; dropout: the sublayer's keras Dropout layer; seed: its mask's seed
        (`dropout_seed`) or None;
      copies: see `fused.residual_layer_norm` (2: a pair for the next block's matmul and residual).
    """
    if seed is not None:
        y = seeded_dropout(y + ops.cast(bias, y.dtype), dropout, seed)
        bias = None
    return residual_layer_norm(y, residual, norm["gamma"], norm["beta"], LAYER_NORM_EPSILON, bias=bias,
                               copies=copies, fused=True)


def split_input(x):
    """A training-path block input → (the tensor for its first matmul, the tensor for its residual): `x` is a
    tensor, or the pair of equal tensors that the previous block returned with copies=2."""
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)
