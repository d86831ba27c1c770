"""Reading corpus text (albert_tf.data.corpus): long lines cut into sentences, UTF-16 / UTF-32 files refused with
one line by vocab, create-data and the Beam pipeline."""
import random
import re

import pytest

import helpers
from albert_tf.data.corpus import check_text_files, split_long_line, wide_encoding


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
