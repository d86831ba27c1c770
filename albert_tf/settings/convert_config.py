"""`albert-tf convert`'s settings and result: `ConvertConfig`, `ConvertResult` (the call: albert_tf/jobs/convert.py;
the work: albert_tf/checkpoints/). The released models' names live here, so that `--help` lists them without
importing the downloader (albert_tf/checkpoints/releases.py). The flag combinations and --release's name are checked
when the config is made; the files when the conversion reads them. No TensorFlow."""
import dataclasses
import os
import re

from albert_tf import files, run_config
from albert_tf.layout import CONFIG_FILE
from albert_tf.run_config import option
from albert_tf.settings.casing import cased_option

CACHE_ENV = "ALBERT_TF_CACHE"  # where --release keeps downloads, when set
SIZES = ("base", "large", "xlarge", "xxlarge")  # Google's released ALBERT sizes
NAMES = tuple(f"albert_{size}_{version}" for version in ("v1", "v2") for size in SIZES)  # --release's names
TARGETS = ("hf", "keras-hub")
HF_PREFIX = "hf:"  # --release hf:OWNER/NAME: a Hugging Face hub id


def canonical_name(name):
    """'albert_base_v2' (also spelled 'albert-base-v2') → 'albert_base_v2'; 'hf:OWNER/NAME' is kept. Anything else:
    ValueError listing the names."""
    name = str(name).strip()
    if name.startswith(HF_PREFIX):
        if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name[len(HF_PREFIX):]):
            raise ValueError(f"--release {name}: expected hf:OWNER/NAME (a Hugging Face hub id)")
        return name
    canonical = name.replace("-", "_").lower()
    if canonical not in NAMES:
        raise ValueError(f"--release {name}: not a released model; expected one of {', '.join(NAMES)} or "
                         "hf:OWNER/NAME")
    return canonical


def source_config(source, checkpoint, config=None):
    """The config file that `--from SOURCE --checkpoint CHECKPOINT [--config CONFIG]` reads: CONFIG, else tf1's
    albert_config.json beside the checkpoint or hf's config.json in its directory; checked to be there (no
    TensorFlow for local paths), each refusal one line naming the flag."""
    if config:
        files.check_input_file(config, "--config", CONFIG_FILE)
    if source == "tf1":
        beside = os.path.join(os.path.dirname(checkpoint), CONFIG_FILE)
        if config is None and not files.exists(beside):
            raise ValueError(f"--config is required: no {CONFIG_FILE} beside {checkpoint}")
        return config or beside
    if source == "hf":
        if not files.isdir(checkpoint):
            raise FileNotFoundError(f"--checkpoint {checkpoint}: not a directory (a Hugging Face ALBERT directory "
                                    "holds config.json and model.safetensors)")
        hf_config = os.path.join(checkpoint, "config.json")
        if config is None and not files.exists(hf_config):
            raise FileNotFoundError(f"{hf_config}: no such file (a Hugging Face ALBERT directory holds config.json "
                                    "and model.safetensors; or give --config)")
        return config or hf_config
    raise ValueError(f"--from must be 'tf1' or 'hf', got {source!r}")


@dataclasses.dataclass
class ConvertConfig:
    """Every setting of `albert-tf convert` (see each field's help; `--help` shows the same)."""
    release: str | None = option(
        None, "Google's released weights by name, downloaded (resumed, checked) and cached: "
              f"{', '.join(NAMES)}; or hf:OWNER/NAME, a Hugging Face hub id (needs huggingface_hub). Takes "
              "the place of --from/--checkpoint/--config/--spm-model", metavar="NAME")
    cache_dir: str | None = option(None, f"where --release keeps downloads (default: ${CACHE_ENV}, else "
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
    cased: bool | None = cased_option()
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
        if self.to or self.init:
            self._check_outward()
            return
        if self.release:
            canonical_name(self.release)
            given = self._given("source", "checkpoint", "config", "spm_model")
            if given:
                raise ValueError("--release brings its own checkpoint, config and vocabulary: drop "
                                 f"{', '.join(given)}")
            return
        missing = [run_config.flag_for(self, name) for name in ("source", "checkpoint", "output")
                   if not getattr(self, name)]
        if missing:
            raise ValueError(f"{', '.join(missing)} required (or --release NAME for Google's released weights)")
        if self.cache_dir:
            raise ValueError(f"{run_config.flag_for(self, 'cache_dir')} goes with --release")

    def _check_outward(self):
        """The combinations of `--to`: --init and --output, none of the importing flags."""
        if not self.to:
            raise ValueError("--init goes with --to hf|keras-hub (importing takes --release or --from/--checkpoint)")
        missing = [run_config.flag_for(self, name) for name in ("init", "output") if not getattr(self, name)]
        if missing:
            raise ValueError(f"--to {self.to}: {', '.join(missing)} required")
        given = self._given("release", "source", "checkpoint", "config", "cache_dir")
        if given:
            raise ValueError(f"--to {self.to} writes the model of --init: drop {', '.join(given)}")

    def _given(self, *names):
        """The flags of the fields `names` that are set."""
        return [run_config.flag_for(self, name) for name in names if getattr(self, name)]


@dataclasses.dataclass
class ConvertResult:
    """What `albert_tf.convert` returns: the pretrained-model directory, its parameters (all, the encoder's; 0 when
    a cached conversion was reused), whether it was reused, and the CLI's exit code."""
    output: str
    parameters: int = 0
    encoder_parameters: int = 0
    reused: bool = False
    exit_code: int = 0


__all__ = ["ConvertConfig", "ConvertResult", "TARGETS", "NAMES", "SIZES", "CACHE_ENV", "HF_PREFIX", "canonical_name",
           "source_config"]
