"""create-data: instance semantics (SOP, layout, truncation), determinism, atomic shards, bad input, records."""
import collections
import glob
import json
import os
import random
import re
import threading

import numpy as np
import pytest
import tensorflow as tf

import helpers
import albert_tf
from albert_tf.data import instances, record_index
from albert_tf.data.create_pretraining_data import InstanceOptions, create_pretraining_data, sop_balance_warning
from albert_tf.data.corpus import decode_utf8
from albert_tf.data.features import feature_spec
from albert_tf.text import CLS_ID, MASK_ID, SEP_ID
from albert_tf.text import AlbertTokenizer

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


SEQ, PRED = 64, 10


def _read(paths, seq=SEQ, pred=PRED):
    """All records of `paths` (in file order) parsed with feature_spec, as numpy arrays."""
    raw = [r.numpy() for p in paths for r in tf.data.TFRecordDataset(p)]
    parsed = tf.io.parse_example(tf.constant(raw), feature_spec(seq, pred))
    return raw, {k: v.numpy() for k, v in parsed.items()}


def _make(tmp_path, corpus, model, name="out", **kwargs):
    options = kwargs.pop("options", InstanceOptions(max_seq_length=SEQ, max_predictions=PRED))
    return create_pretraining_data(str(corpus), model, str(tmp_path / name / "data"), options=options,
                                   progress=False, **kwargs)


# ------------------------------------------------------------------------------------------- instance logic
def _reference_truncate(rnd, la, lb, max_tokens):
    """The original's loop: returns (front cuts of A, back cuts of A, front of B, back of B)."""
    cuts = [[0, 0], [0, 0]]
    while la + lb > max_tokens:
        side = 0 if la > lb else 1
        cuts[side][0 if rnd.random() < 0.5 else 1] += 1
        if side == 0:
            la -= 1
        else:
            lb -= 1
    return cuts[0][0], cuts[0][1], cuts[1][0], cuts[1][1]


@pytest.mark.parametrize("la,lb,max_tokens", [
    (40, 10, 30), (10, 40, 30), (25, 25, 20), (25, 25, 21), (12, 10, 11), (30, 3, 61), (7, 6, 4)])
def test_truncation_matches_original_loop(la, lb, max_tokens):
    rnd = random.Random(0)
    ours, ref = collections.Counter(), collections.Counter()
    for _ in range(4000):
        a0, a1, b0, b1 = instances._truncate(rnd, 100, 100 + la, 500, 500 + lb, max_tokens)
        ours[(a0 - 100, 100 + la - a1, b0 - 500, 500 + lb - b1)] += 1
        ref[_reference_truncate(rnd, la, lb, max_tokens)] += 1
    # Same total cut per side (deterministic) and the same front/back split distribution.
    assert {(k[0] + k[1], k[2] + k[3]) for k in ours} == {(k[0] + k[1], k[2] + k[3]) for k in ref}
    for key in set(ours) | set(ref):
        assert abs(ours[key] - ref[key]) / 4000 < 0.03, key
    if la + lb > max_tokens:
        assert all(la - k[0] - k[1] + lb - k[2] - k[3] == max_tokens for k in ours)


def _sentence_offsets(doc_lengths):
    """offsets for documents whose sentence lengths are given; flat token = 1000 * doc + sentence index."""
    offsets, flat, pos = [], [], 0
    for d, lengths in enumerate(doc_lengths):
        bounds = [pos]
        for s, n in enumerate(lengths):
            flat.extend([1000 * d + s] * n)
            pos += n
            bounds.append(pos)
        offsets.append(bounds)
    return offsets, np.array(flat)


