"""In-graph dynamic masking against closed-form expectations and an independent sequential numpy reference.

The reference (`reference_spans`) follows the original create_pretraining_data.py semantics one example at a time,
with a Python loop; the in-graph version visits the r-th unit of every row at once. Same distribution expected.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.dynamic_masking import RANDOM_ID_START, mask_records, masking_budget, select_ngram_spans
from albert_tf.text import CLS_ID, MASK_ID, SEP_ID

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


VOCAB = 1000


def make_records(num, seq, *, rng, continuation_prob=0.3, short_prob=0.3):
    """Unmasked records: [CLS] A [SEP] B [SEP] + padding; random word pieces (continuations never follow a special).

    Returns int arrays input_ids, input_mask, token_boundary [num, seq].
    """
    ids = np.zeros((num, seq), np.int64)
    mask = np.zeros((num, seq), np.int64)
    boundary = np.zeros((num, seq), np.int64)
    for row in range(num):
        length = seq if rng.random() > short_prob else int(rng.integers(8, seq))
        split = int(rng.integers(2, length - 2))
        ids[row, :length] = rng.integers(MASK_ID + 1, VOCAB, size=length)
        boundary[row, :length] = rng.random(length) >= continuation_prob
        for pos in (0, split, length - 1):
            ids[row, pos] = CLS_ID if pos == 0 else SEP_ID
            boundary[row, pos] = 1  # as the original writes it on [CLS]/[SEP]
        boundary[row, 1] = boundary[row, split + 1] = 1
        mask[row, :length] = 1
    return ids, mask, boundary


def units_of(ids, mask, boundary):
    """Word units of one row (lists of token positions), specials and padding excluded."""
    units = []
    for i in range(int(mask.sum())):
        if ids[i] in (CLS_ID, SEP_ID):
            continue
        if boundary[i] == 1 or not units:
            units.append([i])
        else:
            units[-1].append(i)
    return units


def reference_spans(ids, mask, boundary, *, max_predictions, masked_lm_prob, ngram, rng):
    """The original's selection, sequentially: returns (selected positions, list of n of each chosen n-gram)."""
    units = units_of(ids, mask, boundary)
    budget = min(max_predictions, max(1, int(round(int(mask.sum()) * masked_lm_prob))))
    starts = list(range(len(units)))
    rng.shuffle(starts)
    covered, spans = set(), []
    pvals = 1.0 / np.arange(1, ngram + 1)
    for start in starts:
        if len(covered) >= budget:
            break
        n = int(rng.choice(np.arange(1, ngram + 1), p=pvals / pvals.sum()))
        # The n-gram is units[start:start + n]: cut short at the last unit, as a list slice is.
        while n > 0 and len(covered) + sum(len(u) for u in units[start:start + n]) > budget:
            n -= 1
        if n == 0:
            continue
        positions = [p for u in units[start:start + n] for p in u]
        if covered.intersection(positions):
            continue
        covered.update(positions)
        spans.append(len(units[start:start + n]))
    return sorted(covered), spans


def run_lengths(positions):
    """Lengths of the runs of consecutive positions."""
    runs, prev = [], None
    for p in positions:
        if prev is not None and p == prev + 1:
            runs[-1] += 1
        else:
            runs.append(1)
        prev = p
    return runs


def histogram(values, keys):
    counts = collections.Counter(values)
    total = sum(counts.values())
    return np.array([counts[k] / total for k in keys])


@pytest.fixture(scope="module")
def batch512():
    rng = np.random.default_rng(0)
    return make_records(400, 512, rng=rng)


@pytest.fixture(scope="module")
def masked512(batch512):
    ids, mask, boundary = batch512
    out = mask_records(ids, mask, boundary, seed=tf.constant([3, 4]), max_predictions=20, vocab_size=VOCAB)
    return {k: v.numpy() for k, v in out.items()}


def test_budget_matches_python_round():
    num_tokens = np.arange(0, 600)
    for prob, cap in ((0.15, 20), (0.15, 80), (0.1, 512), (0.5, 7)):
        expected = [min(cap, max(1, int(round(n * prob)))) for n in num_tokens]
        np.testing.assert_array_equal(masking_budget(tf.constant(num_tokens), cap, prob).numpy(), expected)


