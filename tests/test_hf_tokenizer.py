"""The tokenizer `albert-tf convert --to hf` writes, read by transformers' own tokenizers, gives albert_tf's ids:
AutoTokenizer (tokenizer.json: transformers 4 and 5), transformers 4's AlbertTokenizerFast (the same file) and its
SentencePiece AlbertTokenizer (spiece.model), on real text: the Python and Linux documentation Debian installs
(`apt-get install -y python3-doc linux-doc-6.12`: English with code, numbers and punctuation, and linux-doc's
translations into Chinese, Japanese, Korean, Italian and Spanish), the texts of README.md and docs/, and the
normalization rules' own examples (tests/helpers.py EQUALITY_TEXTS).

Every line whose ids differ is counted and must fall under a rule that the tokenizer cannot express (what
`convert --to hf` says in one line, albert_tf.checkpoints.hf_tokenizer.unexpressed_rules):
  * tokenizer.json: the line holds the text of a digit-comma piece ("3," after a digit), or both segmentations have
    the same score (a tie, which SentencePiece's float32 sums and tokenizers' exact ones break differently);
  * SentencePiece: albert_tf's canonical order moved a tie, a word is longer than MAX_WORD_CHARS, or lowercasing
    character by character gives another text (Greek's final sigma: transformers 4's tokenize() does that first).
Any other differing line fails the test. The counts are printed in the run's summary (conftest.py). transformers
5's AlbertTokenizer class, which builds a normalizer of its own, is counted and printed, not held to this.

A sample of the documentation in the default suite; the whole selection (every 14th non-blank line: over 60,000
lines) under -m slow. No TensorFlow: CI runs this module in its development environment (transformers 5) and in a
small environment with transformers 4.57 (.ci/run). Without transformers or the documentation it is skipped, except
under CI=1."""
import json
import math
import os
import re

import pytest

from albert_tf.checkpoints import hf_tokenizer
from albert_tf.text import MAX_WORD_CHARS, AlbertTokenizer, canonical_order, normalize
from tests import helpers

STRIDE = 14  # every 14th non-blank line of the documentation: the slow test's selection
SAMPLE = 7  # every 7th line of that selection: the default suite's sample
# Text of the normalization rules, one example each (beside helpers.EQUALITY_TEXTS): a digit-comma piece after a
# space, an NFKD that leaves a space at the end, Hangul, Devanagari's and Telugu's vowel signs, uppercase Greek.
RULE_TEXTS = ["be 1, indicating 3, then 10, 2,5", "In Python 3, files", "\t|   .\u00b4", "리눅스 커널 메모리 배리어",
              "भारत एक विशाल देश है", "(శ్రీనివాస్  రెడ్డి)", "ΟΔΟΣ ΚΑΙ ΛΟΓΟΣ.", "ΑΣ'Α ΣΣ"]


def _require_transformers():
    if os.environ.get("CI") == "1":
        return __import__("transformers")
    return pytest.importorskip("transformers")


def _documentation(stride):
    """Every `stride`-th non-blank line of the documentation (helpers.doc_corpus_lines); skipped when it is not
    installed, a failure under CI=1."""
    lines = helpers.doc_corpus_lines(stride)
    if not lines:
        message = f"the Python and Linux documentation is not installed: {helpers.DOC_CORPUS_INSTALL}"
        if os.environ.get("CI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return lines


def _doc_texts():
    """The example texts of README.md and docs/*.md: what `text_a`, `pack` and `tf.constant` are given."""
    pattern = re.compile(r'"text_[ab]": "([^"]+)"|pack\(\["([^"]+)"\], \["([^"]+)"\]|constant\(\["([^"]+)"\]\)')
    found = []
    for name in ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir(os.path.join(helpers.REPO, "docs"))):
        with open(os.path.join(helpers.REPO, name), encoding="utf-8") as f:
            found += [text for match in pattern.findall(f.read()) for text in match if text]
    return found


