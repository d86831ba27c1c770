"""Training ALBERT's SentencePiece vocabulary on raw text (the job: albert_tf/jobs/vocab.py, `albert-tf vocab`).

`--vocab-size auto` sizes the vocabulary from the corpus (`suggest_vocab_size`: a quarter of the distinct words seen
at least twice, between 1,000 and 30,000, and never fewer than the corpus's characters need: those SentencePiece
must keep (`required_characters`, 99.995% of the text's characters) and the special pieces, with a quarter more for
pieces of several characters, as Chinese or Japanese text needs, which has few spaces and thousands of characters)
as a soft limit, so that a small corpus gets a vocabulary it can fill; the summary says the size chosen, and
`pretrain --set vocab_size=auto` takes the trained model's size. A --vocab-size too small for the characters is
refused with the size they need.

The original's settings: unigram model, <pad> 0, <unk> 1, control symbols [CLS] [SEP] [MASK] = 2, 3, 4, no bos/eos,
user-defined symbols ( ) " - . – £ €, character_coverage 0.99995. Each non-blank input line is one sentence, passed
through `albert_tf.text.normalize` (the tokenizer's own preprocessing) before training; a line longer than
LINE_LIMIT bytes (SentencePiece's own limit, past which it skips a sentence unseen) is cut into sentences that fit,
at sentence ends, else spaces, else character boundaries, so that no text is left out. Input is streamed
and at most --max-sentences sentences are kept (seeded reservoir sampling), so memory is bounded by the sample, not
the corpus. PREFIX.model and PREFIX.vocab are written atomically and are byte-identical for the same input and seed.
The summary says how many lines were cut and which share of the corpus's text bytes the trainer saw. A UTF-16 or
UTF-32 file is refused (albert_tf.data.corpus).

The vocabulary is one unit: beside each SentencePiece model `X.model` a small `X.casing.json` records how text is
normalized for it and which model it is ({"lower_case", "keep_accents", "sha256"}: albert_tf.text.record);
`write_vocabulary` puts the three files in place together, the .model last, and `vocab` over an existing prefix
needs --overwrite. `pretrain --spm-model`, `convert` and `export` carry the record along with the model; every
tokenizing path reads it (`AlbertTokenizer(path)`, `resolve_lower_case`, `resolve_keep_accents`), and a
`--cased`/`--uncased` flag must agree with it. create-data puts the fingerprint in its record-count index, and
pretrain refuses records made with another vocabulary.
"""
import collections
import contextlib
import io
import math
import os
import random
import re

import sentencepiece as spm

from albert_tf import messages
from albert_tf.data import vocab_trainer
from albert_tf.data.corpus import check_text_files, decode_utf8, open_binary, split_long_line
from albert_tf.files import atomic_output, check_output_prefix, exists, is_url, match_files
from albert_tf.runtime import leftovers, lock
from albert_tf.settings.defaults import SEED
from albert_tf.settings.vocab_config import (  # noqa: F401  (their one home)
    CONTROL_SYMBOLS, DEFAULT_MAX_SENTENCES, DEFAULT_VOCAB_SIZE, LINE_LIMIT, RESERVED_IDS, USER_DEFINED_SYMBOLS,
    VocabResult, check_vocab_size)
from albert_tf.text import normalize, vocabulary

CHARACTER_COVERAGE = 0.99995
TRAINER_WORK = "vocab"  # the trainer's work folders: albert_tf_vocab_* (albert_tf.runtime.leftovers)
# --vocab-size auto: one piece per this many distinct words seen at least twice, rounded to a thousand, in
# [AUTO_SMALLEST, AUTO_LARGEST]: 1,000 for the quickstart's corpus (6,200 lines, 4,600 such words), 15,000 for the
# copyright files Debian packages install (360,000 lines, 17 MB, 60,000 such words), 30,000 (the paper's) for a
# large corpus.
AUTO_WORDS_PER_PIECE = 4
AUTO_SMALLEST, AUTO_LARGEST = 1000, 30000
AUTO_ROOM = 0.25  # auto's room for pieces of several characters, a share of the characters' pieces
PROGRESS_LINES = 4096  # sample_sentences reports its counts this often
TRAINER_THREADS = 16  # SentencePiece's default; fixed, because the thread count changes the trained scores


