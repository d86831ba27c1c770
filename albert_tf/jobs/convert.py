"""`albert-tf convert`: Google's released TF1 / TF-Hub checkpoints (by name: `--release albert_base_v2`) and Hugging
Face ALBERT directories → a pretrained-model directory (the work: albert_tf/checkpoints/convert.py); and the other
way, `--to hf` / `--to keras-hub`: any handle (`--init`: a model dir, an export, a release name, an HF directory) →
a Hugging Face ALBERT directory (albert_tf/checkpoints/to_hf.py) or a keras-hub preset
(albert_tf/checkpoints/to_keras_hub.py).

    result = albert_tf.convert(albert_tf.ConvertConfig(release="albert_base_v2"))
    result = albert_tf.convert(albert_tf.ConvertConfig(source="hf", checkpoint="hf_dir", output="albert_dir"))
    albert_tf.AlbertEncoder.from_pretrained(result.output)
    albert_tf.convert(albert_tf.ConvertConfig(init="model", to="hf", output="hf_dir"))    # transformers reads it
    albert_tf.convert(albert_tf.ConvertConfig(init="model", to="keras-hub", output="kh"))  # keras-hub's from_preset
"""
from albert_tf import files
from albert_tf.checkpoints import releases
from albert_tf.messages import say
from albert_tf.settings.convert_config import ConvertConfig, ConvertResult, source_config


def preflight(config):
    """The files the flags name, before anything is read or written and before TensorFlow's import (local paths;
    ConvertConfig checked the flags themselves): --spm-model, --init (with --to), --checkpoint and --config."""
    if config.spm_model and files.is_local(config.spm_model):
        files.check_input_file(config.spm_model, "--spm-model", "spm.model" if config.to else "spiece.model")
    if config.to and files.is_local(config.init):
        releases.check_handle(config.init)
    if config.source and files.is_local(config.checkpoint, config.config):
        source_config(config.source, config.checkpoint, config.config)


def _convert_outward(config):
    from albert_tf.checkpoints import export_to, hf_tokenizer  # pylint: disable=import-outside-toplevel  (TensorFlow)

    written, parameters, encoder, spm_model = export_to.export(config.init, config.to, config.output,
                                                               spm_model=config.spm_model, cased=config.cased)
    if config.to == "hf" and spm_model:
        say("note", hf_tokenizer.unexpressed_rules(spm_model))
    print(f"wrote {config.output} ({config.to}: {', '.join(written)}): {parameters:,} parameters "
          f"({encoder:,} in the encoder)")
    return ConvertResult(config.output, parameters, encoder)


def convert(config):
    """Converts as `config` (a ConvertConfig) says; progress lines on stderr, the result line on stdout. Returns a
    ConvertResult."""
    preflight(config)
    if config.to:
        return _convert_outward(config)
    from albert_tf.checkpoints import convert as work  # pylint: disable=import-outside-toplevel  (TensorFlow)

    log = work.log_to_stderr
    if config.release:
        output, model = work.convert_release_model(config.release, config.output, config.cache_dir, config.cased,
                                                   log)
    else:
        output = config.output
        model = work.convert(config.source, config.checkpoint, output, config=config.config,
                             spm_model=config.spm_model, log=log, cased=config.cased)
    if model is None:
        print(f"{output}: already converted")
        return ConvertResult(output, reused=True)
    parameters, encoder = work.parameter_counts(model)
    print(f"wrote {output}: {parameters:,} parameters ({encoder:,} in the encoder)")
    return ConvertResult(output, parameters, encoder)


__all__ = ["ConvertConfig", "ConvertResult", "convert", "preflight"]
