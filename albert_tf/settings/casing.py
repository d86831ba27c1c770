"""The one casing setting of every job that reads or writes text (vocab, create-data, finetune, convert, export).
No TensorFlow."""
from albert_tf import run_config


def cased_option():
    """The one casing setting of every job that reads or writes text: `--cased` / `--uncased` (the field `cased`:
    True / False / None when neither, which means as recorded beside the vocabulary, else uncased)."""
    return run_config.option(
        None, "the vocabulary keeps case (default: as recorded beside the SentencePiece model, else uncased)",
        negative="--uncased",
        negative_help="the vocabulary is lowercased (default: as recorded beside the SentencePiece model, else "
                      "uncased)")


__all__ = ["cased_option"]