def test_output_shapes_dtypes_and_invariants(batch512, masked512):
    ids, mask, boundary = batch512
    out = masked512
    assert out["input_word_ids"].shape == (400, 512) and out["input_word_ids"].dtype == np.int32
    for name in ("masked_lm_positions", "masked_lm_ids"):
        assert out[name].shape == (400, 20) and out[name].dtype == np.int32
    assert out["masked_lm_weights"].shape == (400, 20) and out["masked_lm_weights"].dtype == np.float32
    for row in range(len(ids)):
        weights = out["masked_lm_weights"][row]
        count = int(weights.sum())
        positions = out["masked_lm_positions"][row][:count]
        assert set(weights.tolist()) <= {0.0, 1.0} and np.all(weights[:count] == 1) and np.all(weights[count:] == 0)
        assert np.all(out["masked_lm_positions"][row][count:] == 0) and np.all(out["masked_lm_ids"][row][count:] == 0)
        assert np.all(np.diff(positions) > 0), "positions sorted, no position twice"
        assert np.all(mask[row, positions] == 1), "never padding"
        assert not np.isin(ids[row, positions], [CLS_ID, SEP_ID]).any(), "never [CLS]/[SEP]"
        np.testing.assert_array_equal(out["masked_lm_ids"][row][:count], ids[row, positions])
        unchanged = np.ones(512, bool)
        unchanged[positions] = False
        np.testing.assert_array_equal(out["input_word_ids"][row][unchanged], ids[row][unchanged])
        # Whole words: a unit is either fully selected or not at all.
        chosen = set(positions.tolist())
        for unit in units_of(ids[row], mask[row], boundary[row]):
            assert len(chosen.intersection(unit)) in (0, len(unit))
        assert count <= min(20, max(1, int(round(int(mask[row].sum()) * 0.15))))


def test_budget_filled_exactly_with_single_token_words():
    rng = np.random.default_rng(1)
    ids, mask, boundary = make_records(200, 128, rng=rng, continuation_prob=0.0)
    out = mask_records(ids, mask, boundary, seed=tf.constant([0, 1]), max_predictions=20, vocab_size=VOCAB)
    expected = [min(20, max(1, int(round(int(m.sum()) * 0.15)))) for m in mask]
    np.testing.assert_array_equal(out["masked_lm_weights"].numpy().sum(axis=1), expected)


def test_80_10_10(batch512, masked512):
    ids, _, _ = batch512
    out = masked512
    rows, cols = np.nonzero(out["masked_lm_weights"])
    positions = out["masked_lm_positions"][rows, cols]
    new = out["input_word_ids"][rows, positions]
    old = ids[rows, positions]
    n = len(new)
    assert n > 7000
    frac_mask = np.mean(new == MASK_ID)
    frac_same = np.mean(new == old)
    frac_random = np.mean((new != MASK_ID) & (new != old))
    sigma = np.sqrt(0.1 * 0.9 / n)
    assert abs(frac_mask - 0.8) < 5 * np.sqrt(0.16 / n)
    # A random id equal to the original (p = 1/1000) counts as unchanged.
    assert abs(frac_same - 0.1) < 5 * sigma + 0.001
    assert abs(frac_random - 0.1) < 5 * sigma + 0.001
    randoms = new[(new != MASK_ID) & (new != old)]
    # Random replacements come from the whole vocabulary [0, VOCAB), as the original and the numpy version draw them.
    assert RANDOM_ID_START == 0 and randoms.min() >= 0 and randoms.max() < VOCAB
    assert randoms.min() < 0.05 * VOCAB and randoms.max() > 0.95 * VOCAB


def test_ngram_lengths_near_closed_form():
    """n-gram lengths ≈ 6/11, 3/11, 2/11 (p ∝ 1/n) where overlaps and budget cuts are rare (long rows, 2.5% masked)."""
    rng = np.random.default_rng(5)
    ids, mask, boundary = make_records(60, 4096, rng=rng, continuation_prob=0.0, short_prob=0.0)
    spans = select_ngram_spans(ids, mask, boundary, seed=tf.constant([5, 6]), max_predictions=100, ngram=3)
    span_units = spans["span_units"].numpy()
    assert np.sum(span_units > 0) > 3000
    got = histogram(span_units[span_units > 0].tolist(), (1, 2, 3))
    np.testing.assert_allclose(got, np.array([6, 3, 2]) / 11, atol=0.03)


def test_ngram_lengths_match_reference_at_seq_512(batch512):
    """At seq 512 / 20 predictions overlaps and budget cuts favour short n-grams; the reference shows the same shift."""
    ids, mask, boundary = batch512
    spans = select_ngram_spans(ids, mask, boundary, seed=tf.constant([5, 6]), max_predictions=20, ngram=3)
    span_units = spans["span_units"].numpy()
    got = histogram(span_units[span_units > 0].tolist(), (1, 2, 3))
    rng = np.random.default_rng(7)
    ref_spans = []
    for row in range(len(ids)):
        _, row_spans = reference_spans(ids[row], mask[row], boundary[row], max_predictions=20, masked_lm_prob=0.15,
                                       ngram=3, rng=rng)
        ref_spans += row_spans
    np.testing.assert_allclose(got, histogram(ref_spans, (1, 2, 3)), atol=0.03)
    assert abs(np.sum(span_units > 0) / len(ref_spans) - 1) < 0.05


