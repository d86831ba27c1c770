"""N-gram whole-word masking: exact rules on hand-built cases, statistics against an independent reference."""
import collections
import random

import numpy as np
import pytest

from albert_tf.data import masking
from albert_tf.text import CLS_ID, MASK_ID, SEP_ID

VOCAB = 1000


def _reference_mask(ids, boundary, rnd, masked_lm_prob, max_predictions, ngram):
    """A plain-Python rendering of the original algorithm (list of units, shuffled start units, greedy walk).

    Returns (positions, n-gram sizes in units of the accepted n-grams).
    """
    units = []
    for i, (t, b) in enumerate(zip(ids, boundary)):
        if t in (CLS_ID, SEP_ID):
            continue
        if units and not b and units[-1][-1] == i - 1:
            units[-1].append(i)
        else:
            units.append([i])
    budget = min(max_predictions, max(1, int(round(len(ids) * masked_lm_prob))))
    weights = [1.0 / n for n in range(1, ngram + 1)]
    starts = list(range(len(units)))
    rnd.shuffle(starts)
    covered, chosen, grams = set(), [], []
    for u in starts:
        if len(chosen) >= budget:
            break
        n = rnd.choices(range(1, ngram + 1), weights=weights)[0]
        while n > 0:
            index_set = [p for unit in units[u:u + n] for p in unit]
            if len(chosen) + len(index_set) <= budget:
                break
            n -= 1
        if n == 0 or any(p in covered for p in index_set):
            continue
        covered.update(index_set)
        chosen.extend(index_set)
        grams.append(len(units[u:u + n]))
    return sorted(chosen), grams


def _random_instance(rng, len_a, len_b, p_start=0.7):
    ids = np.concatenate([[CLS_ID], rng.integers(10, VOCAB, len_a), [SEP_ID], rng.integers(10, VOCAB, len_b),
                          [SEP_ID]])
    boundary = (rng.random(ids.size) < p_start).astype(np.int64)
    boundary[[0, len_a + 1, ids.size - 1]] = 1
    return ids, boundary


def _units(ids, boundary):
    """Unit index of every non-special position (-1 for [CLS]/[SEP]), by the documented rule."""
    out, unit, prev_special = [], -1, True
    for t, b in zip(ids, boundary):
        if t in (CLS_ID, SEP_ID):
            out.append(-1)
            prev_special = True
            continue
        if b or prev_special:
            unit += 1
        out.append(unit)
        prev_special = False
    return np.array(out)


@pytest.mark.parametrize("piece,expected", [
    ("\u2581the", True), ("ing", False), ("\u2581", True), (",", True), ("3", True), ("ab3", True),
    ("\u00e9t\u00e9", True), ("<unk>", True), ("s.", False), ("ED", False), ("\u4e2d", True), ("--", False),
])
def test_word_start_rule(piece, expected):
    assert masking.is_word_start_piece(piece) is expected


def test_word_start_table_matches_rule():
    pieces = ["<pad>", "<unk>", "[CLS]", "\u2581a", "b", "7"]
    assert masking.word_start_table(pieces).tolist() == [True, True, False, True, False, True]


@pytest.mark.parametrize("length,prob,cap,expected", [
    (128, 0.15, 20, 19), (512, 0.15, 20, 20), (3, 0.15, 20, 1), (10, 0.25, 20, 2), (14, 0.25, 20, 4),
    (100, 0.0, 20, 0),
])
def test_budget(length, prob, cap, expected):
    assert masking.num_to_predict(length, prob, cap) == expected


def test_ngram_probabilities():
    np.testing.assert_allclose(masking.ngram_probabilities(3), [6 / 11, 3 / 11, 2 / 11])