def _vocabulary(directory, lines, vocab_size):
    """An uncased ALBERT vocabulary trained on `lines` as albert_tf normalizes them (its path): SentencePiece's
    trainer with `albert-tf vocab`'s settings (albert_tf.data.vocab), writing no record and so importing no
    TensorFlow."""
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    from albert_tf.data import vocab  # pylint: disable=import-outside-toplevel

    corpus = os.path.join(directory, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(normalize(line) for line in lines) + "\n")
    quoted = vocab._csv  # pylint: disable=protected-access  (SentencePiece's CSV quoting of the symbols)
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(directory, "spm"), vocab_size=vocab_size, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=quoted(vocab.CONTROL_SYMBOLS),
        user_defined_symbols=quoted(vocab.USER_DEFINED_SYMBOLS), character_coverage=vocab.CHARACTER_COVERAGE,
        num_threads=vocab.TRAINER_THREADS, minloglevel=2)
    return os.path.join(directory, "spm.model")


def _exported(directory, spm_model):
    """The tokenizer files `convert --to hf` writes for `spm_model`, in `directory`."""
    for name, data in hf_tokenizer.tokenizer_files(spm_model, True, False, 512).items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return directory


class Rules:
    """Which of the rules transformers cannot express explain a line's other ids (see the module's docstring)."""

    def __init__(self, spm_model):
        self.ours = AlbertTokenizer(spm_model)
        self.sp = self.ours._sp  # pylint: disable=protected-access  (SentencePiece's own segmentation and scores)
        self.digit_comma = [self.ours.id_to_piece(i).replace("\u2581", " ") for i in self.ours.digit_comma_ids]

    def tie(self, ours, theirs):
        score = self.sp.get_score
        return math.fsum(map(score, ours)) == math.fsum(map(score, theirs))

    def tokenizers_file(self, line, ours, theirs):
        text = " " + normalize(line)
        return any(piece in text for piece in self.digit_comma) or self.tie(ours, theirs)

    def sentencepiece(self, line, ours, theirs):
        raw = self.sp.encode(normalize(line))
        return (canonical_order(raw, self.ours.run_root, self.ours.run_power) != raw
                or max(map(len, line.split()), default=0) > MAX_WORD_CHARS
                or normalize("".join(c.lower() for c in line)) != normalize(line) or self.tie(ours, theirs))


def _tokenizers(transformers, directory):
    """[(name, tokenizer, the Rules method that explains its other lines, or None: counted only)]."""
    found = [("AutoTokenizer", transformers.AutoTokenizer.from_pretrained(directory), Rules.tokenizers_file)]
    if transformers.__version__.startswith("4."):
        found += [("AlbertTokenizerFast", transformers.AlbertTokenizerFast.from_pretrained(directory),
                   Rules.tokenizers_file),
                  ("AlbertTokenizer", transformers.AlbertTokenizer.from_pretrained(directory), Rules.sentencepiece)]
    else:
        found.append(("AlbertTokenizer", transformers.AlbertTokenizer.from_pretrained(directory), None))
    return found


def _check(transformers, spm_model, directory, lines, record_property, what):
    """Compares every tokenizer of `_tokenizers` with albert_tf's on `lines`; records the counts; fails on a line
    that no rule explains."""
    rules = Rules(spm_model)
    ours = rules.ours.encode(lines)
    unexplained = []
    for name, tokenizer, rule in _tokenizers(transformers, _exported(directory, spm_model)):
        theirs = tokenizer(lines, add_special_tokens=False)["input_ids"]
        differ = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        bad = [k for k in differ if rule and not rule(rules, lines[k], ours[k], theirs[k])]
        counts = (f"{len(differ) - len(bad)} of them under a rule it cannot express, {len(bad)} unexplained" if rule
                  else "(a normalizer of its own: not held to the rules)")
        record_property("summary", f"transformers {transformers.__version__} {name}: {len(differ)} of "
                                   f"{len(lines):,} lines ({what}) give other ids, {counts}")
        unexplained += [(name, lines[k], rules.ours.encode_as_pieces(lines[k]),
                         tokenizer.convert_ids_to_tokens(theirs[k])) for k in bad]
    assert not unexplained, unexplained[:5]


def _with_texts(lines):
    """`lines`, then the texts of README.md and docs/ and the rules' examples (also in uppercase)."""
    rules = RULE_TEXTS + helpers.EQUALITY_TEXTS
    return lines + _doc_texts() + rules + [t.upper() for t in rules]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """(spm model, lines): the default suite's sample of the documentation with `_with_texts`, and a 3,000-piece
    vocabulary trained on the sample."""
    lines = _documentation(STRIDE)[::SAMPLE]
    return _vocabulary(str(tmp_path_factory.mktemp("sample_vocab")), lines, 3000), _with_texts(lines)