def test_tight_budget_shortens_ngrams_as_reference():
    """Budget 3 in 20 tokens: when 1-2 tokens remain, a long draw is shortened (not skipped), as the original does."""
    rng = np.random.default_rng(6)
    ids, mask, boundary = make_records(10000, 20, rng=rng, continuation_prob=0.0, short_prob=0.0)
    spans = select_ngram_spans(ids, mask, boundary, seed=tf.constant([1, 6]), max_predictions=20, ngram=3)
    span_units = spans["span_units"].numpy()
    got_per_row = collections.Counter(tuple(sorted(row[row > 0].tolist())) for row in span_units)
    ref_rng = np.random.default_rng(8)
    ref_per_row = collections.Counter(
        tuple(sorted(reference_spans(ids[r], mask[r], boundary[r], max_predictions=20, masked_lm_prob=0.15, ngram=3,
                                     rng=ref_rng)[1])) for r in range(len(ids)))
    keys = sorted(set(got_per_row) | set(ref_per_row))
    assert {sum(k) for k in keys} == {3}  # every row masks exactly its budget of 3
    got = np.array([got_per_row[k] for k in keys]) / len(ids)
    want = np.array([ref_per_row[k] for k in keys]) / len(ids)
    np.testing.assert_allclose(got, want, atol=0.03)


def test_mask_rate_and_run_lengths_match_reference():
    rng = np.random.default_rng(2)
    ids, mask, boundary = make_records(1500, 128, rng=rng)
    out = mask_records(ids, mask, boundary, seed=tf.constant([8, 9]), max_predictions=20, vocab_size=VOCAB)
    weights = out["masked_lm_weights"].numpy()
    positions = out["masked_lm_positions"].numpy()
    got_runs, ref_runs, ref_counts = [], [], []
    ref_rng = np.random.default_rng(3)
    for row in range(len(ids)):
        got_runs += run_lengths(positions[row][: int(weights[row].sum())].tolist())
        chosen, _ = reference_spans(ids[row], mask[row], boundary[row], max_predictions=20, masked_lm_prob=0.15,
                                    ngram=3, rng=ref_rng)
        ref_runs += run_lengths(chosen)
        ref_counts.append(len(chosen))
    rate = weights.sum() / mask.sum()
    ref_rate = np.sum(ref_counts) / mask.sum()
    assert abs(rate - ref_rate) < 0.005 and 0.13 < rate < 0.16, (rate, ref_rate)
    keys = range(1, 10)
    np.testing.assert_allclose(histogram(got_runs, keys), histogram(ref_runs, keys), atol=0.02)


def test_deterministic_given_seed_and_fresh_with_another(batch512):
    ids, mask, boundary = (x[:16] for x in batch512)
    kwargs = dict(max_predictions=20, vocab_size=VOCAB)
    first = mask_records(ids, mask, boundary, seed=tf.constant([1, 1]), **kwargs)
    again = mask_records(ids, mask, boundary, seed=tf.constant([1, 1]), **kwargs)
    other = mask_records(ids, mask, boundary, seed=tf.constant([1, 2]), **kwargs)
    for name in first:
        np.testing.assert_array_equal(first[name].numpy(), again[name].numpy())
    assert not np.array_equal(first["masked_lm_positions"].numpy(), other["masked_lm_positions"].numpy())


def test_works_in_tf_function_with_unknown_batch():
    rng = np.random.default_rng(4)
    ids, mask, boundary = make_records(5, 64, rng=rng)
    spec = tf.TensorSpec([None, 64], tf.int64)

    @tf.function(input_signature=[spec, spec, spec, tf.TensorSpec([2], tf.int64)])
    def masked(ids, mask, boundary, seed):
        return mask_records(ids, mask, boundary, seed=seed, max_predictions=10, vocab_size=VOCAB)

    eager = mask_records(ids, mask, boundary, seed=tf.constant([2, 3], tf.int64), max_predictions=10, vocab_size=VOCAB)
    graph = masked(ids, mask, boundary, tf.constant([2, 3], tf.int64))
    for name in eager:
        np.testing.assert_array_equal(eager[name].numpy(), graph[name].numpy())