def test_hand_built_whole_words_and_specials():
    # [CLS] w0 w0 w1 [SEP] w2 w2 w2 [SEP]: a budget of 9*0.34 -> 3 fits w2 whole or w0 + w1.
    ids = np.array([CLS_ID, 11, 12, 13, SEP_ID, 14, 15, 16, SEP_ID])
    boundary = np.array([1, 1, 0, 1, 1, 1, 0, 0, 1])
    seen = set()
    for seed in range(200):
        masked, pos, labels = masking.mask_instance(ids, boundary, np.random.default_rng(seed), masked_lm_prob=0.34,
                                                    max_predictions=20, ngram=3, vocab_size=VOCAB)
        seen.add(tuple(pos.tolist()))
        np.testing.assert_array_equal(labels, ids[pos])
        assert set(np.flatnonzero(masked != ids)) <= set(pos.tolist())
    # Budget 3: either w2 alone, or w0 and w1 (as a 2-gram or two 1-grams); w1+w2 across [SEP] is 4 > 3.
    assert seen == {(1, 2, 3), (5, 6, 7)}


def test_masked_lm_prob_zero_masks_nothing():
    ids, boundary = _random_instance(np.random.default_rng(0), 30, 30)
    masked, pos, labels = masking.mask_instance(ids, boundary, np.random.default_rng(1), masked_lm_prob=0.0,
                                                max_predictions=20, ngram=3, vocab_size=VOCAB)
    assert pos.size == 0 and labels.size == 0
    np.testing.assert_array_equal(masked, ids)


def _batch(rng, n, max_len=126):
    rows, lengths = [], []
    for _ in range(n):
        la = int(rng.integers(1, 100))
        lb = int(rng.integers(1, max_len - la))
        rows.append(_random_instance(rng, la, lb))
        lengths.append(la + lb + 3)
    ids = np.zeros((n, max_len + 3), np.int64)
    boundary = np.zeros_like(ids)
    for i, (a, b) in enumerate(rows):
        ids[i, :a.size], boundary[i, :b.size] = a, b
    return ids, np.array(lengths), boundary


def test_batch_invariants_and_rates():
    rng = np.random.default_rng(123)
    ids, lengths, boundary = _batch(rng, 3000)
    masked, pos, labels, num = masking.mask_instances(ids, lengths, boundary, np.random.default_rng(7),
                                                  masked_lm_prob=0.15, max_predictions=20, ngram=3,
                                                  vocab_size=VOCAB)
    budgets = np.minimum(20, np.maximum(1, np.round(lengths * 0.15))).astype(int)
    kinds = collections.Counter()
    for i in range(len(lengths)):
        k, length = num[i], lengths[i]
        p = pos[i, :k]
        assert k <= budgets[i]
        assert np.all(np.diff(p) > 0), "positions sorted, no duplicates"
        assert np.all(pos[i, k:] == 0) and np.all(labels[i, k:] == 0)
        assert np.all(p < length), "never a padded position"
        assert not np.isin(ids[i, p], [CLS_ID, SEP_ID]).any(), "never [CLS]/[SEP]"
        np.testing.assert_array_equal(labels[i, :k], ids[i, p])
        np.testing.assert_array_equal(masked[i, length:], ids[i, length:])
        untouched = np.setdiff1d(np.arange(length), p)
        np.testing.assert_array_equal(masked[i, untouched], ids[i, untouched])
        units = _units(ids[i, :length], boundary[i, :length])
        for u in np.unique(units[p]):  # whole words: a unit is masked entirely or not at all
            assert set(np.flatnonzero(units == u)) <= set(p.tolist())
        for t, orig in zip(masked[i, p], ids[i, p]):
            kinds["mask" if t == MASK_ID else "same" if t == orig else "random"] += 1
    total = sum(kinds.values())
    assert abs(kinds["mask"] / total - 0.8) < 0.02
    assert abs(kinds["same"] / total - 0.1) < 0.015
    assert abs(kinds["random"] / total - 0.1) < 0.015
    # Budgets are almost always filled (single-piece words are plentiful); compare with the reference.
    rnd = random.Random(5)
    ref_fill = np.mean([len(_reference_mask(ids[i, :lengths[i]].tolist(), boundary[i, :lengths[i]].tolist(), rnd,
                                            0.15, 20, 3)[0]) / budgets[i] for i in range(1000)])
    assert abs(np.mean(num / budgets) - ref_fill) < 0.01