def _csv(symbols):
    """SentencePiece reads repeated flags as CSV: quote a symbol holding '"' or ',' (else '"' opens a field)."""
    return ",".join('"' + s.replace('"', '""') + '"' if ('"' in s or "," in s) else s for s in symbols)


def sample_sentences(files, max_sentences, lower_case=True, seed=SEED, line_limit=LINE_LIMIT, keep_accents=False,
                     progress=None):
    """Streams `files`, normalizes each non-blank line, keeps a uniform sample of at most max_sentences.

    A line longer than `line_limit` UTF-8 bytes is first cut into pieces that fit (`corpus.split_long_line`: at
    sentence ends, else spaces, else a character boundary), each piece a sentence of its own: SentencePiece skips
    longer sentences, so without the cut it would never see that text.
    Reservoir sampling (Vitter's algorithm R) with random.Random(seed): deterministic for given files and seed.
    `progress`, if given, is called with the counts so far (vocab_trainer.sampling_text) every PROGRESS_LINES lines.
    Returns (sample: list[str], stats: dict with lines, sentences, split_lines (lines cut into pieces), line_limit,
    text_bytes (UTF-8 bytes of every sentence), sampled_bytes (of those in the sample), longest (the longest
    sampled sentence after normalization, in bytes), replaced_bytes, replaced_bytes_per_file).
    """
    if max_sentences < 1:
        raise ValueError(f"--max-sentences must be at least 1, got {max_sentences}")
    rng = random.Random(seed)
    sample, sizes = [], []
    seen = lines = split_lines = text_bytes = 0
    replaced_per_file = {}
    for path in files:
        replaced = 0
        with open_binary(path) as f:
            for raw in f:
                lines += 1
                if progress and lines % PROGRESS_LINES == 0:
                    progress(vocab_trainer.sampling_text(lines, text_bytes, min(seen, max_sentences)))
                text, bad = decode_utf8(raw)
                replaced += bad
                pieces = split_long_line(text.strip(), line_limit)
                if not pieces[0]:
                    continue
                split_lines += len(pieces) > 1
                for piece in pieces:
                    size = len(piece.encode("utf-8"))
                    text_bytes += size
                    # Normalize only what enters the reservoir: ~k(1 + ln(n/k)) of the n sentences.
                    if seen < max_sentences:
                        sample.append(normalize(piece, lower_case, keep_accents))
                        sizes.append(size)
                    else:
                        j = rng.randint(0, seen)
                        if j < max_sentences:
                            sample[j], sizes[j] = normalize(piece, lower_case, keep_accents), size
                    seen += 1
        if replaced:
            replaced_per_file[path] = replaced
    kept = [i for i, s in enumerate(sample) if s]  # a line of combining marks only normalizes to nothing
    stats = {"lines": lines, "sentences": seen, "split_lines": split_lines, "line_limit": line_limit,
             "text_bytes": text_bytes,
             "sampled_bytes": sum(sizes[i] for i in kept),
             "longest": max((len(sample[i].encode("utf-8")) for i in kept), default=0),
             "replaced_bytes": sum(replaced_per_file.values()), "replaced_bytes_per_file": replaced_per_file}
    return [sample[i] for i in kept], stats


def required_characters(sample, coverage=CHARACTER_COVERAGE):
    """How many characters SentencePiece's trainer must keep as pieces for a sample of normalized sentences: the
    most frequent characters that together make `coverage` of all character occurrences (white space counted as
    its space symbol ▁, one more at each sentence's start), as the trainer counts them before it refuses a
    vocabulary smaller than they and the special pieces."""
    counts = collections.Counter()
    for sentence in sample:
        counts.update("▁".join(sentence.split()))
        counts["▁"] += 1
    total = sum(counts.values())
    covered = needed = 0
    for count in sorted(counts.values(), reverse=True):
        if covered >= coverage * total:
            break
        covered += count
        needed += 1
    return needed