def test_rows_without_maskable_tokens():
    ids = np.array([[CLS_ID, SEP_ID, SEP_ID, 0, 0], [CLS_ID, 7, SEP_ID, 0, 0]])
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 0, 0]])
    boundary = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 0, 0]])
    out = mask_records(ids, mask, boundary, seed=tf.constant([0, 0]), max_predictions=3, vocab_size=VOCAB)
    np.testing.assert_array_equal(out["masked_lm_weights"].numpy(), [[0, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(out["masked_lm_positions"].numpy(), [[0, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(out["masked_lm_ids"].numpy(), [[0, 0, 0], [7, 0, 0]])


def test_bad_settings():
    args = (np.zeros((1, 4)), np.ones((1, 4)), np.ones((1, 4)))
    with pytest.raises(ValueError, match="vocab_size"):
        mask_records(*args, seed=[0, 0], max_predictions=2, vocab_size=None)
    with pytest.raises(ValueError, match="masked_lm_prob"):
        mask_records(*args, seed=[0, 0], max_predictions=2, vocab_size=VOCAB, masked_lm_prob=0.0)
    with pytest.raises(ValueError, match="ngram"):
        mask_records(*args, seed=[0, 0], max_predictions=2, vocab_size=VOCAB, ngram=0)


def test_static_numpy_and_dynamic_in_graph_masking_agree():
    """create-data's numpy masking (albert_tf.data.masking) and the in-graph one: same distribution."""
    from albert_tf.data import masking  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(12)
    ids, mask, boundary = make_records(4000, 128, rng=rng)
    lengths = mask.sum(axis=1)
    dynamic = mask_records(ids, mask, boundary, seed=tf.constant([4, 2]), max_predictions=20, vocab_size=VOCAB)
    d_ids, d_pos = dynamic["input_word_ids"].numpy(), dynamic["masked_lm_positions"].numpy()
    d_num = dynamic["masked_lm_weights"].numpy().sum(axis=1).astype(int)
    s_ids, s_pos, s_labels, s_num = masking.mask_instances(ids, lengths, boundary, np.random.default_rng(13),
                                                       masked_lm_prob=0.15, max_predictions=20, ngram=3,
                                                       vocab_size=VOCAB)
    total = lengths.sum()
    assert abs(d_num.sum() / total - s_num.sum() / total) < 0.003, (d_num.sum() / total, s_num.sum() / total)
    np.testing.assert_allclose(np.bincount(d_num, minlength=21) / len(ids), np.bincount(s_num, minlength=21) / len(ids),
                               atol=0.02)

    def runs_and_replacements(new_ids, positions, num):
        runs, kinds = [], collections.Counter()
        for row in range(len(ids)):
            chosen = positions[row, :num[row]]
            runs += run_lengths(chosen.tolist())
            new, old = new_ids[row, chosen], ids[row, chosen]
            kinds.update(np.where(new == MASK_ID, "mask", np.where(new == old, "same", "random")).tolist())
        count = sum(kinds.values())
        return runs, np.array([kinds["mask"], kinds["same"], kinds["random"]]) / count

    d_runs, d_kinds = runs_and_replacements(d_ids, d_pos, d_num)
    s_runs, s_kinds = runs_and_replacements(s_ids, s_pos, s_num)
    keys = range(1, 10)
    np.testing.assert_allclose(histogram(d_runs, keys), histogram(s_runs, keys), atol=0.015)
    np.testing.assert_allclose(d_kinds, s_kinds, atol=0.012)
    np.testing.assert_allclose(d_kinds, [0.8, 0.1, 0.1], atol=0.012)
    for row in range(len(ids)):  # both label the original ids
        np.testing.assert_array_equal(s_labels[row, :s_num[row]], ids[row, s_pos[row, :s_num[row]]])


def test_static_numpy_and_dynamic_agree_under_a_tight_budget():
    """Budget 3 in 20 tokens: per-row outcomes (runs of masked positions) have the same distribution."""
    from albert_tf.data import masking  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(14)
    ids, mask, boundary = make_records(10000, 20, rng=rng, continuation_prob=0.0, short_prob=0.0)
    dynamic = select_ngram_spans(ids, mask, boundary, seed=tf.constant([9, 9]), max_predictions=20, ngram=3)
    d_sel = dynamic["selected"].numpy()
    _, s_pos, _, s_num = masking.mask_instances(ids, mask.sum(axis=1), boundary, np.random.default_rng(15),
                                            masked_lm_prob=0.15, max_predictions=20, ngram=3, vocab_size=VOCAB)
    d_rows = collections.Counter(tuple(sorted(run_lengths(np.flatnonzero(r).tolist()))) for r in d_sel)
    s_rows = collections.Counter(tuple(sorted(run_lengths(s_pos[i, :s_num[i]].tolist()))) for i in range(len(ids)))
    keys = sorted(set(d_rows) | set(s_rows))
    np.testing.assert_allclose([d_rows[k] / len(ids) for k in keys], [s_rows[k] / len(ids) for k in keys], atol=0.02)
