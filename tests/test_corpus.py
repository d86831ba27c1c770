"""Reading corpus text (albert_tf.data.corpus): long lines cut into sentences, UTF-16 / UTF-32 files refused with
one line by vocab, create-data and the Beam pipeline."""
import gzip
import os
import random
import re
import sys

import pytest

import helpers
from albert_tf.data.corpus import (HEAD_BYTES, binary_kind, check_head, check_text_files, split_long_line,
                                   wide_encoding)


def test_long_line_cut_at_sentence_ends_then_spaces_then_characters():
    """Hand-worked examples at a 20-byte limit: the last sentence end that fits wins, else the last space, else
    20 bytes moved back to the start of a character."""
    assert split_long_line("One two. Three four five. Six.", 20) == ["One two.", "Three four five.", "Six."]
    assert split_long_line("alpha beta gamma delta epsilon", 20) == ["alpha beta gamma", "delta epsilon"]
    # 'é' is 2 bytes: 10 of them fill 20 bytes exactly, the 11th starts the next piece
    assert split_long_line("é" * 11, 20) == ["é" * 10, "é"]
    # '語' is 3 bytes: byte 20 falls inside the 7th one, which moves whole to the next piece
    assert split_long_line("語" * 8, 20) == ["語" * 6, "語" * 2]
    # a CJK full stop ends a sentence without a space after it
    assert split_long_line("日本語です。英語です。中文", 20) == ["日本語です。", "英語です。", "中文"]
    # closing quotes and brackets stay with their sentence
    assert split_long_line('He said "stop." (Then left.) And so on and on', 20) == [
        'He said "stop."', "(Then left.)", "And so on and on"]
    assert split_long_line("short", 20) == ["short"]  # fits: as it is


def test_a_long_line_is_cut_into_pieces_of_the_piece_limit():
    """create-data's cut (hand-worked): a line longer than `limit` is cut into pieces of at most `piece_limit`
    bytes, by the same rules (sentence ends, Chinese and Japanese ones without a space after them included); a
    line that fits `limit` stays whole, however long its sentences."""
    line = "One two. Three four five. Six seven eight nine ten eleven."
    assert split_long_line(line, 30, 20) == ["One two.", "Three four five.", "Six seven eight nine", "ten eleven."]
    assert split_long_line(line, 100, 20) == [line]
    # 。！？ end a sentence (3 bytes a character): no two of these sentences fit a 20-byte piece together
    assert split_long_line("这是句子。你好吗？很好！日本語です。", 30, 20) == [
        "这是句子。", "你好吗？", "很好！", "日本語です。"]
    assert split_long_line("短い。短い。", 30, 20) == ["短い。短い。"]  # fits: as it is
    with pytest.raises(ValueError, match="a line limit must hold a character"):
        split_long_line(line, 30, 3)


@pytest.mark.parametrize("seed", range(5))
def test_long_line_pieces_fit_and_keep_every_character(seed):
    """Random text of words, sentence ends, multi-byte characters and long runs without spaces: every piece fits
    the limit, and the pieces hold the line's characters in order (only white space at the cuts is dropped)."""
    rng = random.Random(seed)
    alphabet = ["a", "b", "é", "語", "😀", " ", " ", ". ", "! ", "。", "x" * 50]
    line = "".join(rng.choice(alphabet) for _ in range(3000)).strip()
    limit = rng.choice([8, 33, 100, 500])
    pieces = split_long_line(line, limit)
    assert all(0 < len(p.encode("utf-8")) <= limit and p == p.strip() for p in pieces)
    assert re.sub(r"\s", "", "".join(pieces)) == re.sub(r"\s", "", line)
    assert len(pieces) > 1


def test_wide_encodings_are_told_by_their_bom_or_their_nul_bytes():
    text = "A line of English text.\nAnother one.\n" * 20
    assert wide_encoding(text.encode("utf-16")) == "UTF-16"       # with a BOM
    assert wide_encoding(text.encode("utf-16-be")) == "UTF-16"    # no BOM: every other byte is NUL
    assert wide_encoding(text.encode("utf-32")) == "UTF-32"
    assert wide_encoding(text.encode("utf-32-le")) == "UTF-32"    # no BOM: three NULs of four bytes
    assert wide_encoding("中文字符".encode("utf-16-le")) is None  # no BOM, no NUL: nothing to tell it by
    assert wide_encoding(text.encode("utf-8")) is None
    assert wide_encoding(b"\xef\xbb\xbf" + text.encode("utf-8")) is None  # UTF-8's own BOM is fine
    assert wide_encoding(b"nul\x00 inside a line of text, once or twice\x00\n") is None
    assert wide_encoding(b"") is None