def test_sop_pairs_follow_the_original():
    """Label 0: A's sentences then B's, contiguous. Label 1: the swap (B's sentences precede A's), or a
    one-sentence chunk paired with another document's sentences. Labels are balanced."""
    rnd = random.Random(1)
    docs = [[rnd.randint(3, 20) for _ in range(rnd.randint(2, 15))] for _ in range(40)]
    offsets, flat = _sentence_offsets(docs)
    labels = collections.Counter()
    for d in range(len(docs)):
        for r in range(30):
            for a0, a1, b0, b1, label, fallback in instances.document_instances(
                    offsets, d, len(docs), random.Random(d * 100 + r), max_seq_length=1000, short_seq_prob=0.3):
                a, b = flat[a0:a1], flat[b0:b1]
                assert a.size and b.size
                assert np.all(a // 1000 == d)
                if fallback:
                    assert label == 1 and np.all(b // 1000 != d) and len(np.unique(a)) == 1
                    continue
                labels[label] += 1
                assert np.all(b // 1000 == d)
                if label == 0:
                    assert a1 == b0 and a[-1] % 1000 < b[0] % 1000
                else:
                    assert b1 == a0 and b[-1] % 1000 < a[0] % 1000
    balance = labels[1] / (labels[0] + labels[1])
    assert abs(balance - 0.5) < 0.03


def test_chunks_reach_target_and_short_targets_happen():
    offsets, _ = _sentence_offsets([[10] * 50])
    full, short = [], []
    for r in range(300):
        out = instances.document_instances(offsets, 0, 1, random.Random(r), max_seq_length=53, short_seq_prob=0.2)
        lengths = [a1 - a0 + b1 - b0 for a0, a1, b0, b1, _, _ in out]
        (full if len(out) <= 10 else short).append(lengths)
    # Target 50: five sentences per chunk, ten chunks of exactly 50; ~20% of documents use a shorter target.
    assert all(lengths == [50] * 10 for lengths in full)
    assert 0.12 < len(short) / 300 < 0.28


# ------------------------------------------------------------------------------------------- end to end
def test_layout_matches_hand_built_example(tmp_path, tiny_spm_model):
    tok = AlbertTokenizer(tiny_spm_model)
    s0, s1 = "The river was old and ancient.", "Children like music!"
    (tmp_path / "c.txt").write_text(f"{s0}\n{s1}\n", encoding="utf-8")
    summary = _make(tmp_path, tmp_path / "c.txt", tiny_spm_model,
                    options=InstanceOptions(max_seq_length=SEQ, max_predictions=PRED, short_seq_prob=0, mask=False))
    _, rec = _read(summary.output_files)
    assert len(rec["input_ids"]) == 1
    a, b = tok.encode(s0), tok.encode(s1)
    if rec["next_sentence_labels"][0, 0] == 1:
        a, b = b, a
    ids = [CLS_ID] + a + [SEP_ID] + b + [SEP_ID]
    pad = SEQ - len(ids)
    np.testing.assert_array_equal(rec["input_ids"][0], ids + [0] * pad)
    np.testing.assert_array_equal(rec["input_mask"][0], [1] * len(ids) + [0] * pad)
    np.testing.assert_array_equal(rec["segment_ids"][0], [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * pad)
    starts = [1] + [int(tok.id_to_piece(i).startswith("\u2581") or not tok.id_to_piece(i).isalpha())
                    for i in ids[1:-1]] + [1]
    starts[len(a) + 1] = 1
    np.testing.assert_array_equal(rec["token_boundary"][0], starts + [0] * pad)
    assert not rec["masked_lm_positions"].any() and not rec["masked_lm_weights"].any()


def test_sop_end_to_end_order(tmp_path, tiny_spm_model):
    """Through tokenizer and records: label 0 keeps the text order, label 1 reverses it (or pairs documents)."""
    corpus = helpers.write_corpus(str(tmp_path / "c.txt"), num_docs=150, min_sents=2, max_sents=10, seed=3)
    summary = _make(tmp_path, corpus, tiny_spm_model,
                    options=InstanceOptions(max_seq_length=SEQ, max_predictions=PRED, mask=False, dupe_factor=3))
    _, rec = _read(summary.output_files)
    tok = AlbertTokenizer(tiny_spm_model)
    docs = open(corpus, encoding="utf-8").read().split("\n\n")
    as_text = lambda ids: "".join(chr(256 + int(i)) for i in ids)  # noqa: E731
    doc_text = [as_text([i for line in d.splitlines() for i in tok.encode(line)]) for d in docs]
    counts = collections.Counter()
    for ids, seg, label in zip(rec["input_ids"], rec["segment_ids"], rec["next_sentence_labels"][:, 0]):
        length = int((ids != 0).sum())
        sep = int(np.flatnonzero(ids == SEP_ID)[0])
        a, b = as_text(ids[1:sep]), as_text(ids[sep + 1:length - 1])
        assert np.all(seg[sep + 1:length] == 1) and np.all(seg[:sep + 1] == 0)
        where = [(t.find(a), t.find(b)) for t in doc_text]
        same = [(pa, pb) for pa, pb in where if pa >= 0 and pb >= 0]
        if not same:  # the one-sentence fallback: B from another document
            assert label == 1
            counts["fallback"] += 1
            continue
        pa, pb = same[0]
        counts[(label, pa < pb)] += 1
    assert counts[(0, False)] == 0 and counts[(1, True)] == 0
    balance = counts[(1, False)] / (counts[(1, False)] + counts[(0, True)])
    assert abs(balance - 0.5) < 0.05, counts
    s = summary.stats
    assert s.instances == len(rec["input_ids"]) and s.random_next == counts["fallback"]


def test_masked_records_parse_and_agree_with_unmasked(tmp_path, tiny_spm_model, corpus_file):
    masked = _make(tmp_path, corpus_file, tiny_spm_model, name="m", num_shards=2)
    plain = _make(tmp_path, corpus_file, tiny_spm_model, name="p", num_shards=2,
                  options=InstanceOptions(max_seq_length=SEQ, max_predictions=PRED, mask=False))
    _, m = _read(masked.output_files)
    _, p = _read(plain.output_files)
    assert len(m["input_ids"]) == len(p["input_ids"]) > 20
    for key in ("input_mask", "segment_ids", "token_boundary", "next_sentence_labels"):
        np.testing.assert_array_equal(m[key], p[key])
    # --no-mask: zero prediction slots, no [MASK] anywhere.
    assert not p["masked_lm_positions"].any() and not p["masked_lm_ids"].any() and not p["masked_lm_weights"].any()
    assert not (p["input_ids"] == MASK_ID).any()
    masked_total = 0
    for i in range(len(m["input_ids"])):
        k = int(m["masked_lm_weights"][i].sum())
        pos = m["masked_lm_positions"][i, :k]
        assert np.all(m["masked_lm_weights"][i, :k] == 1) and not m["masked_lm_positions"][i, k:].any()
        np.testing.assert_array_equal(m["masked_lm_ids"][i, :k], p["input_ids"][i, pos])
        changed = np.flatnonzero(m["input_ids"][i] != p["input_ids"][i])
        assert set(changed) <= set(pos.tolist())
        assert not np.isin(p["input_ids"][i, pos], [CLS_ID, SEP_ID, 0]).any()
        masked_total += k
    assert masked.stats.masked == masked_total
    assert 0.12 < masked_total / masked.stats.maskable < 0.17


def test_same_bytes_whatever_the_workers(tmp_path, tiny_spm_model):
    for i in range(2):
        helpers.write_corpus(str(tmp_path / f"c{i}.txt"), num_docs=40, seed=i)
    pattern = str(tmp_path / "c*.txt")
    one = _make(tmp_path, pattern, tiny_spm_model, name="w1", num_shards=3, workers=1, block_documents=7)
    two = _make(tmp_path, pattern, tiny_spm_model, name="w2", num_shards=3, workers=2, block_documents=7)
    for a, b in zip(one.output_files, two.output_files):
        assert open(a, "rb").read() == open(b, "rb").read()
    other_seed = _make(tmp_path, pattern, tiny_spm_model, name="s", num_shards=3, block_documents=7,
                       options=InstanceOptions(max_seq_length=SEQ, max_predictions=PRED, seed=1))
    assert open(one.output_files[0], "rb").read() != open(other_seed.output_files[0], "rb").read()
    # Round-robin: shard sizes differ by at most one record.
    sizes = [len(_read([f])[0]) for f in one.output_files]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == one.stats.instances


def test_record_count_index_lists_each_shard_and_replaces_a_stale_one(tmp_path, tiny_spm_model):
    corpus = helpers.write_corpus(str(tmp_path / "c.txt"), num_docs=30)
    index = str(tmp_path / "out" / ".data.record_counts.json")
    os.makedirs(tmp_path / "out")
    with open(index, "w", encoding="utf-8") as f:
        f.write("left over from an earlier run")
    summary = _make(tmp_path, corpus, tiny_spm_model, num_shards=3, block_documents=5)
    assert sorted(os.listdir(tmp_path / "out")) == sorted(
        [os.path.basename(p) for p in summary.output_files] + [".data.record_counts.json"])
    with open(index, encoding="utf-8") as f:
        assert json.load(f)["format"] == "albert_tf.record_counts"
    counted = {os.path.basename(p): (len(_read([p])[0]), os.path.getsize(p)) for p in summary.output_files}
    assert record_index.read_index(index) == counted  # counts taken independently, by reading the shards
    assert sum(n for n, _ in counted.values()) == summary.stats.instances


def test_failure_leaves_no_files(tmp_path, tiny_spm_model, monkeypatch):
    corpus = helpers.write_corpus(str(tmp_path / "c.txt"), num_docs=30)
    calls = []
    real = instances.BlockProcessor.process

    def failing(self, block):
        calls.append(block.block_index)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(self, block)

    monkeypatch.setattr(instances.BlockProcessor, "process", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        _make(tmp_path, corpus, tiny_spm_model, num_shards=2, block_documents=5)
    assert not (tmp_path / "out").exists()  # nothing left, not even the folder the run made


# ------------------------------------------------------------------------------------------- bad input
def _create_data(tmp_path, model, pattern, **changes):
    """albert_tf.create_data of `pattern` into tmp_path/o/data (64 tokens, 10 predictions), `changes` over it."""
    return albert_tf.create_data(albert_tf.CreateDataConfig(**{
        "input": str(pattern), "spm_model": str(model), "output": str(tmp_path / "o" / "data"),
        "max_seq_length": 64, "max_predictions": 10, **changes}))


def _refusal(tmp_path, model, pattern, **changes):
    """The one-line message _create_data refuses the input with (ValueError / FileNotFoundError: the CLI's exit 2)."""
    with pytest.raises((ValueError, FileNotFoundError)) as info:
        _create_data(tmp_path, model, pattern, **changes)
    return str(info.value)


def test_glob_matching_nothing(tmp_path, tiny_spm_model):
    err = _refusal(tmp_path, tiny_spm_model, tmp_path / "nope*.txt")
    assert "nope*.txt" in err and "matches no file" in err


def test_empty_corpus(tmp_path, tiny_spm_model):
    (tmp_path / "e.txt").write_text("\n  \n\n", encoding="utf-8")
    err = _refusal(tmp_path, tiny_spm_model, tmp_path / "e.txt")
    assert "empty corpus" in err and "e.txt" in err
    assert not glob.glob(str(tmp_path / "o" / "*"))


def test_all_documents_too_short(tmp_path, tiny_spm_model):
    (tmp_path / "s.txt").write_text("One sentence only.\n\nAnother lonely one.\n", encoding="utf-8")
    err = _refusal(tmp_path, tiny_spm_model, tmp_path / "s.txt")
    assert "all 2 documents" in err and "fewer than 2 sentences" in err and "s.txt" in err
    assert not glob.glob(str(tmp_path / "o" / "*"))


GPL = "/usr/share/common-licenses/GPL-3"  # real, messy English (Debian's base-files installs it)


def _one_line(text):
    return " ".join(text.split())


def test_a_text_on_one_line_is_cut_into_sentences_not_skipped(tmp_path, tiny_spm_model, capsys):
    """The issue's case: a file that is one long line (a licence, a man page joined into one line) was a document
    of one sentence, skipped (the summary said only "skipped (fewer than 2 sentences)"), while vocab cut the same
    line into sentences and learned from it. Now create-data cuts it as vocab does, at sentence ends (. ! ? and
    Chinese / Japanese 。！？), into pieces of at most half --max-seq-length bytes: the English licence's tokens all
    reach the records (the reference: the tokenizer's count for the whole line), in balanced sentence-order pairs,
    and the Chinese and Japanese lines make instances too."""
    with open(GPL, encoding="utf-8") as f:
        texts = {"gpl.txt": _one_line(f.read()), "ja.txt": "".join(helpers.cjk_sentences(400, "ja", seed=1)),
                 "zh.txt": "".join(helpers.cjk_sentences(400, "zh", seed=2))}
    (tmp_path / "in").mkdir()
    for name, text in texts.items():
        assert len(text.encode("utf-8")) > 4192 and "\n" not in text
        (tmp_path / "in" / name).write_text(text + "\n", encoding="utf-8")
    options = InstanceOptions(max_seq_length=SEQ, max_predictions=PRED, mask=False)
    summary = create_pretraining_data(str(tmp_path / "in" / "gpl.txt"), tiny_spm_model, str(tmp_path / "o" / "d"),
                                      options=options, progress=False)
    _, rec = _read(summary.output_files)
    tokenizer = AlbertTokenizer(tiny_spm_model)
    in_records = int(rec["input_mask"].sum()) - 3 * len(rec["input_mask"])
    assert 0.95 < in_records / len(tokenizer.encode(texts["gpl.txt"])) < 1.05
    assert 0.4 < rec["next_sentence_labels"].mean() < 0.6
    last = tokenizer.encode("Public License instead of this License.")  # the licence's last sentence
    flat = rec["input_ids"].ravel().tolist()
    assert any(flat[i:i + len(last)] == last for i in range(len(flat)))

    summary = create_pretraining_data(str(tmp_path / "in" / "*.txt"), tiny_spm_model, str(tmp_path / "o" / "e"),
                                      options=options)
    assert (summary.stats.documents, summary.stats.skipped_documents, summary.stats.split_lines) == (3, 0, 3)
    assert "3 line(s) longer than 4192 bytes cut into sentences (as vocab cuts them)" in capsys.readouterr().out
    assert summary.stats.instances > len(rec["input_mask"]) + 50  # the Chinese and Japanese made instances too


def test_skipped_files_are_named_with_their_sizes_and_too_much_skipped_text_stops_the_run(tmp_path, tiny_spm_model,
                                                                                           cli):
    """Documents of one sentence are skipped (they make no sentence-order pair): the summary counts their bytes and
    names every file that made no instance, with its size; past --max-skipped-share of the input's bytes
    (default 0.05) the run stops, exit 2, one line naming the file, no shard written."""
    (tmp_path / "in").mkdir()
    helpers.write_corpus(str(tmp_path / "in" / "b_good.txt"), num_docs=12)
    short = tmp_path / "in" / "c_short.txt"
    short.write_text("\n\n".join(f"Heading number {i} of the list." for i in range(20)) + "\n", encoding="utf-8")
    (tmp_path / "in" / "a_empty.txt").write_bytes(b"")
    sizes = {p.name: p.stat().st_size for p in (tmp_path / "in").iterdir()}
    skipped_bytes = sum(len(f"Heading number {i} of the list.\n") for i in range(20))  # the lines as read
    assert 0.05 < skipped_bytes / sum(sizes.values()) < 0.5
    args = ["create-data", "--input", tmp_path / "in" / "*.txt", "--spm-model", tiny_spm_model, "--max-seq-length",
            SEQ, "--max-predictions", PRED]
    code, out, err = cli(*args, "--output", tmp_path / "o" / "d")
    assert (code, out) == (2, "")
    assert err == (f"albert-tf create-data: error: skipped text: 20 document(s) with fewer than 2 sentences hold "
                   f"{skipped_bytes:,} of the input's {sum(sizes.values()):,} bytes "
                   f"({100 * skipped_bytes / sum(sizes.values()):.1f}%), more than --max-skipped-share 0.05; most in "
                   f"{short} ({skipped_bytes:,} of its {sizes['c_short.txt']:,} bytes): put one sentence per line "
                   "and a blank line between documents, or raise the flag (1: never stop); no shard written\n")
    assert not (tmp_path / "o").exists() or not os.listdir(tmp_path / "o")
    code, out, err = cli(*args, "--output", tmp_path / "o" / "d", "--max-skipped-share", 1)
    assert code == 0, err
    assert (f"skipped (fewer than 2 sentences) 20: {skipped_bytes:,} of the input's {sum(sizes.values()):,} bytes"
            in out)
    assert (f"skipped 2 file(s) that made no instance (every document shorter than 2 sentences, or no text): "
            f"{tmp_path / 'in' / 'a_empty.txt'} (0 bytes), {short} ({sizes['c_short.txt']:,} bytes)\n") in out
    assert cli(*args, "--output", tmp_path / "o" / "e", "--max-skipped-share", 1.5)[0] == 2


def test_a_one_document_corpus_is_warned_about_its_sop_balance(tmp_path, tiny_spm_model, cli):
    """The issue's case: one document whose lines (paragraphs) are each as long as an instance makes one-sentence
    chunks, whose B comes from the same document and which are always labelled 1: 65% of the labels are 1, and
    nothing said so. Now a warning names the share and the cause. A corpus of many documents of short sentences
    gets none."""
    with open(GPL, encoding="utf-8") as f:
        paragraphs = [_one_line(p) for p in f.read().split("\n\n") if p.strip()]
    corpus = tmp_path / "one.txt"
    corpus.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    code, out, err = cli("create-data", "--input", corpus, "--spm-model", tiny_spm_model, "--output",
                         tmp_path / "o" / "d", "--max-seq-length", SEQ, "--max-predictions", PRED)
    assert code == 0
    labels = _read([str(tmp_path / "o" / "d-00000-of-00001.tfrecord")])[1]["next_sentence_labels"]
    share = labels.mean()
    assert share > 0.6 and "documents 1, skipped" in out
    warning = [line for line in err.splitlines() if "SOP labels" in line]
    assert len(warning) == 1 and warning[0].startswith(
        f"albert-tf create-data: warning: SOP labels out of balance: {100 * share:.0f}% of the {len(labels)} "
        "instances are labelled 1 (swapped or random B), not about 50%: ")
    assert "took their B from the same document (the corpus is one document" in warning[0]
    code, _, err = cli("create-data", "--input", helpers.write_corpus(str(tmp_path / "many.txt")), "--spm-model",
                       tiny_spm_model, "--output", tmp_path / "o2" / "d", "--max-seq-length", SEQ)
    assert code == 0 and "SOP labels" not in err


def test_sop_balance_warning_by_hand():
    """Warned when the one-sentence chunks (always label 1) move the share of 1 more than 0.1 from 0.5, or the
    labels drawn are further than 0.1 and than chance explains (3 standard deviations: 0.34 at 20 instances)."""
    stats = instances.BlockStats
    assert sop_balance_warning(stats(documents=9, instances=100, swapped=50, random_next=18)) is None  # 0.59
    assert "another document" in sop_balance_warning(stats(documents=9, instances=100, swapped=61, random_next=22))
    assert sop_balance_warning(stats(documents=9, instances=20, swapped=16, random_next=0)) is None  # 0.3 < 0.34
    assert "80% of the 2000 instances" in sop_balance_warning(stats(documents=9, instances=2000, swapped=1600))
    assert sop_balance_warning(stats()) is None


def test_invalid_utf8_is_replaced_counted_and_reported(tmp_path, tiny_spm_model, capsys):
    path = tmp_path / "bad.txt"
    path.write_bytes("The river was old.\nThe city is new \xff\xfe here.\n\nMusic and science.\nWater.\n"
                     .encode("latin-1"))
    result = _create_data(tmp_path, tiny_spm_model, path, no_mask=True)
    assert result.exit_code == 0 and result.replaced_bytes == {str(path): 2}
    captured = capsys.readouterr()
    assert "bad.txt: replaced 2 bytes of invalid UTF-8" in captured.err  # a warning; the summary is the result
    assert "documents 2, skipped (fewer than 2 sentences) 0" in captured.out
    raw, rec = _read(sorted(glob.glob(str(tmp_path / "o" / "data-*.tfrecord"))))
    assert len(raw) >= 2


def test_bad_options(tmp_path, tiny_spm_model, corpus_file):
    assert "--max-seq-length must be at least 5" in _refusal(tmp_path, tiny_spm_model, corpus_file, max_seq_length=4)
    assert ".missing" in _refusal(tmp_path, tiny_spm_model + ".missing", corpus_file)


def test_fast_serialization_equals_protobuf():
    rng = np.random.default_rng(0)
    n = 50
    feats = {
        "input_ids": rng.integers(0, 40000, (n, 300)) * (rng.random((n, 300)) < 0.8),
        "input_mask": rng.integers(0, 2, (n, 300)),
        "masked_lm_positions": rng.integers(0, 300, (n, 7)),
        "masked_lm_weights": rng.random((n, 7)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (n, 1)),
        "big": rng.integers(0, 1 << 34, (n, 3)),
    }
    ours = instances.encode_examples(feats)
    for i in range(n):
        ex = tf.train.Example(features=tf.train.Features(feature={
            k: tf.train.Feature(float_list=tf.train.FloatList(value=v[i])) if v.dtype.kind == "f" else
            tf.train.Feature(int64_list=tf.train.Int64List(value=v[i])) for k, v in feats.items()}))
        assert ours[i] == ex.SerializeToString(deterministic=True)


def test_worker_side_does_not_import_tensorflow():
    """Spawned workers import only the instance-building code: no TensorFlow (seconds and ~400 MB each)."""
    code = ("import sys; import albert_tf.data.create_pretraining_data, albert_tf.data.instances; "
            "print('tensorflow' in sys.modules)")
    out = helpers.run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_cased_flag_keeps_case(tmp_path, tiny_spm_model, corpus_file):
    """--cased tokenizes without lowercasing: the tiny vocabulary was trained on cased text, so ids differ."""
    outputs = {}
    for flag in ((), ("--cased",)):
        out = tmp_path / ("cased" if flag else "lower")
        assert _create_data(out / "x", tiny_spm_model, corpus_file, no_mask=True, cased=bool(flag) or None,
                            output=str(out / "data")).exit_code == 0
        outputs[bool(flag)] = _read(sorted(glob.glob(str(out / "data*"))))[1]["input_ids"]
    tok = AlbertTokenizer(tiny_spm_model, lower_case=False)
    upper = {i for i in range(tok.vocab_size) if any(ch.isupper() for ch in tok.id_to_piece(i)) and i > 4}
    assert upper  # the tiny vocabulary was trained on cased text
    assert upper & set(outputs[True].ravel().tolist())
    assert not upper & set(outputs[False].ravel().tolist())


# (bytes, replaced bytes counted by hand): each invalid sequence the decoder reports is one U+FFFD
INVALID_UTF8 = [
    (b"plain", 0), (b"a\xff\xfeb", 2), (b"\xc3\xa9\xff", 1), (b"\xe2\x82", 2), (b"\xe2\x82z", 2),
    (b"\xf0\x9f\x98 \xf0\x9f\x98\x80", 3), (b"\xed\xa0\x80", 3), (b"\x80" * 7 + b"ok\xc3", 8),
    ("a U+FFFD in the text: \ufffd".encode("utf-8") + b"\xff", 1), (b"\xe2\xef\xbf\xbd\xef\xbf", 3),
]


@pytest.mark.parametrize("raw,replaced", INVALID_UTF8)
def test_decode_utf8_gives_pythons_replacement_and_counts_the_bytes(raw, replaced):
    assert decode_utf8(raw) == (raw.decode("utf-8", "replace"), replaced)


def _reference_invalid_bytes(raw):
    """The bytes of the invalid sequences, from strict decoding resumed after each error the decoder reports."""
    count = 0
    while True:
        try:
            raw.decode("utf-8")
            return count
        except UnicodeDecodeError as error:
            count += error.end - error.start
            raw = raw[error.end:]


def test_decode_utf8_counts_as_the_reference_on_random_bytes():
    rng = random.Random(0)
    pieces = [b"\xef\xbf\xbd", "é中😀 a".encode("utf-8"), b"\xe2\x82", b"\xf0\x9f", b"\x80", b"\xff", b"\xc3"]
    for _ in range(2000):
        raw = b"".join(rng.choice(pieces) if rng.random() < 0.7 else bytes([rng.randrange(256)])
                       for _ in range(rng.randrange(12)))
        assert decode_utf8(raw) == (raw.decode("utf-8", "replace"), _reference_invalid_bytes(raw)), raw


def test_decode_utf8_counts_apart_in_threads_decoding_at_once():
    """vocab and create-data share decode_utf8; a count is the call's own, whoever else decodes at the same time."""
    barrier, wrong = threading.Barrier(4), []

    def decode(raw, replaced):
        barrier.wait()
        for _ in range(3000):
            if decode_utf8(raw)[1] != replaced:
                wrong.append(raw)
                return

    threads = [threading.Thread(target=decode, args=(raw * 50, replaced * 50))
               for raw, replaced in INVALID_UTF8[1:5]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong


# ------------------------------------------------------------------------------------------- the output prefix
def test_a_rerun_with_other_shards_is_refused_then_overwrite_replaces_only_create_datas(tmp_path, tiny_spm_model,
                                                                                         cli):
    """An earlier 4-shard run under the prefix: a 2-shard run is refused with one line naming the 4 files and
    --overwrite, and writes nothing; with --overwrite the 4 go once the 2 are in place, and nothing else of the
    folder is touched. A file named like a shard that no index lists is never removed."""
    corpus = helpers.write_corpus(str(tmp_path / "c.txt"), num_docs=30)
    out = tmp_path / "data"
    common = ["--input", corpus, "--spm-model", tiny_spm_model, "--output", out / "train", "--max-seq-length", SEQ,
              "--max-predictions", PRED]
    assert cli("create-data", *common, "--num-shards", 4)[0] == 0
    old = [f"train-{i:05d}-of-00004.tfrecord" for i in range(4)]
    theirs = ["train-notes.txt", "train-00000-of-00004.tfrecord.bak", "train2-00000-of-00001.tfrecord", "x.txt"]
    for name in theirs:
        (out / name).write_text("the user's own")
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}

    code, stdout, stderr = cli("create-data", *common, "--num-shards", 2)
    assert (code, stdout) == (2, "")
    assert stderr == (f"albert-tf create-data: error: --output {out / 'train'}: an earlier run's shards that this run "
                      "(--num-shards 2) would not replace, and that a glob over the prefix would mix in: 4 file(s): "
                      + ", ".join(str(out / n) for n in old) + "; pass --overwrite to remove them once this run "
                      "succeeds, or choose another --output\n")
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before  # nothing written or removed

    code, stdout, stderr = cli("create-data", *common, "--num-shards", 2, "--overwrite")
    assert code == 0 and "wrote " in stdout, stderr
    new = [f"train-{i:05d}-of-00002.tfrecord" for i in range(2)]
    assert sorted(os.listdir(out)) == sorted(new + theirs + [".train.record_counts.json"])
    assert sorted(record_index.read_index(str(out / ".train.record_counts.json"))) == new
    assert all((out / name).read_text() == "the user's own" for name in theirs)

    (out / "train-00007-of-00009.tfrecord").write_bytes(b"not create-data's")  # named like a shard, not listed
    code, stdout, stderr = cli("create-data", *common, "--num-shards", 3, "--overwrite")
    assert (code, stdout) == (2, "")
    assert stderr == (f"albert-tf create-data: error: --output {out / 'train'}: 1 file(s): "
                      f"{out / 'train-00007-of-00009.tfrecord'} named like its shards, not listed in its record-count "
                      f"index {out / '.train.record_counts.json'}, so not known to be create-data's: move or delete "
                      "them yourself, or choose another --output\n")
    assert (out / "train-00007-of-00009.tfrecord").read_bytes() == b"not create-data's"


@pytest.mark.parametrize("prefix", ["dir/", "existing"])
def test_an_output_prefix_that_is_a_directory_is_refused(tmp_path, tiny_spm_model, corpus_file, cli, prefix):
    (tmp_path / "existing").mkdir()
    output = str(tmp_path / prefix) + ("/" if prefix.endswith("/") else "")
    code, stdout, stderr = cli("create-data", "--input", corpus_file, "--spm-model", tiny_spm_model,
                               "--output", output)
    assert (code, stdout) == (2, "")
    assert stderr == (f"albert-tf create-data: error: --output {output} is a directory, not a file-name prefix; give "
                      f"a prefix inside it, e.g. --output {output.rstrip('/')}/train\n")
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "existing"]


def test_a_live_run_on_the_prefix_refuses_the_next_and_keeps_its_temp_files(tmp_path, tiny_spm_model, corpus_file,
                                                                          cli):
    """Temp files are removed only by a run that holds the prefix's lock: while a live run holds it, the next one
    is refused with one line and touches nothing. Another prefix in the same folder is not held."""
    import socket  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel

    out = tmp_path / "data"
    out.mkdir()
    temp = out / ".train-00000-of-00001.tfrecord.tmp-0123456789ab"
    temp.write_bytes(b"being written")
    now = time.time()
    (out / ".train.albert_tf.lock").write_text(json.dumps(
        {"host": socket.gethostname(), "pid": os.getpid(), "started": now, "heartbeat": now, "token": "theirs"}))
    common = ["--input", corpus_file, "--spm-model", tiny_spm_model, "--max-seq-length", SEQ]
    code, stdout, stderr = cli("create-data", *common, "--output", out / "train")
    assert (code, stdout) == (77, "")  # runtime/exit_codes.py: the output is held by a live run (wait, retry)
    assert stderr.startswith(f"albert-tf create-data: error: --output {out / 'train'} is in use by another run: "
                             f"host {socket.gethostname()} pid {os.getpid()} since ")
    assert stderr.endswith(f"wait for it to end (its lock: {out / '.train.albert_tf.lock'})\n")
    assert temp.read_bytes() == b"being written"
    assert cli("create-data", *common, "--output", out / "eval")[0] == 0  # another prefix: not held
    assert (out / "eval-00000-of-00001.tfrecord").exists() and not (out / ".eval.albert_tf.lock").exists()


def test_summary_goes_to_stdout_progress_and_warnings_to_stderr(tmp_path, tiny_spm_model, cli):
    corpus = tmp_path / "c.txt"
    text = open(helpers.write_corpus(str(tmp_path / "good.txt"), num_docs=10), "rb").read()
    corpus.write_bytes(text + b"\nNot UTF-8 \xff here.\nAnd a second line.\n")
    code, stdout, stderr = cli("create-data", "--input", corpus, "--spm-model", tiny_spm_model, "--output",
                               tmp_path / "o" / "train", "--max-seq-length", SEQ, "--max-predictions", PRED)
    assert code == 0
    out = stdout.splitlines()
    assert len(out) == 4 and out[0].startswith(f"wrote ") and out[1].startswith("documents 11, skipped")
    assert out[2].startswith("masked fraction ") and out[3].endswith(" s")
    err = stderr.splitlines()
    assert len(err) == 2 and re.fullmatch(r"\[#{20}\] 100\.0%  11 docs .*", err[0]), err
    assert err[1] == f"albert-tf create-data: warning: {corpus}: replaced 1 bytes of invalid UTF-8 with U+FFFD"


def test_records_follow_the_vocabularys_casing_record(tmp_path):
    """A cased vocabulary (its X.casing.json says lower_case false) gets cased records without a flag, the same bytes
    as with --cased; without the record the text is lowercased (other bytes); --uncased contradicting the record is
    refused with one line naming both."""
    from albert_tf.jobs.create_data import CreateDataConfig, create_data  # pylint: disable=import-outside-toplevel
    from albert_tf.text import vocabulary  # pylint: disable=import-outside-toplevel

    spm = helpers.train_tiny_spm(str(tmp_path / "spm"))
    corpus = helpers.write_corpus(str(tmp_path / "corpus.txt"), num_docs=12, seed=3)

    def run(name, **values):
        create_data(CreateDataConfig(input=corpus, spm_model=spm, output=str(tmp_path / name / "train"),
                                     max_seq_length=32, max_predictions=4, **values))
        return (tmp_path / name / "train-00000-of-00001.tfrecord").read_bytes()

    vocabulary.write_casing(spm, False)
    recorded, flagged = run("recorded"), run("flagged", cased=True)
    assert recorded == flagged
    with pytest.raises(ValueError, match="--uncased contradicts .*casing.json"):
        run("contradicted", cased=False)
    os.remove(vocabulary.casing_path(spm))
    assert run("lowercased") != recorded
