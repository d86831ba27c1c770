"""The text-normalization record of a SentencePiece model: how text is normalized for it, and which model it is.

Beside each SentencePiece model X.model (`albert-tf vocab`'s PREFIX.model, a model directory's or an export's
spm.model) a small JSON file X.casing.json:

    {"lower_case": true, "keep_accents": false, "sha256": "<hex SHA-256 of X.model's bytes>"}

lower_case: text is lowercased for it (an uncased vocabulary, ALBERT's releases; null: not known, as for a model
copied without a record, which readers take as uncased unless a flag says otherwise); keep_accents: accents and voicing
marks are kept (NFKC) instead of the original's NFKD with combining marks dropped (albert_tf.text.normalize);
sha256: the model's fingerprint, which records (create-data's record-count index), model directories and exports
carry so that a vocabulary is never paired with another one's data. A record without "keep_accents" (an older
release's) means false; one without "sha256" is not tied to its model's bytes. A record whose fingerprint is not
its model's is refused: it belongs to another model (a set written half-way or mixed by hand).

No TensorFlow is imported for local paths.
"""
import dataclasses
import hashlib
import json
import os

from albert_tf import files

CASING_SUFFIX = ".casing.json"


@dataclasses.dataclass(frozen=True)
class TextRecord:
    """What a model's record says: lower_case (bool or None: not recorded), keep_accents (bool), sha256 (the
    model's fingerprint, hex, or None: not recorded), path (the record's file, for messages)."""
    lower_case: object = None
    keep_accents: bool = False
    sha256: object = None
    path: str = ""


def casing_path(spm_model):
    """The record of a SentencePiece model: X.model → X.casing.json (spm.model → spm.casing.json)."""
    spm_model = os.fspath(spm_model)
    stem = spm_model[: -len(".model")] if spm_model.endswith(".model") else spm_model
    return stem + CASING_SUFFIX


def fingerprint(model_bytes):
    """The fingerprint of a SentencePiece model: the hex SHA-256 of its serialized bytes."""
    return hashlib.sha256(bytes(model_bytes)).hexdigest()


def read_model_bytes(spm_model):
    """The bytes of a SentencePiece model file (local or gs://)."""
    path = os.fspath(spm_model)
    if files.is_url(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def file_fingerprint(spm_model):
    """The fingerprint of the SentencePiece model file `spm_model`."""
    return fingerprint(read_model_bytes(spm_model))


def record_text(lower_case, keep_accents, model_bytes):
    """The JSON text of a record for a model of `model_bytes` (lower_case None: not known, written as null)."""
    return json.dumps({"lower_case": None if lower_case is None else bool(lower_case),
                       "keep_accents": bool(keep_accents), "sha256": fingerprint(model_bytes)}) + "\n"


def write_text_record(spm_model, lower_case, keep_accents=False, model_bytes=None):
    """Records beside `spm_model` its normalization and fingerprint (atomically); returns the record's path.
    model_bytes: the model's bytes (default: read from `spm_model`)."""
    path = casing_path(spm_model)
    data = read_model_bytes(spm_model) if model_bytes is None else model_bytes
    files.atomic_write_text(path, record_text(lower_case, keep_accents, data))
    return path


def read_text_record(spm_model, model_bytes=None):
    """The TextRecord of the SentencePiece model `spm_model` (all None / False when it has no record). With
    `model_bytes` (the model's bytes, as a tokenizer read them) a recorded fingerprint is checked against them: a
    record of another model is a ValueError naming both files."""
    path = casing_path(spm_model)
    if not files.exists(path):
        return TextRecord(path=path)
    try:
        data = json.loads(files.read_text(path))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {{\"lower_case\": true or false, ...}}, not JSON of that form")
    lower_case, keep_accents, sha256 = data.get("lower_case"), data.get("keep_accents", False), data.get("sha256")
    if not isinstance(lower_case, bool) and not (lower_case is None and "sha256" in data):
        raise ValueError(f"{path}: expected {{\"lower_case\": true or false}}")
    if not isinstance(keep_accents, bool):
        raise ValueError(f"{path}: expected \"keep_accents\": true or false, got {keep_accents!r}")
    if sha256 is not None and not isinstance(sha256, str):
        raise ValueError(f"{path}: expected \"sha256\": the model's hex SHA-256, got {sha256!r}")
    if sha256 and model_bytes is not None and fingerprint(model_bytes) != sha256:
        raise ValueError(f"{path} belongs to another SentencePiece model: its sha256 {sha256[:12]}… is not "
                         f"{os.fspath(spm_model)}'s ({fingerprint(model_bytes)[:12]}…); the vocabulary files were "
                         "mixed: train it again (albert-tf vocab --overwrite) or put back the matching files")
    return TextRecord(lower_case, keep_accents, sha256, path)


def read_casing(spm_model):
    """True (uncased: lowercase), False (cased) or None (no record) for the SentencePiece model `spm_model`."""
    return read_text_record(spm_model).lower_case


def write_casing(spm_model, lower_case):
    """`write_text_record` without keeping accents (the original's normalization); returns the record's path."""
    return write_text_record(spm_model, lower_case)


def resolve_lower_case(recorded, cased_flag, source, flags=("--cased", "--uncased")):
    """The lowercasing to tokenize with: the `--cased`/`--uncased` flag (cased_flag True / False / None), else the
    recorded casing (`read_casing`, or an export's config), else uncased (ALBERT's releases). A flag that
    contradicts the record is a ValueError naming both (`source`: where the record was read; `flags`: how the
    two settings are spelled where they were given)."""
    if cased_flag is None:
        return True if recorded is None else recorded
    wanted = not cased_flag
    if recorded is not None and recorded != wanted:
        said, was = (flags[0], "uncased (lowercased)") if cased_flag else (flags[1], "cased")
        raise ValueError(f"{said} contradicts {source}: its vocabulary is recorded as {was}; drop the flag or "
                         "use the vocabulary the model was trained with")
    return wanted


def resolve_keep_accents(recorded, flag, source, flags=("--keep-accents", "keep_accents=False")):
    """Whether to keep accents: as recorded (`recorded`: a bool, False when the record has none or there is no
    record). `flag` (True / False / None: not given) must agree with it; a contradiction is a ValueError naming
    `source` (where the record was read)."""
    if flag is None or bool(flag) == bool(recorded):
        return bool(recorded)
    said, was = ((flags[0], "stripping accents (NFKD, combining marks dropped)") if flag
                 else (flags[1], "keeping accents (NFKC)"))
    raise ValueError(f"{said} contradicts {source}: its vocabulary is recorded as {was}; drop the flag or use the "
                     "vocabulary the model was trained with (the setting is chosen when `albert-tf vocab` trains it)")