def test_binary_files_are_told_from_text_in_any_encoding():
    """Executables, archives and images are binary (a signature, NUL bytes that are no UTF-16 / UTF-32 text, or
    control bytes text does not hold); text is not, in UTF-8, UTF-16 or UTF-32 (BOM or not, Chinese in UTF-16
    without a NUL byte), or a man page with its overstrike (backspaces) and terminal colours (escapes)."""
    elf = open(os.path.realpath(sys.executable), "rb").read(HEAD_BYTES)
    assert elf.startswith(b"\x7fELF") and binary_kind(elf) == "an ELF executable or library"
    assert binary_kind(elf[64:]).startswith("NUL bytes in ")  # past its signature: still no text
    assert binary_kind(gzip.compress(b"text " * 1000)) == "gzip-compressed"
    assert binary_kind(random.Random(0).randbytes(HEAD_BYTES)).startswith("control bytes in ")
    text = "A line of English text.\nAnother one, then a third.\n" * 60
    for encoding in ("utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"):
        assert binary_kind(text.encode(encoding)[:HEAD_BYTES]) is None, encoding
    chinese = "".join(helpers.cjk_sentences(200))
    for encoding in ("utf-8", "utf-16-le", "utf-16-be", "gb18030"):
        assert binary_kind(chinese.encode(encoding)[:HEAD_BYTES]) is None, encoding
    man = "LS(1)\n\nN\bNA\bAM\bME\bE\n       ls - list \x1b[1mdirectory\x1b[0m contents\n" * 40
    assert binary_kind(man.encode("utf-8")) is None
    with pytest.raises(ValueError, match=r"^f looks like UTF-16; convert it"):  # no BOM, no NUL: still told
        check_head("f", chinese.encode("utf-16-le")[:HEAD_BYTES])


def test_a_binary_file_is_called_binary_in_one_line(tmp_path, cli):
    """The issue's case: an ELF executable given as corpus was "like UTF-32; convert it (iconv -f UTF-32 ...)"."""
    code, out, err = cli("vocab", "--input", sys.executable, "--output-prefix", tmp_path / "v" / "spm")
    assert (code, out) == (2, "")
    assert err == (f"albert-tf vocab: error: {sys.executable} is a binary file, not text (an ELF executable or "
                   "library): give UTF-8 text files, one sentence per line\n")
    assert not (tmp_path / "v").exists()


@pytest.fixture
def utf16_corpus(tmp_path):
    """A good UTF-8 file and, after it, the same corpus saved as UTF-16 (with a BOM, as Windows' Notepad does)."""
    good = helpers.write_corpus(str(tmp_path / "a.txt"), num_docs=20)
    with open(good, encoding="utf-8") as f:
        (tmp_path / "b.txt").write_bytes(f.read().encode("utf-16"))
    return tmp_path


def expected_error(command, path):
    return (f"albert-tf {command}: error: {path} looks like UTF-16; convert it to UTF-8 "
            f"(e.g. iconv -f UTF-16 -t UTF-8)\n")


def test_vocab_refuses_a_utf16_file_with_one_line(utf16_corpus, tmp_path):
    proc = helpers.run_cli("vocab", ["--input", utf16_corpus / "*.txt", "--output-prefix", tmp_path / "out" / "spm",
                                     "--vocab-size", 100], check=False)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, expected_error("vocab", utf16_corpus / "b.txt"), "")
    assert not (tmp_path / "out").exists()


def test_create_data_refuses_a_utf16_file_with_one_line(utf16_corpus, tmp_path, tiny_spm_model):
    proc = helpers.run_cli("create-data", ["--input", utf16_corpus / "*.txt", "--spm-model", tiny_spm_model,
                                           "--output", tmp_path / "out" / "train"], check=False)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, expected_error("create-data", utf16_corpus / "b.txt"),
                                                           "")
    assert not (tmp_path / "out").exists()


def test_beam_pipeline_refuses_a_utf16_file_before_it_runs(utf16_corpus, tmp_path, tiny_spm_model):
    pytest.importorskip("apache_beam")
    from albert_tf.data import beam  # pylint: disable=import-outside-toplevel

    with pytest.raises(ValueError, match=re.escape(expected_error("x", utf16_corpus / "b.txt").split("error: ")[1]
                                                   .strip())):
        beam.run_pipeline(str(utf16_corpus / "*.txt"), tiny_spm_model, str(tmp_path / "out" / "train"))
    assert not (tmp_path / "out").exists()


def test_check_text_files_names_the_first_wide_file_in_file_order(tmp_path):
    files = []
    for name, encoding in (("1.txt", "utf-8"), ("2.txt", "utf-32"), ("3.txt", "utf-16")):
        (tmp_path / name).write_bytes("some text\n".encode(encoding))
        files.append(str(tmp_path / name))
    with pytest.raises(ValueError, match=r"2\.txt looks like UTF-32; convert it to UTF-8 \(e\.g\. iconv -f UTF-32"):
        check_text_files(files)
    check_text_files(files[:1])
