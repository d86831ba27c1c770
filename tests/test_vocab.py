"""`albert-tf vocab` / train_vocab: end to end on a generated corpus, sampling, and each bad-input message."""
import glob
import io
import json
import os
import pathlib
import re

import pytest

import helpers
from albert_tf import cli
from albert_tf.data.vocab import (CHARACTER_COVERAGE, RESERVED_IDS, USER_DEFINED_SYMBOLS, required_characters,
                                  sample_sentences, suggest_vocab_size, train_vocab, vocab_lines)
from albert_tf.text.vocabulary import read_casing, resolve_lower_case
from albert_tf.text import AlbertTokenizer, normalize
from helpers import EQUALITY_TEXTS

VOCAB_SIZE = 150


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("vocab_corpus")
    for i in range(2):
        helpers.write_corpus(str(directory / f"part-{i}.txt"), num_docs=40, seed=10 + i)
    return directory


@pytest.fixture(scope="module")
def cli_model(corpus_dir, tmp_path_factory):
    """Runs the CLI once; returns (model prefix, captured stdout, exit code)."""
    out_dir = tmp_path_factory.mktemp("vocab_out")
    prefix = str(out_dir / "sub" / "spm")
    capture = os.path.join(str(out_dir), "stdout.txt")
    import contextlib  # pylint: disable=import-outside-toplevel

    with open(capture, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
        code = cli.main(["vocab", "--input", str(corpus_dir / "part-*.txt"), "--output-prefix", prefix,
                         "--vocab-size", str(VOCAB_SIZE), "--max-sentences", "100000"])
    with open(capture, encoding="utf-8") as f:
        return prefix, f.read(), code


def _count_lines(directory):
    lines = sentences = 0
    for path in glob.glob(str(directory / "part-*.txt")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                lines += 1
                sentences += bool(line.strip())
    return lines, sentences


def test_vocab_cli_end_to_end(cli_model, corpus_dir):
    prefix, stdout, code = cli_model
    assert code == 0
    tok = AlbertTokenizer(prefix + ".model")
    assert tok.vocab_size == VOCAB_SIZE
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    # each user-defined symbol is one piece, right after the control symbols, in the original's order
    assert [tok.id_to_piece(5 + i) for i in range(len(USER_DEFINED_SYMBOLS))] == list(USER_DEFINED_SYMBOLS)
    with open(prefix + ".vocab", encoding="utf-8") as f:
        vocab_lines = [line.split("\t")[0] for line in f]
    assert vocab_lines[:13] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"] + list(USER_DEFINED_SYMBOLS)
    assert len(vocab_lines) == VOCAB_SIZE
    # uncased: trained on lowercased text, so no piece holds an uppercase letter
    assert not any(ch.isupper() for piece in vocab_lines[5:] for ch in piece)
    # the summary reports what an independent count of the corpus says
    lines, sentences = _count_lines(corpus_dir)
    assert f"2 file(s), {lines} lines, {sentences} sentences, {sentences} sampled" in stdout
    assert f"wrote {prefix}.model, {prefix}.vocab and {prefix}.casing.json (uncased, {VOCAB_SIZE} pieces)" in stdout
    assert "replaced" not in stdout
    # atomic writes leave nothing but the outputs; the casing is recorded beside the model
    assert sorted(os.listdir(os.path.dirname(prefix))) == ["spm.casing.json", "spm.model", "spm.vocab"]
    with open(prefix + ".casing.json", encoding="utf-8") as f:
        assert json.load(f) == {"lower_case": True, "keep_accents": False, "sha256": tok.fingerprint}


def test_trained_model_python_equals_in_graph(cli_model):
    """The vocab's own (nmt_nfkc) normalizer runs in both paths: ids must still agree."""
    tok = AlbertTokenizer(cli_model[0] + ".model")
    texts = EQUALITY_TEXTS + ["The river (near the city) costs £3.0, €42 - or 7,5."]
    assert tok.tf_encode(texts).to_list() == [tok.encode(t) for t in texts]


def test_same_seed_same_bytes(corpus_dir, tmp_path):
    outputs = []
    for run in range(2):
        result = train_vocab(str(corpus_dir / "part-*.txt"), str(tmp_path / f"run{run}"), vocab_size=120,
                             max_sentences=300, seed=5)
        assert result.stats["sampled"] == 300
        outputs.append([pathlib.Path(path).read_bytes() for path in (result.model, result.vocab)])
    assert outputs[0] == outputs[1]
    other = train_vocab(str(corpus_dir / "part-*.txt"), str(tmp_path / "other"), vocab_size=120,
                        max_sentences=300, seed=6)
    assert pathlib.Path(other.model).read_bytes() != outputs[0][0]  # a different sample


def test_vocab_file_matches_sentencepiece_writer(tiny_spm_model):
    """The .vocab we write from the model equals the one SentencePiece's own trainer wrote beside it."""
    with open(tiny_spm_model, "rb") as f:
        model = f.read()
    with open(tiny_spm_model[: -len(".model")] + ".vocab", encoding="utf-8") as f:
        assert vocab_lines(model) == f.read()


def test_cased_vocab_keeps_uppercase(corpus_dir, tmp_path):
    result = train_vocab(str(corpus_dir / "part-0.txt"), str(tmp_path / "cased"), vocab_size=120, lower_case=False)
    with open(result.vocab, encoding="utf-8") as f:
        pieces = [line.split("\t")[0] for line in f]
    assert any(ch.isupper() for piece in pieces for ch in piece)  # sentences start with a capital


def test_reservoir_sample_is_seeded_and_uniform(tmp_path):
    path = tmp_path / "numbers.txt"
    n, k = 200, 20
    path.write_text("".join(f"Line {i}\n\n" for i in range(n)), encoding="utf-8")
    sample, stats = sample_sentences([str(path)], k, seed=7)
    assert stats["lines"] == 2 * n and stats["sentences"] == n and len(sample) == k
    assert sample == sample_sentences([str(path)], k, seed=7)[0]
    assert sample != sample_sentences([str(path)], k, seed=8)[0]
    assert all(s.startswith("line ") for s in sample)  # normalized (lowercased)
    # k >= n keeps every sentence in order
    assert sample_sentences([str(path)], n, seed=1)[0] == [normalize(f"Line {i}") for i in range(n)]
    # inclusion probability is k/n for every line: over 300 seeds each line is kept ~30 times (binomial sd ~5.2)
    counts = [0] * n
    for seed in range(300):
        for s in sample_sentences([str(path)], k, seed=seed)[0]:
            counts[int(s.split()[1])] += 1
    # lines in the first half per sample: hypergeometric, mean k/2, variance k/4 (n-k)/(n-1) ~ 4.52 per seed
    assert abs(sum(counts[: n // 2]) - 300 * k / 2) < 5 * (300 * 4.52) ** 0.5
    assert max(counts) < 30 + 6 * 5.2 and min(counts) > 30 - 6 * 5.2


def test_glob_matching_nothing(tmp_path, capsys):
    pattern = str(tmp_path / "missing-*.txt")
    with pytest.raises(FileNotFoundError, match="matches no file") as info:
        train_vocab(pattern, str(tmp_path / "v"), vocab_size=50)
    assert pattern in str(info.value)
    assert cli.main(["vocab", "--input", pattern, "--output-prefix", str(tmp_path / "v")]) == 2
    assert f"albert-tf vocab: error: --input '{pattern}' matches no file" in capsys.readouterr().err


def test_empty_corpus(tmp_path):
    (tmp_path / "blank.txt").write_text("\n   \n\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"1 file\(s\), 3 line\(s\), but no text to train on \(empty corpus\)"):
        train_vocab(str(tmp_path / "*.txt"), str(tmp_path / "v"), vocab_size=50)
    assert not glob.glob(str(tmp_path / "v.*"))


def test_non_utf8_bytes_are_replaced_counted_and_reported(corpus_dir, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    with open(corpus_dir / "part-0.txt", "rb") as f:
        good = f.read()
    # \xff and \xfe are never valid; \xc3 followed by a space is a truncated sequence: 3 bytes in all.
    bad.write_bytes(good + b"\nhello \xff\xfe world\nthen \xc3 again\n")
    sample, stats = sample_sentences([str(bad)], 10**6)
    assert stats["replaced_bytes"] == 3 and stats["replaced_bytes_per_file"] == {str(bad): 3}
    assert "hello \ufffd\ufffd world" in sample and "then \ufffd again" in sample
    code = cli.main(["vocab", "--input", str(bad), "--output-prefix", str(tmp_path / "v"), "--vocab-size", "120"])
    assert code == 0
    assert f"replaced 3 non-UTF-8 byte(s) with U+FFFD ({bad}: 3)" in capsys.readouterr().err  # a warning


def test_vocab_size_too_large_for_corpus(tmp_path):
    (tmp_path / "small.txt").write_text("a tiny corpus.\nwith two lines.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--vocab-size 5000 does not fit the corpus .*small.txt.*2 sentences"):
        train_vocab(str(tmp_path / "small.txt"), str(tmp_path / "v"), vocab_size=5000)
    assert sorted(os.listdir(tmp_path)) == ["small.txt"]  # no output, no temp left behind


def test_vocab_size_below_the_special_symbols(corpus_dir, tmp_path):
    with pytest.raises(ValueError, match="--vocab-size 10 is too small"):
        train_vocab(str(corpus_dir / "part-0.txt"), str(tmp_path / "v"), vocab_size=10)


def test_tf_io_gfile_paths_in_and_out(corpus_dir):
    """Non-local paths (gs:// in real use) go through tf.io.gfile; TensorFlow's ram:// filesystem stands in."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.io.gfile.makedirs("ram://vocab_in")
    tf.io.gfile.copy(str(corpus_dir / "part-0.txt"), "ram://vocab_in/part-0.txt", overwrite=True)
    result = train_vocab("ram://vocab_in/*.txt", "ram://vocab_out/spm", vocab_size=120)
    assert result.stats["files"] == ["ram://vocab_in/part-0.txt"]
    assert sorted(tf.io.gfile.listdir("ram://vocab_out")) == ["spm.casing.json", "spm.model", "spm.vocab"]
    local = train_vocab(str(corpus_dir / "part-0.txt"), str(corpus_dir.parent / "local_spm"), vocab_size=120)
    with tf.io.gfile.GFile("ram://vocab_out/spm.model", "rb") as f, open(local.model, "rb") as g:
        assert f.read() == g.read()
    tok = AlbertTokenizer("ram://vocab_out/spm.model")
    assert tok.encode("the river") == AlbertTokenizer(local.model).encode("the river")
    with pytest.raises(FileNotFoundError, match="SentencePiece model ram://vocab_out/none.model not found"):
        AlbertTokenizer("ram://vocab_out/none.model")


def test_sampling_memory_does_not_grow_with_the_corpus(tmp_path):
    """Peak Python memory while sampling 500 sentences from 20k vs 80k lines: the sample bounds it, not the file."""
    import tracemalloc  # pylint: disable=import-outside-toplevel

    peaks = []
    for n in (20_000, 80_000):
        path = tmp_path / f"lines-{n}.txt"
        with open(path, "w", encoding="utf-8") as f:
            for i in range(n):
                f.write(f"Sentence number {i} says something about the river and the mountain.\n")
        tracemalloc.start()
        sample, stats = sample_sentences([str(path)], 500, seed=1)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(sample) == 500 and stats["sentences"] == n
    file_bytes = (tmp_path / "lines-80000.txt").stat().st_size
    assert peaks[1] < 1.5 * peaks[0], peaks  # keeping every line would make this 4x
    assert peaks[1] < file_bytes / 10, (peaks, file_bytes)


def test_cased_vocab_is_recorded_and_contradicting_flags_are_refused(corpus_dir, tmp_path):
    """Issue 19 item 6: `vocab --cased` records lower_case false; a flag agreeing with the record, or none, gives
    the record; a contradicting flag names both."""
    result = train_vocab(str(corpus_dir / "part-0.txt"), str(tmp_path / "cased"), vocab_size=120, lower_case=False)
    assert result.casing == str(tmp_path / "cased.casing.json") and read_casing(result.model) is False
    assert read_casing(str(tmp_path / "absent.model")) is None
    assert [resolve_lower_case(False, flag, "X") for flag in (None, True)] == [False, False]
    assert [resolve_lower_case(None, flag, "X") for flag in (None, True, False)] == [True, False, True]
    with pytest.raises(ValueError, match=r"--uncased contradicts X: its vocabulary is recorded as cased"):
        resolve_lower_case(False, False, "X")
    with pytest.raises(ValueError, match=r"--cased contradicts X: its vocabulary is recorded as uncased"):
        resolve_lower_case(True, True, "X")
    (tmp_path / "bad.casing.json").write_text('{"lower_case": "yes"}')
    with pytest.raises(ValueError, match="bad.casing.json: expected"):
        read_casing(str(tmp_path / "bad.model"))


def test_suggested_vocab_size_by_hand():
    # a quarter of the distinct words seen at least twice, rounded to a thousand, within [1000, 30000]
    words = [f"w{i}" for i in range(24_000)]
    sample = [" ".join(words), " ".join(words[:21_000]), "once only here"]
    assert suggest_vocab_size(sample) == 5_000                         # 21,000 repeated words / 4 = 5,250
    assert suggest_vocab_size(["a b c", "a b c"]) == 1_000               # the smallest
    assert suggest_vocab_size([" ".join(words * 2 + [f"x{i}" for i in range(200_000)] * 2)]) == 30_000


def test_vocab_size_auto_fits_a_small_corpus(corpus_dir, tmp_path, capsys):
    """auto on a corpus that cannot fill the suggestion: a soft limit, no error; the summary says the size and the
    flag that carries it to pretrain; the model has that many pieces."""
    prefix = str(tmp_path / "auto")
    assert cli.main(["vocab", "--input", str(corpus_dir / "part-*.txt"), "--output-prefix", prefix,
                     "--vocab-size", "auto"]) == 0
    out = capsys.readouterr().out
    size = AlbertTokenizer(prefix + ".model").vocab_size
    assert size < 1000 and f"(uncased, {size} pieces; --vocab-size auto asked for 1000" in out
    assert f"--set vocab_size={size}" in out
    with pytest.raises(SystemExit):
        cli.main(["vocab", "--input", "x", "--output-prefix", prefix, "--vocab-size", "many"])
    assert "expected a number of pieces or auto, got 'many'" in capsys.readouterr().err


def _spm_required_pieces(sample):
    """What SentencePiece itself says a sample needs: its refusal of a vocabulary too small for the characters it
    must keep ("Vocabulary size is smaller than required_chars. 100 vs N"), N being those and the special pieces."""
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    with pytest.raises(RuntimeError) as refused:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sample), model_writer=io.BytesIO(), vocab_size=100, model_type="unigram",
            character_coverage=CHARACTER_COVERAGE, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
            control_symbols="[CLS],[SEP],[MASK]", user_defined_symbols=list(USER_DEFINED_SYMBOLS), minloglevel=2)
    return int(re.search(r"required_chars\. 100 vs (\d+)", str(refused.value)).group(1))


def test_vocab_size_auto_fits_a_chinese_corpus(tmp_path):
    """Chinese has no spaces between words and thousands of characters: auto's word count gave 1,000 pieces, which
    SentencePiece refused ("1000 vs 3686") with advice naming its own --character_coverage, which albert-tf does not
    have. Now auto gives room for every character SentencePiece must keep (its own count, the reference) and the
    special pieces, and a number too small is refused naming a size that fits, not a flag we lack."""
    corpus = tmp_path / "zh.txt"
    corpus.write_text("\n".join(helpers.cjk_sentences(1500, "zh")) + "\n", encoding="utf-8")
    sample, _ = sample_sentences([str(corpus)], 10_000)
    needed = _spm_required_pieces(sample)
    assert required_characters(sample) + RESERVED_IDS == needed > 2000
    result = train_vocab(str(corpus), str(tmp_path / "auto"), vocab_size="auto")
    assert result.stats["auto"] >= needed * 1.25 and result.stats["auto"] % 1000 == 0
    assert AlbertTokenizer(result.model).vocab_size >= needed
    with pytest.raises(ValueError) as refused:
        train_vocab(str(corpus), str(tmp_path / "small"), vocab_size=1000)
    message = str(refused.value)
    assert "character_coverage" not in message and len(message.splitlines()) == 1
    assert f"--vocab-size 1000 is smaller than the {needed:,} pieces the corpus's characters need" in message
    assert int(re.search(r"pass --vocab-size (\d+) or more", message).group(1)) >= needed


def test_vocabs_cased_flag_is_described_as_making_the_record(capsys):
    """vocab makes the vocabulary and its record: its --cased / --uncased help cannot say "as recorded beside the
    SentencePiece model" (create-data's and finetune's help, which read a record, do)."""
    with pytest.raises(SystemExit):
        cli.main(["vocab", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "as recorded" not in text
    assert ("--cased the new vocabulary keeps case (default: lowercased); recorded in PREFIX.casing.json, which "
            "every later step follows --uncased the new vocabulary is lowercased (the default)") in text
    with pytest.raises(SystemExit):
        cli.main(["create-data", "--help"])
    assert "default: as recorded beside the SentencePiece model" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------------------------------- long lines
def _long_line_corpus(path, seed=3):
    """A corpus made only of lines over SentencePiece's 4,192-byte limit: generated sentences joined into lines of
    5-12 KB, and a line of 9,000 bytes without any space; characters that occur only past byte 4,192 of a line
    (the Greek letters and 語) are what a vocabulary that skipped the long lines would lack. Returns
    (lines, text bytes of each line, characters only found in the lines' tails)."""
    import random  # pylint: disable=import-outside-toplevel

    rng = random.Random(seed)
    lines = []
    for _ in range(40):
        words = []
        while len(" ".join(words).encode()) < rng.randint(5000, 12000):
            words.append(helpers.make_sentence(rng))
            if len(" ".join(words).encode()) > 4300:
                words.append(rng.choice(["αβγ δεζ.", "語語 日本.", "ηθι κλμ!"]))
        lines.append(" ".join(words))
    lines.append("x" * 3000 + "é" * 1500 + "ψ" * 1500)  # 9,000 bytes, no space: cut at characters
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    tails = set("αβγδεζηθικλμ語日本ψ")
    assert all(len(line.encode()) > 4192 for line in lines)
    assert not tails & set("".join(line.encode()[:4192].decode("utf-8", "ignore") for line in lines))
    return lines, tails


def test_a_corpus_of_only_long_lines_trains_a_vocabulary_that_saw_all_of_it(tmp_path):
    """Whole CLI run. Before: SentencePiece skipped every line ("INTERNAL: ... [!sentences_.empty()]"). Now each line
    is cut into sentences of at most 4,192 bytes; the summary counts the lines cut and says the trainer saw all the
    text; characters found only past byte 4,192 of the lines are in the vocabulary."""
    lines, tails = _long_line_corpus(tmp_path / "long.txt")
    proc = helpers.run_cli("vocab", ["--input", tmp_path / "long.txt", "--output-prefix", tmp_path / "out" / "spm",
                                     "--vocab-size", 200])
    # no warning: everything is on stdout, the result; stderr holds only progress lines
    assert [line for line in proc.stderr.splitlines() if not line.startswith("progress: ")] == []
    out = proc.stdout.splitlines()
    text_bytes = sum(len(line.encode()) for line in lines)
    match = re.fullmatch(r"albert-tf vocab: 1 file\(s\), 41 lines, (\d+) sentences, \1 sampled: the trainer saw "
                         r"([\d,]+) of the \2 text bytes \(100\.0%\)", out[0])
    assert match, out[0]
    sentences, seen = int(match.group(1)), int(match.group(2).replace(",", ""))
    assert sentences >= sum(-(-len(line.encode()) // 4192) for line in lines)  # each piece fits the limit
    # only the single spaces at the cuts are not counted: one per cut at most
    assert text_bytes - (sentences - len(lines)) <= seen <= text_bytes
    assert out[1] == ("albert-tf vocab: 41 line(s) longer than 4192 bytes (SentencePiece skips longer ones) were cut "
                      "into sentences at sentence ends, spaces or character boundaries")
    assert out[2].startswith("albert-tf vocab: wrote ")
    tok = AlbertTokenizer(str(tmp_path / "out" / "spm.model"))
    pieces = "".join(tok.id_to_piece(i) for i in range(tok.vocab_size))
    assert tails <= set(pieces), tails - set(pieces)


def test_sample_sentences_cuts_lines_and_counts_what_the_sample_holds(tmp_path):
    (tmp_path / "c.txt").write_text("short line.\n" + "word " * 2000 + "\n\n" + "tail.\n", encoding="utf-8")
    sample, stats = sample_sentences([str(tmp_path / "c.txt")], 100, line_limit=1000)
    assert stats["split_lines"] == 1 and stats["lines"] == 4
    assert stats["sentences"] == len(sample) == 2 + 10  # 'word ' x 2000 = 9,999 bytes stripped: 10 pieces
    assert all(len(s.encode()) <= 1000 for s in sample) and "".join(sample).count("word") == 2000
    assert stats["sampled_bytes"] == stats["text_bytes"] == len("short line.") + len("tail.") + 9999 - 9
    few, few_stats = sample_sentences([str(tmp_path / "c.txt")], 3, line_limit=1000)
    assert len(few) == 3 and few_stats["sampled_bytes"] == sum(len(s.encode()) for s in few)
    assert few_stats["sampled_bytes"] < few_stats["text_bytes"]


@pytest.mark.parametrize("prefix", ["bad/", "existing"])
def test_an_output_prefix_that_is_a_directory_is_refused_naming_the_flag(corpus_dir, tmp_path, prefix):
    (tmp_path / "existing").mkdir()
    output = str(tmp_path / prefix) + ("/" if prefix.endswith("/") else "")
    proc = helpers.run_cli("vocab", ["--input", corpus_dir / "part-0.txt", "--output-prefix", output,
                                     "--vocab-size", 120], check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"albert-tf vocab: error: --output-prefix {output} is a directory, not a file-name prefix; "
                           f"give a prefix inside it, e.g. --output-prefix {output.rstrip('/')}/spm\n")
    assert sorted(os.listdir(tmp_path)) == ["existing"] and not os.listdir(tmp_path / "existing")


# ---------------------------------------------------------------------------------------------- progress, the child
class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Stream:
    def __init__(self, tty):
        self.text, self.tty = "", tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return self.tty


def test_progress_lines_in_a_log_and_on_a_terminal():
    """A log: a line at most every 10 s, and at least that often while the work goes on (tick repeats the latest);
    a terminal: one line refreshed in place every 0.5 s, ended before other output."""
    from albert_tf.data.vocab_trainer import Progress, sampling_text  # pylint: disable=import-outside-toplevel

    clock, log = _Clock(), _Stream(tty=False)
    progress = Progress(log, clock=clock)
    progress(sampling_text(4096, 250_000, 4000))
    clock.now = 3.0
    progress(sampling_text(8192, 500_000, 8000))  # within 10 s: not shown
    clock.now = 10.5
    progress.tick()  # the latest, 10.5 s after the first
    clock.now = 12.0
    progress("trainer: EM sub_iter=0 size=758 obj=8.29742")
    clock.now = 21.0
    progress.tick()
    assert log.text.splitlines() == [
        "progress: read 4,096 lines (0.2 MB of text), 4,000 sentences in the sample | elapsed 0s",
        "progress: read 8,192 lines (0.5 MB of text), 8,000 sentences in the sample | elapsed 10s",
        "progress: trainer: EM sub_iter=0 size=758 obj=8.29742 | elapsed 21s"]
    clock, terminal = _Clock(), _Stream(tty=True)
    progress = Progress(terminal, clock=clock)
    progress("trainer: Loaded all 17648 sentences")
    clock.now = 0.6
    progress("trainer: Normalizing sentences...")
    progress.end()
    assert terminal.text == ("\r\x1b[Kprogress: trainer: Loaded all 17648 sentences | elapsed 0s"
                             "\r\x1b[Kprogress: trainer: Normalizing sentences... | elapsed 0s\n")


def test_the_trainer_in_a_child_gives_the_bytes_of_training_here(corpus_dir):
    """The child process runs SentencePiece with the same arguments and sentences: the model's bytes equal those of
    SentencePiece trained in this process (an independent run of the library itself); its stages reach `progress`;
    the trainer's refusal comes back as its message."""
    import io  # pylint: disable=import-outside-toplevel

    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    from albert_tf.data import vocab_trainer  # pylint: disable=import-outside-toplevel

    sample, _ = sample_sentences(sorted(glob.glob(str(corpus_dir / "part-*.txt"))), 10**6)
    arguments = dict(vocab_size=120, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                     control_symbols="[CLS],[SEP],[MASK]", character_coverage=0.99995, input_sentence_size=0,
                     shuffle_input_sentence=False, num_threads=16)
    here = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(list(sample)), model_writer=here, minloglevel=2,
                                   **arguments)
    stages = []
    assert vocab_trainer.train_in_child(list(sample), progress=stages.append, **arguments) == here.getvalue()
    with pytest.raises(RuntimeError, match=r"Vocabulary size too high \(100000\)"):
        vocab_trainer.train_in_child(list(sample), **{**arguments, "vocab_size": 100_000})