def suggest_vocab_size(sample):
    """--vocab-size auto's size for a sample of normalized sentences: AUTO_WORDS_PER_PIECE of the words seen twice,
    in [AUTO_SMALLEST, AUTO_LARGEST], and never fewer than the `character_floor` of its `required_characters`."""
    counts = collections.Counter(word for sentence in sample for word in sentence.split())
    repeated = sum(1 for count in counts.values() if count >= 2)
    rounded = int(round(repeated / AUTO_WORDS_PER_PIECE, -3))
    return max(min(AUTO_LARGEST, max(AUTO_SMALLEST, rounded)), character_floor(required_characters(sample)))


def character_floor(characters):
    """The smallest size `auto` gives a corpus whose text needs `characters` characters as pieces: those, the
    special pieces (RESERVED_IDS) and a quarter more for pieces of several characters, rounded up to a thousand."""
    return math.ceil((characters + RESERVED_IDS) * (1 + AUTO_ROOM) / 1000) * 1000


def _too_small(message, vocab_size, sentences):
    """vocab's line for SentencePiece's refusal of a vocabulary smaller than the characters it must keep, in
    albert-tf's terms (its own advice names a trainer option that albert-tf does not pass on), or None for another
    message."""
    found = re.search(r"required_chars\D*(\d+) vs (\d+)", message)
    if not found:
        return None
    needed = int(found.group(2))
    return (f"--vocab-size {vocab_size} is smaller than the {needed:,} pieces the corpus's characters need "
            f"({needed - RESERVED_IDS:,} characters, one piece each, make {100 * CHARACTER_COVERAGE:g}% of the "
            f"text of its {sentences:,} sentences; {RESERVED_IDS} special pieces): pass --vocab-size "
            f"{character_floor(needed - RESERVED_IDS)} or more, or --vocab-size auto")


def vocab_lines(model_proto):
    """The PREFIX.vocab text SentencePiece writes: "piece<TAB>score" per id (score as C++ streams print it)."""
    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    return "".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(sp.get_piece_size()))


def train_vocab(input_pattern, output_prefix, vocab_size=DEFAULT_VOCAB_SIZE, lower_case=True,
                max_sentences=DEFAULT_MAX_SENTENCES, seed=SEED, line_limit=LINE_LIMIT, keep_accents=False,
                overwrite=False, progress=None):
    """Trains ALBERT's SentencePiece unigram vocabulary; writes PREFIX.model, PREFIX.vocab and PREFIX.casing.json
    as one unit (`write_vocabulary`), holding the prefix's lock (DIR/.NAME.albert_tf.lock) while it runs.

    Training runs in memory with a fixed thread count, so the same input, arguments and seed give byte-identical
    files on any machine.

    Args:
      input_pattern: UTF-8 text files (local or gs://): a glob, comma-separated globs or a list of globs (see
        albert_tf.files), one sentence per line (blank lines ignored).
      output_prefix: where to write PREFIX.model and PREFIX.vocab (local or gs://).
      vocab_size: number of pieces, special ones included, or "auto": `suggest_vocab_size` of the sample, as a
        soft limit (SentencePiece keeps fewer pieces when the corpus holds fewer).
      lower_case: normalize to lowercase (False for a cased vocabulary).
      keep_accents: normalize with NFKC, keeping accents and voicing marks (albert_tf.text.normalize); recorded.
      overwrite: replace a vocabulary already at the prefix (without it that is a ValueError, before training).
      max_sentences: at most this many sentences are sampled (seeded reservoir) for training.
      seed: sampling seed.
      line_limit: lines longer than this (UTF-8 bytes) are cut into sentences (`sample_sentences`); the trainer's
        own limit is raised to the longest sentence it is given, so none is skipped.
      progress: called with a text as reading and training go (vocab_trainer.Progress prints it), or None.
    Returns:
      a VocabResult (albert_tf.settings.vocab_config, what `albert_tf.vocab` returns): the paths of model, vocab and
        casing, vocab_size (the trained model's pieces) and `stats`, a dict: files, lines, sentences, sampled,
        split_lines, text_bytes, sampled_bytes, longest (see `sample_sentences`), replaced_bytes,
        replaced_bytes_per_file, model, vocab, casing, vocab_size, auto (the size `auto` asked for, else None),
        keep_accents, sha256 (the model's fingerprint).
    Raises:
      FileNotFoundError: the glob matches no file.
      ValueError: an output prefix that is a directory or holds a vocabulary (without overwrite), a UTF-16 /
        UTF-32 file, an empty corpus, or a vocab_size the corpus cannot support.
      albert_tf.runtime.exit_codes.LockHeld: another run writes the prefix.
    """
    check_output_prefix(output_prefix, "--output-prefix", "spm")
    files = match_files(input_pattern)
    check_text_files(files)
    check_no_vocabulary(output_prefix, overwrite)
    with lock.prefix_lock(output_prefix, "--output-prefix"):  # one run per prefix
        remove_leftovers(output_prefix)
        return _train(files, input_pattern, output_prefix, vocab_size, lower_case, keep_accents, max_sentences,
                      seed, line_limit, progress)


