"""`albert-tf export`'s settings and result: `ExportConfig`, `ExportResult` (the call: albert_tf/jobs/export.py; the
SavedModel: albert_tf/serving/). Ranges are checked when the config is made; the handle, the vocabulary and the
output when the export reads them. No TensorFlow."""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.runtime import precision
from albert_tf.settings.casing import cased_option


@dataclasses.dataclass
class ExportConfig:
    """Every setting of `albert-tf export` (see each field's help; `--help` shows the same)."""
    init: str = option(help="the pretrained model to export: a pretrained-model directory (`pretrain`'s "
                            "--model-dir, `convert`'s --output), an export BASE[/N] (exported again), a released "
                            "model's name (albert_base_v2, hf:OWNER/NAME) or a Hugging Face ALBERT directory",
                       metavar="HANDLE", aliases=("--model",))
    output: str = option(help="writes BASE/N (TF Serving's layout)", metavar="BASE")
    version: int | None = option(None, "N (default: the next free integer)")
    max_seq_length: int = option(128, "L, the packed length")
    spm_model: str | None = option(None, "the SentencePiece model (default: the --init's own)", metavar="PATH")
    cased: bool | None = cased_option()
    dtype: str = option("float32", "the encoder's compute dtype in the graph; variables and outputs stay float32. "
                                   "float32 gives the Keras model's outputs; bfloat16 is faster where the serving "
                                   "device's bfloat16 matmuls are (docs/serving.md has its measured difference); auto "
                                   "picks the faster on this machine (a GPU: bfloat16 from compute capability 8.0; a "
                                   "CPU: a short matmul probe, cached)", choices=precision.CHOICES)
    overwrite: bool = option(False, "replace an existing BASE/N")
    no_warmup: bool = option(False, "write no warm-up records (they need tensorflow-serving-api)")

    def __post_init__(self):
        run_config.check_fields(self)
        run_config.check_range(self, ("max_seq_length",), lambda value: value >= 3, "at least 3")  # [CLS] a token [SEP]
        run_config.check_range(self, ("version",), lambda value: value >= 1, "a positive integer")


@dataclasses.dataclass
class ExportResult:
    """What `albert_tf.export` returns: the SavedModel written (BASE/N) and the CLI's exit code."""
    path: str
    exit_code: int = 0


__all__ = ["ExportConfig", "ExportResult"]