def test_hf_tokenizers_give_our_ids_on_a_sample(sample, tmp_path, record_property):
    transformers = _require_transformers()
    spm_model, lines = sample
    _check(transformers, spm_model, str(tmp_path), lines, record_property, "sample")


def test_pairs_carry_their_segment_ids(sample, tmp_path):
    """transformers 5's default leaves token_type_ids out: tokenizer_config.json names them, so a pair's second
    segment is type 1 as in albert_tf's pack."""
    transformers = _require_transformers()
    spm_model, _ = sample
    ours = AlbertTokenizer(spm_model)
    for name, tokenizer, _ in _tokenizers(transformers, _exported(str(tmp_path), spm_model)):
        pair = tokenizer("a first sentence", "and its second")
        packed = ours.pack("a first sentence", "and its second", seq_length=len(pair["input_ids"]))
        assert pair["input_ids"] == packed["input_word_ids"].tolist(), name
        assert pair.get("token_type_ids") == packed["input_type_ids"].tolist(), name


@pytest.mark.slow
def test_hf_tokenizers_give_our_ids_on_the_documentation(tmp_path, record_property):
    """Over 60,000 lines (with `_with_texts`), an 8,000-piece vocabulary trained on them."""
    transformers = _require_transformers()
    lines = _documentation(STRIDE)
    assert len(lines) > 50_000
    spm_model = _vocabulary(str(tmp_path), lines, 8000)
    os.makedirs(tmp_path / "hf")
    _check(transformers, spm_model, str(tmp_path / "hf"), _with_texts(lines), record_property, "documentation")


# A hand-made vocabulary (after the special pieces): SentencePiece segments "▁0," as "▁0" + "," (-4 against "▁" +
# "0," at -7), "▁1," as "▁" + "1," (-4 against "▁1" + "," at -6.5, the best without "1,"), and "▁1,0" as "▁1" +
# ",0" (-5.5 against "▁" + "1," + "0" at -7).
HAND_PIECES = [("\u2581", -2.0), (",", -2.0), ("0", -3.0), ("1", -3.0), ("\u25810", -2.0), ("\u25811", -4.5),
               ("0,", -5.0), ("1,", -2.0), (",0", -1.0), ("\u2581x", -1.0), ("\u2581y", -1.0)]


def test_a_digit_comma_piece_starts_a_word_of_its_own_only_where_sentencepiece_picks_it(tmp_path):
    """tokenizer.json splits "1," off "▁1," (so its lowered score gives "1" + ","), but not "0," off "▁0," nor "1,"
    off "▁1,0", where SentencePiece picks no digit-comma piece."""
    _require_transformers()
    import tokenizers  # pylint: disable=import-outside-toplevel  (transformers' own dependency)

    vocab = [[piece, 0.0] for piece in hf_tokenizer.SPECIAL_PIECES] + [list(p) for p in HAND_PIECES]
    written = {"model": {"type": "Unigram", "unk_id": 1, "vocab": vocab}}
    (tmp_path / hf_tokenizer.HF_TOKENIZER_FILE).write_text(json.dumps(written), encoding="utf-8")
    spm_model = hf_tokenizer.spm_from_hf(str(tmp_path))
    theirs = tokenizers.Tokenizer.from_str(json.dumps(hf_tokenizer.tokenizer_json(spm_model, True, False)))
    ours = AlbertTokenizer(spm_model, lower_case=True, keep_accents=False)
    for text, pieces in [("x 0, y", ["\u2581x", "\u25810", ",", "\u2581y"]),
                         ("x 1, y", ["\u2581x", "\u2581", "1", ",", "\u2581y"]), ("1,0", ["\u25811", ",0"])]:
        assert ours.encode_as_pieces(text) == pieces
        assert theirs.encode(text, add_special_tokens=False).ids == ours.encode(text), text


def test_the_export_names_what_transformers_cannot_express_with_counts(sample):
    """`convert --to hf`'s note: one line, the vocabulary's own counts of digit-comma pieces and of pieces that can
    tie (powers of one string)."""
    spm_model, _ = sample
    ours = AlbertTokenizer(spm_model)
    line = hf_tokenizer.unexpressed_rules(spm_model)
    assert "\n" not in line
    assert f"the {len(ours.digit_comma_ids)} digit-comma pieces such as " in line
    assert f"the {sum(root >= 0 for root in ours.run_root)} pieces that repeat one string" in line
    assert "docs/fine-tuning.md" in line
