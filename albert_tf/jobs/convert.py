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
import dataclasses

from albert_tf import run_config
from albert_tf.checkpoints import releases
from albert_tf.files import check_input_file
from albert_tf.run_config import option
from albert_tf.text import vocabulary

TARGETS = ("hf", "keras-hub")


@dataclasses.dataclass
class ConvertConfig:
    """Every setting of `albert-tf convert` (see each field's help; `--help` shows the same)."""
    release: str | None = option(
        None, "Google's released weights by name, downloaded (resumed, checked) and cached: "
              f"{', '.join(releases.NAMES)}; or hf:OWNER/NAME, a Hugging Face hub id (needs huggingface_hub). Takes "
              "the place of --from/--checkpoint/--config/--spm-model", metavar="NAME")
    cache_dir: str | None = option(None, f"where --release keeps downloads (default: ${releases.CACHE_ENV}, else "
                                         "~/.cache/albert_tf); a cached release needs no network", metavar="DIR")
    source: str | None = option(None, "tf1: google-research/albert or TF-Hub checkpoint; hf: Hugging Face directory "
                                      "(required without --release)", flag="--from", choices=("tf1", "hf"))
    checkpoint: str | None = option(None, "tf1: the checkpoint prefix (e.g. PATH/model.ckpt-best); hf: the "
                                          "directory (required without --release)")
    config: str | None = option(None, "albert_config.json (default: tf1: albert_config.json beside the checkpoint; "
                                      "hf: the directory's config.json)")
    spm_model: str | None = option(None, "the SentencePiece model to copy into the output as spm.model (default: "
                                         "hf: the directory's spiece.model if any; tf1: none)")
    output: str | None = option(None, "the pretrained-model directory to write (required without --release; with "
                                      "it the default is CACHE/models/NAME, reused when already converted)")
    cased: bool | None = vocabulary.cased_option()
    to: str | None = option(None, "write the other way: the model of --init as a Hugging Face ALBERT directory (hf: "
                                  "config.json, model.safetensors, spiece.model, tokenizer_config.json) or a "
                                  "keras-hub preset (keras-hub: AlbertBackbone + AlbertTokenizer; needs keras-hub) "
                                  "in --output", choices=TARGETS)
    init: str | None = option(None, "with --to: the model to write, a pretrained-model directory (`pretrain`'s, "
                                    "`convert`'s: with its MLM and SOP heads), an `albert-tf export` BASE or BASE/N "
                                    "(the encoder), a released model's name or a Hugging Face ALBERT directory",
                              metavar="HANDLE")

    def __post_init__(self):
        run_config.check_fields(self)


@dataclasses.dataclass
class ConvertResult:
    """What `albert_tf.convert` returns: the pretrained-model directory, its parameters (all, the encoder's; 0 when
    a cached conversion was reused), whether it was reused, and the CLI's exit code."""
    output: str
    parameters: int = 0
    encoder_parameters: int = 0
    reused: bool = False
    exit_code: int = 0


def _check(config):
    """The flag combinations: --release alone, or --from, --checkpoint and --output; or --to, --init and --output."""
    if config.to or config.init:
        _check_outward(config)
        return
    if config.release:
        given = [flag for flag, value in (("--from", config.source), ("--checkpoint", config.checkpoint),
                                          ("--config", config.config), ("--spm-model", config.spm_model)) if value]
        if given:
            raise ValueError(f"--release brings its own checkpoint, config and vocabulary: drop {', '.join(given)}")
        return
    missing = [flag for flag, value in (("--from", config.source), ("--checkpoint", config.checkpoint),
                                        ("--output", config.output)) if not value]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or --release NAME for Google's released weights)")
    if config.cache_dir:
        raise ValueError("--cache-dir goes with --release")
    if config.spm_model:
        check_input_file(config.spm_model, "--spm-model", "spiece.model")


def _check_outward(config):
    if not config.to:
        raise ValueError("--init goes with --to hf|keras-hub (importing takes --release or --from/--checkpoint)")
    missing = [flag for flag, value in (("--init", config.init), ("--output", config.output)) if not value]
    if missing:
        raise ValueError(f"--to {config.to}: {', '.join(missing)} required")
    given = [flag for flag, value in (("--release", config.release), ("--from", config.source),
                                      ("--checkpoint", config.checkpoint), ("--config", config.config),
                                      ("--cache-dir", config.cache_dir)) if value]
    if given:
        raise ValueError(f"--to {config.to} writes the model of --init: drop {', '.join(given)}")
    if config.spm_model:
        check_input_file(config.spm_model, "--spm-model", "spm.model")


def _convert_outward(config):
    from albert_tf.checkpoints import export_to  # pylint: disable=import-outside-toplevel  (TensorFlow)

    model, written = export_to.export(config.init, config.to, config.output, spm_model=config.spm_model,
                                      cased=config.cased)
    parameters, encoder = export_to.parameter_counts(model)
    print(f"wrote {config.output} ({config.to}: {', '.join(written)}): {parameters:,} parameters "
          f"({encoder:,} in the encoder)")
    return ConvertResult(config.output, parameters, encoder)


def convert(config):
    """Converts as `config` (a ConvertConfig) says; progress lines on stderr, the result line on stdout. Returns a
    ConvertResult."""
    _check(config)
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


__all__ = ["ConvertConfig", "ConvertResult", "convert"]
