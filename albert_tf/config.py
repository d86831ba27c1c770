"""AlbertConfig: the original `albert_config.json` keys, with validation.

The file format is the one google-research/albert released, so released configs load as they are and configs we
write load in the original code.  One addition of ours, `sharing` (the paper's Table 4 cross-layer sharing
strategies), is written only when it differs from the original model's ("all").
"""
import dataclasses
import json
import os

from albert_tf import files

#: The config's file name inside a pretrained-model directory, a pretraining --model-dir and an export's
#: assets.extra/ (the original's name).
from albert_tf.layout import CONFIG_FILE  # pylint: disable=unused-import  (its one spelling)

# Keys present in the released albert_config.json files that the model does not use.
_IGNORED_RELEASED_KEYS = frozenset(
    {"down_scale_factor", "net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep"}
)

SHARING_MODES = ("all", "attention", "ffn", "none")
HIDDEN_ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "relu", "tanh", "linear", "swish", "silu")


def configs_dir():
    """The folder holding the paper's model configs (albert_base.json, ...): the presets of `from_preset`."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


@dataclasses.dataclass
class AlbertConfig:
    """Hyperparameters of an ALBERT model, in the original albert_config.json names.

    Attributes:
      vocab_size: V, the SentencePiece vocabulary size.
      embedding_size: E, the width of the factorized word embedding (E ≪ H in the paper).
      hidden_size: H, the transformer width.
      num_hidden_layers: L, the number of applied transformer layers.
      num_hidden_groups: G, the number of distinct parameter groups; layer i uses group int(i·G/L).
      inner_group_num: the number of transformer blocks inside each group, applied in order.
      num_attention_heads: heads per self-attention; must divide hidden_size.
      intermediate_size: the FFN inner width.
      hidden_act: FFN and MLM-transform activation; "gelu" is the tanh approximation, as in the original
        ("gelu_new" is the same); "gelu_exact" is the erf form.
      hidden_dropout_prob: dropout on embeddings and block outputs, in [0, 1).
      attention_probs_dropout_prob: dropout on attention probabilities, in [0, 1).
      max_position_embeddings: the longest sequence the position table covers.
      type_vocab_size: number of segment (token type) ids.
      initializer_range: stddev of the truncated-normal initializer.
      sharing: which parameters the layers of a group share (paper Table 4): "all" (the original ALBERT),
        "attention" (only attention shared, FFN per layer), "ffn" (only FFN shared), "none" (BERT-style).
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    sharing: str = "all"

    def __post_init__(self):
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self, source=None):
        """Raises ValueError naming the field (and `source`, the file, when given) for any bad value."""
        where = f"{source}: " if source else ""

        def fail(field, message):
            raise ValueError(f"{where}AlbertConfig field '{field}': {message}")

        int_fields = (
            "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
            "inner_group_num", "num_attention_heads", "intermediate_size", "max_position_embeddings",
            "type_vocab_size",
        )
        for name in int_fields:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                fail(name, f"expected a positive integer, got {value!r}")
            if value <= 0:
                fail(name, f"expected a positive integer, got {value}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                fail(name, f"expected a probability in [0, 1), got {value!r}")
        if (isinstance(self.initializer_range, bool) or not isinstance(self.initializer_range, (int, float))
                or self.initializer_range <= 0):
            fail("initializer_range", f"expected a positive number, got {self.initializer_range!r}")
        if self.hidden_size % self.num_attention_heads:
            fail("hidden_size", f"{self.hidden_size} is not divisible by num_attention_heads="
                                f"{self.num_attention_heads}")
        if self.num_hidden_layers % self.num_hidden_groups:
            fail("num_hidden_layers", f"{self.num_hidden_layers} is not divisible by num_hidden_groups="
                                      f"{self.num_hidden_groups}")
        if self.hidden_act not in HIDDEN_ACTIVATIONS:
            fail("hidden_act", f"expected one of {', '.join(HIDDEN_ACTIVATIONS)}, got {self.hidden_act!r}")
        if self.sharing not in SHARING_MODES:
            fail("sharing", f"expected one of {', '.join(SHARING_MODES)}, got {self.sharing!r}")

    # ------------------------------------------------------------------ derived
    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    def check_seq_length(self, seq_length):
        """Refuses a --max-seq-length `seq_length` longer than this config's positions, in one line."""
        if seq_length > self.max_position_embeddings:
            raise ValueError(f"--max-seq-length {seq_length} exceeds the config's max_position_embeddings "
                             f"{self.max_position_embeddings}")

    def group_of_layer(self, layer_index):
        """The parameter group that applied layer `layer_index` uses: int(i·G/L), as the original."""
        return int(layer_index * self.num_hidden_groups / self.num_hidden_layers)

    def without_dropout(self):
        """A copy with both dropout probabilities set to 0 (the v2 recipe; the paper's dropout removal)."""
        return dataclasses.replace(self, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def with_overrides(self, overrides, source="--set"):
        """A copy with `overrides` ({key: value}, e.g. {"vocab_size": 8000}) applied, then validated: an unknown key
        or a bad value is refused with one line naming the key and `source`."""
        known = [f.name for f in dataclasses.fields(self)]
        for key in overrides:
            if key not in known:
                raise ValueError(f"{source} {key}=...: {key!r} is not an AlbertConfig key; expected one of "
                                 f"{', '.join(known)}")
        changed = self.__class__.__new__(self.__class__)  # validated once, with `source` in its message
        changed.__dict__.update({**self.__dict__, **overrides})
        changed.validate(source)
        return changed

    # ------------------------------------------------------------------ (de)serialization
    @classmethod
    def from_dict(cls, values, source=None):
        """Builds a config from a dict of albert_config.json keys.

        The released files' unused keys are accepted and dropped; any other unknown key is an error naming it.
        """
        where = f"{source}: " if source else ""
        if not isinstance(values, dict):
            raise ValueError(f"{where}expected a JSON object of albert_config.json keys, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in values if k not in known and k not in _IGNORED_RELEASED_KEYS)
        if unknown:
            raise ValueError(
                f"{where}unknown AlbertConfig key(s) {', '.join(repr(k) for k in unknown)}; expected keys are "
                f"{', '.join(sorted(known))} (and the released files' unused "
                f"{', '.join(sorted(_IGNORED_RELEASED_KEYS))})"
            )
        kwargs = {k: v for k, v in values.items() if k in known}
        obj = cls.__new__(cls)
        defaults = cls()
        for f in dataclasses.fields(cls):
            setattr(obj, f.name, kwargs.get(f.name, getattr(defaults, f.name)))
        obj.validate(source)
        return obj

    @classmethod
    def from_json_file(cls, path):
        """Reads an albert_config.json (local path or any tf.io.gfile URL such as gs://)."""
        path = os.fspath(path)
        if not files.exists(path):
            raise FileNotFoundError(f"{path}: no such config file")
        text = files.read_text(path)
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
        return cls.from_dict(values, source=path)

    @classmethod
    def from_preset(cls, name):
        """One of the paper's models: albert_base, albert_large, albert_xlarge, albert_xxlarge, their _v1
        variants (dropout 0.1), or albert_tiny (for tests)."""
        path = os.path.join(configs_dir(), f"{name}.json")
        if not os.path.exists(path):
            names = sorted(p[:-5] for p in os.listdir(configs_dir()) if p.endswith(".json"))
            raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(names)}")
        return cls.from_json_file(path)

    def to_dict(self):
        values = dataclasses.asdict(self)
        if values["sharing"] == "all":  # keep written files loadable by the original code
            del values["sharing"]
        return values

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes albert_config.json atomically (temp name, then rename)."""
        files.atomic_write_text(os.fspath(path), self.to_json_string())


def load_config(config):
    """Accepts an AlbertConfig, a dict, a preset name or a path to albert_config.json (or a directory holding one)."""
    if isinstance(config, AlbertConfig):
        return config
    if isinstance(config, dict):
        return AlbertConfig.from_dict(config)
    config = os.fspath(config)
    if files.isdir(config):
        return read_config(config)
    if config.endswith(".json") or "/" in config:
        return AlbertConfig.from_json_file(config)
    return AlbertConfig.from_preset(config)


def config_path(directory):
    """DIR/albert_config.json."""
    return os.path.join(os.fspath(directory), CONFIG_FILE)


def read_config(directory):
    """The AlbertConfig of a directory holding albert_config.json (a pretrained-model directory, a pretraining
    --model-dir); a clear error when the directory or its config is missing. No TensorFlow import for local paths."""
    directory = os.fspath(directory)
    if not files.isdir(directory):
        raise FileNotFoundError(f"{directory}: no such pretrained-model directory")
    path = config_path(directory)
    if not files.exists(path):
        raise FileNotFoundError(f"{directory}: not a pretrained-model directory (no {CONFIG_FILE}; one is written "
                                "by `albert-tf convert` and `albert-tf pretrain`)")
    return AlbertConfig.from_json_file(path)


def resolve(name_or_path, overrides=None, vocab_size_of=None):
    """The AlbertConfig of a run: `name_or_path` (a preset name, a file or a directory: load_config) with `overrides`
    ({key: value}, `--set`) applied and validated. vocab_size "auto" is `vocab_size_of()` (the size of the run's
    --spm-model: albert_tf.text.vocabulary.model_config passes it)."""
    overrides = dict(overrides or {})
    if overrides.get("vocab_size") == "auto":
        if vocab_size_of is None:
            raise ValueError("--set vocab_size=auto takes the vocabulary's size from --spm-model; give --spm-model "
                             "or a number")
        overrides["vocab_size"] = vocab_size_of()
    return load_config(name_or_path).with_overrides(overrides)
