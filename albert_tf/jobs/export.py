"""`albert-tf export`: a SavedModel for TF Serving that takes raw text (the work: albert_tf/serving/export.py and
albert_tf/serving/signatures.py).

    result = albert_tf.export(albert_tf.ExportConfig(init="work/model", output="work/export"))
    result.path                                     # work/export/1, ready for TF Serving

Writes BASE/N/ atomically; BASE/N/assets.extra/ keeps albert_config.json (with lower_case, max_seq_length and the
compute dtype) and spm.model, so an export is self-contained (`load_encoder`, `finetune --init BASE[/N]`).
--init takes any handle (albert_tf.checkpoints.handles): a model dir, an export (exported again: another length,
dtype or warm-up), a released model's name, a Hugging Face ALBERT directory.
"""
import dataclasses

from albert_tf import run_config
from albert_tf.files import check_input_file, check_output_dir
from albert_tf.run_config import option
from albert_tf.runtime import precision
from albert_tf.text import vocabulary


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
    cased: bool | None = vocabulary.cased_option()
    dtype: str = option("float32", "the encoder's compute dtype in the graph; variables and outputs stay float32. "
                                   "float32 gives the Keras model's outputs; bfloat16 is faster where the serving "
                                   "device's bfloat16 matmuls are (docs/serving.md has its measured difference); auto "
                                   "picks the faster on this machine (a GPU: bfloat16 from compute capability 8.0; a "
                                   "CPU: a short matmul probe, cached)", choices=precision.CHOICES)
    overwrite: bool = option(False, "replace an existing BASE/N")
    no_warmup: bool = option(False, "write no warm-up records (they need tensorflow-serving-api)")

    def __post_init__(self):
        run_config.check_fields(self)


@dataclasses.dataclass
class ExportResult:
    """What `albert_tf.export` returns: the SavedModel written (BASE/N) and the CLI's exit code."""
    path: str
    exit_code: int = 0


def export(config):
    """Exports as `config` (an ExportConfig) says; prints the path written. Returns an ExportResult."""
    from albert_tf.checkpoints import handles  # pylint: disable=import-outside-toplevel  (TensorFlow)
    from albert_tf.serving import export as work  # pylint: disable=import-outside-toplevel

    check_output_dir(config.output, "--output")  # the flags before --init is read (a release fetched)
    if config.spm_model:
        check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)
    source = handles.resolve_init(config.init, flag="--init")
    path = work.export_encoder(config.init, config.output, version=config.version, seq_length=config.max_seq_length,
                               spm_model=config.spm_model, overwrite=config.overwrite, warmup=not config.no_warmup,
                               lower_case=None if config.cased is None else not config.cased, dtype=config.dtype,
                               source=source)
    print(f"albert-tf export: wrote {path}")
    return ExportResult(path)


__all__ = ["ExportConfig", "ExportResult", "export"]
