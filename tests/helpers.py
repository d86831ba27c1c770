"""Shared test helpers: a generated English-like corpus and a tiny SentencePiece model.

Nothing here downloads anything; everything is generated from a seed.
"""
import os
import random

_WORDS = (
    "the of and to in is was for on that with as by at from his her they which this be are were an had has "
    "not but it or their have one all would there been when who will more no if out so said what up its about "
    "into than them can only other new some could time these two may then do first any my now such like our "
    "over man me even most made after also did many before must through back years where much your way well "
    "down should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three river mountain city music science history "
    "language computer garden winter summer ancient modern theory number system program children school water "
    "café naïve résumé 1999 2024 3.0 42 100 7,5"
).split()


def make_sentence(rng, min_words=4, max_words=14):
    n = rng.randint(min_words, max_words)
    words = [rng.choice(_WORDS) for _ in range(n)]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", ".", ".", "!", "?"])


def write_corpus(path, num_docs=30, min_sents=3, max_sents=12, seed=0):
    """Writes the original format: one sentence per line, a blank line between documents. Returns the path."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for d in range(num_docs):
            for _ in range(rng.randint(min_sents, max_sents)):
                f.write(make_sentence(rng) + "\n")
            if d != num_docs - 1:
                f.write("\n")
    return path


def train_tiny_spm(directory, vocab_size=300, seed=0):
    """Trains a tiny SentencePiece model with ALBERT's special ids (pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4).

    Returns the path of the .model file.
    """
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    os.makedirs(directory, exist_ok=True)
    corpus = write_corpus(os.path.join(directory, "spm_corpus.txt"), num_docs=80, seed=seed)
    prefix = os.path.join(directory, "tiny_spm")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols="[CLS],[SEP],[MASK]",
        character_coverage=1.0, normalization_rule_name="identity", minloglevel=2, num_threads=1,
    )
    return prefix + ".model"
