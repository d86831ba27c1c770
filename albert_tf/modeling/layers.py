"""Small shared pieces of the ALBERT layers: initializer, activations, LayerNorm (epsilon 1e-12)."""
import math

import keras
from keras import ops

LAYER_NORM_EPSILON = 1e-12


def initializer(config):
    """Truncated normal with the config's initializer_range (0.02), as the original."""
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def gelu_tanh(x):
    """GELU, tanh approximation (the original ALBERT `gelu`)."""
    return 0.5 * x * (1.0 + ops.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * ops.power(x, 3))))


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