def remove_leftovers(output_prefix):
    """Removes what a killed run of `output_prefix` left (albert_tf.runtime.leftovers) and says so in one note: the
    temporaries of its files and of its lock beside them, and the trainer's work folders of runs that are gone.
    Call it holding the prefix's lock."""
    directory, name = os.path.split(os.fspath(output_prefix))
    names = [os.path.basename(path) for path in vocabulary_files(output_prefix).values()]
    names.append(f".{name}{lock.LOCK_FILE}")
    leftovers.note(leftovers.remove(directory or ".", "|".join(re.escape(n) for n in names))
                   + leftovers.remove_abandoned(TRAINER_WORK))


def vocabulary_files(output_prefix):
    """{"vocab", "casing", "model"}: the files of the vocabulary PREFIX, in the order they are put in place."""
    output_prefix = os.fspath(output_prefix)
    return {"vocab": output_prefix + ".vocab", "casing": vocabulary.casing_path(output_prefix + ".model"),
            "model": output_prefix + ".model"}


def check_no_vocabulary(output_prefix, overwrite):
    """Refuses (ValueError) a prefix that already holds a vocabulary file, unless `overwrite`."""
    if overwrite:
        return
    found = [path for path in vocabulary_files(output_prefix).values() if exists(path)]
    if found:
        raise ValueError(f"--output-prefix {os.fspath(output_prefix)}: {', '.join(found)} exist(s) already (a "
                         "vocabulary, which records and models made with it depend on); pass --overwrite to "
                         "replace it, or give another prefix")


def write_vocabulary(output_prefix, model_bytes, lower_case, keep_accents):
    """Writes the vocabulary PREFIX.vocab, PREFIX.casing.json (its record: normalization and fingerprint) and
    PREFIX.model as one unit: all three to temporary names first, then each renamed into place, the .model last.
    A failure before the renames (a full disk) leaves an earlier vocabulary at the prefix as it was and removes the
    temporary files; a reader keying on the .model never pairs it with another model's record (its fingerprint
    says which model it belongs to). Returns vocabulary_files(output_prefix)."""
    outputs = vocabulary_files(output_prefix)
    if not is_url(outputs["model"]):
        os.makedirs(os.path.dirname(os.path.abspath(outputs["model"])), exist_ok=True)
    contents = {"vocab": vocab_lines(model_bytes).encode("utf-8"),
                "casing": vocabulary.record_text(lower_case, keep_accents, model_bytes).encode("utf-8"),
                "model": model_bytes}
    with contextlib.ExitStack() as stack:  # every temp written (or every one removed) before any rename
        # entered in reverse: the contexts exit (rename) last in, first out, so the .model is renamed last
        handles = {key: stack.enter_context(atomic_output(outputs[key], "wb")) for key in reversed(outputs)}
        for key, handle in handles.items():
            handle.write(contents[key])
    return outputs


