"""`albert-tf vocab`'s settings and result: `VocabConfig`, `VocabResult` (the call: albert_tf/jobs/vocab.py; the
training: albert_tf/data/vocab.py). No TensorFlow."""
import argparse
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.settings.casing import cased_option
from albert_tf.settings.defaults import SEED

DEFAULT_VOCAB_SIZE = 30000  # the released models' vocabulary
DEFAULT_MAX_SENTENCES = 10_000_000  # the original's --input_sentence_size
LINE_LIMIT = 4192  # bytes: SentencePiece's default max_sentence_length; longer lines are cut (sample_sentences)
# The pieces every vocabulary holds besides <pad> and <unk> (SentencePiece's control and user-defined symbols)
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
RESERVED_IDS = 2 + len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS)  # <pad>, <unk>, the symbols


def check_vocab_size(vocab_size):
    """Refuses a --vocab-size that leaves no room for learned pieces beside the reserved ids (one line)."""
    if vocab_size <= RESERVED_IDS:
        raise ValueError(f"--vocab-size {vocab_size} is too small: the special and user-defined symbols alone take "
                         f"{RESERVED_IDS} ids")


def vocab_size_argument(text):
    """--vocab-size: a number of pieces or "auto" (a number too small is refused by check_vocab_size)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of pieces or auto, got {text!r}") from None


@dataclasses.dataclass
class VocabConfig:
    """Every setting of `albert-tf vocab` (see each field's help; `--help` shows the same)."""
    input: str = option(help="comma-separated globs of UTF-8 text files (local or gs://), one sentence per line; "
                             f"blank lines are ignored, lines over {LINE_LIMIT} bytes are cut into "
                             "sentences", metavar="GLOBS")
    output_prefix: str = option(help="writes PREFIX.model, PREFIX.vocab and PREFIX.casing.json (a file-name prefix, "
                                     "e.g. work/spm, not a directory)", metavar="PREFIX")
    vocab_size: int | str = option(DEFAULT_VOCAB_SIZE, "pieces, special ones included; auto: sized from the corpus "
                                                       "(at most what it holds)", parse=vocab_size_argument)
    cased: bool | None = cased_option(new_vocabulary=True)  # a new vocabulary: uncased unless --cased
    keep_accents: bool = option(False, "keep accents and voicing marks (NFKC: が stays が, é stays é) instead of the "
                                       "original's NFKD with combining marks dropped (right for English); recorded "
                                       "in PREFIX.casing.json, which every later step follows")
    overwrite: bool = option(False, "replace a vocabulary already at PREFIX (records and models made with it no "
                                    "longer match it)")
    max_sentences: int = option(DEFAULT_MAX_SENTENCES,
                                "train on a seeded uniform sample of at most this many sentences (bounds memory)")
    seed: int = option(SEED, "sampling seed")

    def __post_init__(self):
        run_config.check_fields(self, VocabConfig.check)

    def check(self):
        """The ranges that need no file: --vocab-size above the reserved ids (auto: sized from the corpus),
        --max-sentences at least 1."""
        if self.vocab_size != "auto":
            check_vocab_size(self.vocab_size)
        run_config.check_minimum(self, ("max_sentences",), 1, "at least 1")


@dataclasses.dataclass
class VocabResult:
    """What `albert_tf.vocab` returns: the files written (model, vocab, casing), the trained model's pieces
    (vocab_size), the counts of what was read (`stats`: files, lines, sentences, sampled, split_lines, text_bytes,
    sampled_bytes, replaced_bytes, ...: data.vocab.train_vocab's) and the CLI's exit code."""
    model: str
    vocab: str
    casing: str
    vocab_size: int
    stats: dict = dataclasses.field(default_factory=dict)
    exit_code: int = 0


__all__ = ["VocabConfig", "VocabResult", "vocab_size_argument", "check_vocab_size", "LINE_LIMIT",
           "DEFAULT_MAX_SENTENCES", "USER_DEFINED_SYMBOLS", "CONTROL_SYMBOLS", "RESERVED_IDS"]
