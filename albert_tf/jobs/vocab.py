"""`albert-tf vocab`: train ALBERT's SentencePiece vocabulary on raw text (the training itself:
albert_tf/data/vocab.py, `train_vocab`).

    result = albert_tf.vocab(albert_tf.VocabConfig(input="corpus/*.txt", output_prefix="work/spm", vocab_size=8000))
    result.model, result.vocab_size

    albert-tf vocab --input 'corpus/*.txt' --output-prefix out/30k-clean [--vocab-size 30000|auto] [--cased]
                    [--keep-accents] [--overwrite]
"""
import dataclasses
import sys

from albert_tf import run_config
from albert_tf.data import vocab as vocab_training
from albert_tf.data import vocab_trainer
from albert_tf.run_config import option
from albert_tf.text import vocabulary


@dataclasses.dataclass
class VocabConfig:
    """Every setting of `albert-tf vocab` (see each field's help; `--help` shows the same)."""
    input: str = option(help="comma-separated globs of UTF-8 text files (local or gs://), one sentence per line; "
                             f"blank lines are ignored, lines over {vocab_training.LINE_LIMIT} bytes are cut into "
                             "sentences", metavar="GLOBS")
    output_prefix: str = option(help="writes PREFIX.model, PREFIX.vocab and PREFIX.casing.json (a file-name prefix, "
                                     "e.g. work/spm, not a directory)", metavar="PREFIX")
    vocab_size: int | str = option(30000, "pieces, special ones included; auto: sized from the corpus (at most what "
                                          "it holds)", parse=vocab_training.vocab_size_argument)
    cased: bool | None = vocabulary.cased_option()  # a new vocabulary: uncased unless --cased
    keep_accents: bool = option(False, "keep accents and voicing marks (NFKC: が stays が, é stays é) instead of the "
                                       "original's NFKD with combining marks dropped (right for English); recorded "
                                       "in PREFIX.casing.json, which every later step follows")
    overwrite: bool = option(False, "replace a vocabulary already at PREFIX (records and models made with it no "
                                    "longer match it)")
    max_sentences: int = option(vocab_training.DEFAULT_MAX_SENTENCES,
                                "train on a seeded uniform sample of at most this many sentences (bounds memory)")
    seed: int = option(12345, "sampling seed")

    def __post_init__(self):
        run_config.check_fields(self)


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


def vocab(config):
    """Trains the vocabulary `config` (a VocabConfig) describes; prints progress lines and warnings on stderr, the
    summary lines on stdout. Returns a VocabResult. Ctrl-C stops the training at once (it runs in a child process),
    with nothing written."""
    progress = vocab_trainer.Progress()  # stderr: the sampling's counts, then the trainer's stage
    try:
        stats = vocab_training.train_vocab(config.input, config.output_prefix, vocab_size=config.vocab_size,
                                           lower_case=not config.cased, max_sentences=config.max_sentences,
                                           seed=config.seed, keep_accents=config.keep_accents,
                                           overwrite=config.overwrite, progress=progress)
    finally:
        progress.end()
    lines, warnings = vocab_training.summary_lines(stats, bool(config.cased))
    for line in warnings:
        print(line, file=sys.stderr)
    for line in lines:
        print(line)
    return VocabResult(stats["model"], stats["vocab"], stats["casing"], stats["vocab_size"], stats)


__all__ = ["VocabConfig", "VocabResult", "vocab"]