def _train(files, input_pattern, output_prefix, vocab_size, lower_case, keep_accents, max_sentences, seed,
           line_limit, progress):
    """train_vocab's work once the prefix is checked and locked."""
    sample, stats = sample_sentences(files, max_sentences, lower_case, seed, line_limit, keep_accents,
                                     progress=progress)
    if not sample:
        raise ValueError(f"--input {input_pattern!r}: {len(files)} file(s), {stats['lines']} line(s), "
                         "but no text to train on (empty corpus)")
    auto = suggest_vocab_size(sample) if vocab_size == "auto" else None
    vocab_size = auto or vocab_size
    check_vocab_size(vocab_size)  # VocabConfig checked a number; here also train_vocab's own callers' and auto's
    stats["sampled"] = len(sample)
    model = io.BytesIO()
    try:  # in a child process: Ctrl-C stops it at once (vocab_trainer)
        with leftovers.private_temp_dir(TRAINER_WORK) as work:
            model.write(vocab_trainer.train_in_child(
                sample, progress=progress, work_dir=work, vocab_size=vocab_size, model_type="unigram",
                pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                control_symbols=_csv(CONTROL_SYMBOLS), user_defined_symbols=_csv(USER_DEFINED_SYMBOLS),
                character_coverage=CHARACTER_COVERAGE, input_sentence_size=0, shuffle_input_sentence=False,
                num_threads=TRAINER_THREADS, hard_vocab_limit=auto is None,
                max_sentence_length=max(LINE_LIMIT, stats["longest"]),  # normalizing can lengthen a piece a little
            ))
    except RuntimeError as e:
        message = str(e)
        if _too_small(message, vocab_size, stats["sentences"]):
            raise ValueError(_too_small(message, vocab_size, stats["sentences"])) from None
        if "Vocabulary size" in message or "vocab_size" in message:
            raise ValueError(f"--vocab-size {vocab_size} does not fit the corpus {input_pattern!r} "
                             f"({stats['sentences']} sentences): {message}") from e
        raise ValueError(f"SentencePiece training on {input_pattern!r} failed: {message}") from e
    outputs = write_vocabulary(output_prefix, model.getvalue(), lower_case, keep_accents)
    stats.update(files=files, vocab_size=len(vocab_lines(model.getvalue()).splitlines()), auto=auto,
                 keep_accents=bool(keep_accents), sha256=vocabulary.record.fingerprint(model.getvalue()), **outputs)
    return VocabResult(stats["model"], stats["vocab"], stats["casing"], stats["vocab_size"], stats)


def summary_lines(stats, cased):
    """What `albert-tf vocab` prints: (result lines for stdout, warning lines for stderr)."""
    share = stats["sampled_bytes"] / max(1, stats["text_bytes"])
    lines = [f"albert-tf vocab: {len(stats['files'])} file(s), {stats['lines']} lines, {stats['sentences']} "
             f"sentences, {stats['sampled']} sampled: the trainer saw {stats['sampled_bytes']:,} of the "
             f"{stats['text_bytes']:,} text bytes ({100 * share:.1f}%)"]
    if stats["split_lines"]:
        lines.append(f"albert-tf vocab: {stats['split_lines']} line(s) longer than {stats['line_limit']} bytes "
                     "(SentencePiece skips longer ones) were cut into sentences at sentence ends, spaces or "
                     "character boundaries")
    lines.append(f"albert-tf vocab: wrote {stats['model']}, {stats['vocab']} and {stats['casing']} "
                 f"({'cased' if cased else 'uncased'}, {'accents kept, ' if stats.get('keep_accents') else ''}"
                 f"{stats['vocab_size']} pieces"
                 + (f"; --vocab-size auto asked for {stats['auto']} from the corpus: use --set vocab_size="
                    f"{stats['vocab_size']} (or vocab_size=auto with --spm-model) with pretrain" if stats["auto"]
                    else "") + ")")
    warnings = []
    if stats["replaced_bytes"]:
        per_file = ", ".join(f"{path}: {n}" for path, n in stats["replaced_bytes_per_file"].items())
        warnings.append(messages.line("warning", f"replaced {stats['replaced_bytes']} non-UTF-8 byte(s) with "
                                                 f"U+FFFD ({per_file})", "vocab"))
    return lines, warnings
