"""`albert-tf export`: a SavedModel for TF Serving that takes raw text (the work:
albert_tf/serving/encoder_export.py and albert_tf/serving/signatures.py).

    result = albert_tf.export(albert_tf.ExportConfig(init="work/model", output="work/export"))
    result.path                                     # work/export/1, ready for TF Serving

Writes BASE/N/ atomically; BASE/N/assets.extra/ keeps albert_config.json (with lower_case, max_seq_length and the
compute dtype) and spm.model, so an export is self-contained (`load_encoder`, `finetune --init BASE[/N]`).
--init takes any handle (albert_tf.checkpoints.handles): a model dir, an export (exported again: another length,
dtype or warm-up), a released model's name, a Hugging Face ALBERT directory.
"""
from albert_tf import files
from albert_tf.checkpoints import releases
from albert_tf.settings.export_config import ExportConfig, ExportResult
from albert_tf.text import vocabulary


def preflight(config):
    """The flags' files before --init is read (a release fetched) and before TensorFlow's import: the output is not
    a file, --spm-model is a file, --init names a directory or a release (gs:// paths: when read)."""
    if files.is_local(config.output):
        files.check_output_dir(config.output, "--output")
    if config.spm_model and files.is_local(config.spm_model):
        files.check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)
    if files.is_local(config.init):
        releases.check_handle(config.init)


def export(config):
    """Exports as `config` (an ExportConfig) says; prints the path written. Returns an ExportResult."""
    preflight(config)
    from albert_tf.checkpoints import handles  # pylint: disable=import-outside-toplevel  (TensorFlow)
    from albert_tf.serving import encoder_export as work  # pylint: disable=import-outside-toplevel

    files.check_output_dir(config.output, "--output")  # gs:// too, as the run reads them
    if config.spm_model:
        files.check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)
    source = handles.resolve_init(config.init, flag="--init")  # once: the export reads the encoder from it
    path = work.export_encoder(source, config.output, version=config.version, seq_length=config.max_seq_length,
                               spm_model=config.spm_model, overwrite=config.overwrite, warmup=not config.no_warmup,
                               cased=config.cased, dtype=config.dtype)
    print(f"albert-tf export: wrote {path}")
    return ExportResult(path)


__all__ = ["ExportConfig", "ExportResult", "export", "preflight"]
