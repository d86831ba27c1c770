"""The one casing setting of every job that reads or writes text (vocab, create-data, finetune, convert, export).
No TensorFlow."""
from albert_tf import run_config


def cased_option(new_vocabulary=False):
    """The one casing setting of every job that reads or writes text: `--cased` / `--uncased` (the field `cased`:
    True / False / None when neither, which means as recorded beside the vocabulary, else uncased). `new_vocabulary`:
    the help of `vocab`, which makes the vocabulary and writes its record (default uncased)."""
    if new_vocabulary:
        return run_config.option(
            None, "the new vocabulary keeps case (default: lowercased); recorded in PREFIX.casing.json, which every "
                  "later step follows", negative="--uncased",
            negative_help="the new vocabulary is lowercased (the default); recorded in PREFIX.casing.json")
    return run_config.option(
        None, "the vocabulary keeps case (default: as recorded beside the SentencePiece model, else uncased)",
        negative="--uncased",
        negative_help="the vocabulary is lowercased (default: as recorded beside the SentencePiece model, else "
                      "uncased)")


__all__ = ["cased_option"]