def test_ngram_lengths_follow_one_over_n():
    """Budget 3 over 400 single-piece words: the first n-gram fixes the runs.

    n1=3 → one run of 3 (p 2/11); n1=2 → runs 2+1, or n1=1 then n2≥2 (3 falls back to 2) → 1+2
    (p 3/11 + 6/11·5/11); otherwise three 1-grams (p 36/121). Adjacent picks by chance are rare (~1%).
    """
    length = 402
    ids = np.concatenate([[CLS_ID], np.arange(10, 410), [SEP_ID]])
    boundary = np.ones(length, np.int64)
    n = 4000
    masked, pos, labels, num = masking.mask_instances(np.tile(ids, (n, 1)), np.full(n, length),
                                                  np.tile(boundary, (n, 1)), np.random.default_rng(3),
                                                  masked_lm_prob=3 / length, max_predictions=20, ngram=3,
                                                  vocab_size=VOCAB)
    assert np.all(num == 3)
    longest = np.array([max(len(r) for r in np.split(p, np.flatnonzero(np.diff(p) != 1) + 1)) for p in pos[:, :3]])
    freq = np.bincount(longest, minlength=4)[1:] / n
    expected = np.array([36 / 121, 3 / 11 + 30 / 121, 2 / 11])
    np.testing.assert_allclose(freq, expected, atol=0.03)


def _run_histogram(unit_ids):
    """Counter of the lengths of runs of consecutive masked units."""
    u = np.unique(unit_ids)
    if u.size == 0:
        return collections.Counter()
    breaks = np.flatnonzero(np.diff(u) != 1)
    return collections.Counter(np.diff(np.r_[0, breaks + 1, u.size]).tolist())


def test_distribution_matches_reference():
    """Realistic settings: masked counts and runs of consecutive masked words agree with the reference."""
    rng = np.random.default_rng(11)
    ids, lengths, boundary = _batch(rng, 2000)
    _, pos, _, num = masking.mask_instances(ids, lengths, boundary, np.random.default_rng(12), masked_lm_prob=0.15,
                                        max_predictions=20, ngram=3, vocab_size=VOCAB)
    rnd = random.Random(13)
    ours, ref, ref_grams = collections.Counter(), collections.Counter(), collections.Counter()
    ours_n, ref_n = 0, 0
    for i in range(len(lengths)):
        units = _units(ids[i, :lengths[i]], boundary[i, :lengths[i]])
        ours.update(_run_histogram(units[pos[i, :num[i]]]))
        ours_n += num[i]
        r_pos, grams = _reference_mask(ids[i, :lengths[i]].tolist(), boundary[i, :lengths[i]].tolist(), rnd,
                                       0.15, 20, 3)
        ref.update(_run_histogram(units[r_pos]))
        ref_grams.update(grams)
        ref_n += len(r_pos)
    assert abs(ours_n / ref_n - 1) < 0.01
    for k in (1, 2, 3, 4):
        assert abs(ours[k] / sum(ours.values()) - ref[k] / sum(ref.values())) < 0.02, k
    # The accepted n-grams lean short (1/n, and overflowing n-grams fall back to shorter ones).
    assert ref_grams[1] > ref_grams[2] > ref_grams[3] > 0


def test_special_ids_agree_with_the_record_format():
    from albert_tf import text as tokenization  # pylint: disable=import-outside-toplevel
    from albert_tf.data import dynamic_masking  # pylint: disable=import-outside-toplevel

    ids = (tokenization.PAD_ID, tokenization.CLS_ID, tokenization.SEP_ID, tokenization.MASK_ID)
    assert ids == (0, 2, 3, 4)  # docs/data.md
    assert (masking.PAD_ID, masking.CLS_ID, masking.SEP_ID, masking.MASK_ID) == ids
    assert (dynamic_masking.PAD_ID, dynamic_masking.CLS_ID, dynamic_masking.SEP_ID, dynamic_masking.MASK_ID) == ids
    tok = tokenization.AlbertTokenizer
    assert (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id) == ids
