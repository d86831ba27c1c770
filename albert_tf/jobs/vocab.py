"""`albert-tf vocab`: train ALBERT's SentencePiece vocabulary on raw text (the training itself:
albert_tf/data/vocab.py, `train_vocab`).

    result = albert_tf.vocab(albert_tf.VocabConfig(input="corpus/*.txt", output_prefix="work/spm", vocab_size=8000))
    result.model, result.vocab_size

    albert-tf vocab --input 'corpus/*.txt' --output-prefix out/30k-clean [--vocab-size 30000|auto] [--cased]
                    [--keep-accents] [--overwrite]
"""
import sys

from albert_tf import files
from albert_tf.data import vocab as vocab_training
from albert_tf.data import vocab_trainer
from albert_tf.settings.vocab_config import VocabConfig, VocabResult


def preflight(config):
    """What `vocab` checks before it reads, for the CLI before TensorFlow's import (local paths): the output
    prefix, the input files, a vocabulary already at the prefix."""
    if files.is_local(config.input, config.output_prefix):
        files.check_output_prefix(config.output_prefix, "--output-prefix", "spm")
        files.match_files(config.input)
        vocab_training.check_no_vocabulary(config.output_prefix, config.overwrite)


def vocab(config):
    """Trains the vocabulary `config` (a VocabConfig) describes; prints progress lines and warnings on stderr, the
    summary lines on stdout. Returns the driver's VocabResult (data.vocab.train_vocab's). Ctrl-C stops the training
    at once (it runs in a child process), with nothing written."""
    progress = vocab_trainer.Progress()  # stderr: the sampling's counts, then the trainer's stage
    try:
        result = vocab_training.train_vocab(config.input, config.output_prefix, vocab_size=config.vocab_size,
                                            lower_case=not config.cased, max_sentences=config.max_sentences,
                                            seed=config.seed, keep_accents=config.keep_accents,
                                            overwrite=config.overwrite, progress=progress)
    finally:
        progress.end()
    lines, warnings = vocab_training.summary_lines(result.stats, bool(config.cased))
    for line in warnings:
        print(line, file=sys.stderr)
    for line in lines:
        print(line)
    return result


__all__ = ["VocabConfig", "VocabResult", "vocab", "preflight"]
