"""`albert-tf convert --to hf|keras-hub`: the model a handle holds (a pretrained-model directory or an export,
albert_tf.checkpoints.load.load_model) written for another library: Hugging Face transformers (to_hf.py) or
keras-hub (to_keras_hub.py), with its vocabulary and casing."""
import json

from albert_tf import files
from albert_tf.checkpoints import handles, to_hf, to_keras_hub
from albert_tf.checkpoints.load import load_model
from albert_tf.runtime import leftovers
from albert_tf.text import vocabulary


def keep_accents(spm_model):
    """Whether text keeps its accents for `spm_model`: the vocabulary record's "keep_accents" when it has one, else
    False (ALBERT's normalization strips combining marks)."""
    path = vocabulary.casing_path(spm_model)
    if not files.exists(path):
        return False
    try:
        return bool(json.loads(files.read_text(path)).get("keep_accents", False))
    except (ValueError, AttributeError):
        return False


def export(init, target, output, spm_model=None, cased=None):
    """Writes the model of `init` for `target` ("hf" or "keras-hub") into the new directory `output`; `spm_model`:
    the vocabulary when `init` holds none (else `init`'s); `cased`: the --cased/--uncased flag, weighed against the
    vocabulary's record. What the target cannot hold is refused (ValueError, one line) from the handle's config,
    before the model is read and anything is written. Returns (the file names written, the parameters written,
    those of the encoder among them: for keras-hub the backbone, which holds no pretraining heads), counted as the
    target's own loader counts them, and the vocabulary written (None without one)."""
    if target not in ("hf", "keras-hub"):
        raise ValueError(f"--to must be 'hf' or 'keras-hub', got {target!r}")
    source = handles.resolve_init(init, flag="--init")
    (to_hf.check_hf if target == "hf" else to_keras_hub.check_keras_hub)(source.config)  # before the model is read
    model, source = load_model(source)
    spm_model = spm_model or source.spm_model
    if spm_model:
        vocabulary.check_vocabulary(source.config, spm_model)
    recorded = (vocabulary.read_casing(spm_model) if spm_model and spm_model != source.spm_model
                else source.lower_case)
    lower_case = vocabulary.resolve_lower_case(recorded, cased, spm_model or init)
    files.check_output_dir(output, "--output")
    # what a killed conversion into `output` left goes first
    with leftovers.new_directory(output, "--output", work=() if target == "hf" else (to_keras_hub.WORK,)):
        if target == "hf":
            written, parameters, encoder = to_hf.write_hf(
                model, output, spm_model, lower_case=lower_case,
                keep_accents=keep_accents(spm_model) if spm_model else False)
        else:
            written, parameters = to_keras_hub.write_keras_hub(model, output, spm_model)
            encoder = parameters
    return written, parameters, encoder, spm_model
