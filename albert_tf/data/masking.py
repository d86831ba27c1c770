"""N-gram whole-word masking for the masked-LM objective (numpy, one instance at a time).

The semantics are those of google-research/albert's create_pretraining_data.py (written here from its
description, not copied):

* Candidates are whole-word *units*. A unit starts at every non-special position whose `token_boundary` is 1
  and at the first non-special position after a special one; a position with boundary 0 joins the unit before it.
  Special tokens ([CLS], [SEP], <pad>) are never candidates. (The original lets a continuation piece that opens
  segment B join the last word of segment A across [SEP]; here a unit never crosses a special token.)
* Which pieces start a word (`word_start_table`) follows the original's SentencePiece rule: a piece starts a word
  when it begins with "▁" or "<", is a single punctuation character, or holds any character outside a-z and
  ASCII punctuation (digits, accents, CJK, ... are always their own word). So "▁walk" "ing" is one unit.
* The budget is ``min(max_predictions, max(1, round(len(token_ids) * masked_lm_prob)))`` (length counts [CLS]
  and [SEP]; `round` is Python's, half to even); no predictions at all when `masked_lm_prob` is 0.
* The units are visited in a random order. At each unit u an n ≤ `ngram` is drawn with p(n) ∝ 1/n and the n-gram
  is units u … u+n−1 (cut short at the end of the sequence). If it would overflow the budget, n−1, n−2, … 1 are
  tried; if even one unit overflows, u is skipped. An n-gram touching an already masked unit is skipped (no
  overlaps). The walk stops once the budget is reached.
* Each chosen position is replaced by [MASK] with p 0.8, kept with p 0.1, or replaced by a uniformly random id in
  [0, vocab_size) with p 0.1 (the original draws from the whole vocabulary, special pieces included).
* Positions are returned sorted.

Only the distribution matches the original, not its random stream (the original draws n from numpy's global
generator, so it was never reproducible). Everything here is driven by the `numpy.random.Generator` passed in.

The in-graph dynamic masking (albert_tf.data.dataset) implements the same distribution; `mask_instance` is the
reference it is compared against, so its signature is kept stable.
"""
import numpy as np

from albert_tf.text import CLS_ID, MASK_ID, PAD_ID, SEP_ID

_ASCII_PUNCTUATION = frozenset('!"#$%&\'()*+,-./:;?@[\\]^_`{|}~')
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _ASCII_PUNCTUATION


def is_word_start_piece(piece):
    """True when a SentencePiece piece starts a new word (the original's `_is_start_piece_sp` rule)."""
    if piece.startswith("\u2581") or piece.startswith("<") or piece in _ASCII_PUNCTUATION:
        return True
    return not all(ch.lower() in _WORD_CHARS for ch in piece)


def word_start_table(pieces):
    """bool[vocab_size]: whether each vocabulary piece starts a word. `pieces[i]` is the piece of id i."""
    return np.fromiter((is_word_start_piece(p) for p in pieces), dtype=bool, count=len(pieces))


def num_to_predict(length, masked_lm_prob, max_predictions):
    """The masking budget for a sequence of `length` tokens ([CLS] and [SEP] included)."""
    if masked_lm_prob == 0:
        return 0
    return min(int(max_predictions), max(1, int(round(length * masked_lm_prob))))


def ngram_probabilities(ngram):
    """float64[ngram]: p(n) for n = 1..ngram, proportional to 1/n (ngram 3 → 6/11, 3/11, 2/11)."""
    inv = 1.0 / np.arange(1, int(ngram) + 1)
    return inv / inv.sum()


def mask_instance(token_ids, token_boundary, rng, *, masked_lm_prob, max_predictions, ngram, vocab_size,
                  mask_id=MASK_ID, special_ids=(CLS_ID, SEP_ID, PAD_ID)):
    """Masks one instance (the reference API; `mask_instances` on a batch of one).

    Args:
      token_ids: int array [L], the unpadded instance ([CLS] A [SEP] B [SEP]).
      token_boundary: int/bool array [L], 1 where a piece starts a word (and at special tokens).
      rng: numpy.random.Generator, the only source of randomness.
      masked_lm_prob, max_predictions, ngram: as the create-data flags.
      vocab_size: random replacements are drawn uniformly from [0, vocab_size).
      mask_id, special_ids: the [MASK] id and the ids that are never masked.

    Returns:
      (masked_ids int64[L], positions int64[K], labels int64[K]) with K ≤ max_predictions, positions strictly
      increasing, labels = token_ids[positions].
    """
    ids = np.asarray(token_ids, dtype=np.int64)[None, :]
    masked, positions, labels, num = mask_instances(
        ids, np.array([ids.shape[1]]), np.asarray(token_boundary)[None, :], rng, masked_lm_prob=masked_lm_prob,
        max_predictions=max_predictions, ngram=ngram, vocab_size=vocab_size, mask_id=mask_id,
        special_ids=special_ids)
    k = int(num[0])
    return masked[0], positions[0, :k], labels[0, :k]


def mask_instances(token_ids, lengths, token_boundary, rng, *, masked_lm_prob, max_predictions, ngram, vocab_size,
               mask_id=MASK_ID, special_ids=(CLS_ID, SEP_ID, PAD_ID)):
    """Masks N padded instances at once, each independently with the semantics above (vectorized over N).

    Args:
      token_ids: int array [N, L]; row i is valid up to lengths[i], the rest is ignored.
      lengths: int array [N].
      token_boundary: int/bool array [N, L].
      rng, masked_lm_prob, max_predictions, ngram, vocab_size, mask_id, special_ids: as `mask_instance`.

    Returns:
      masked_ids int64[N, L]; positions int64[N, P] and labels int64[N, P] (P = max_predictions), row i valid in
      its first num[i] slots (sorted positions) and zero after; num int64[N].
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n_rows, seq_len = ids.shape
    max_predictions = int(max_predictions)
    masked = ids.copy()
    positions = np.zeros((n_rows, max_predictions), np.int64)
    labels = np.zeros((n_rows, max_predictions), np.int64)
    num = np.zeros(n_rows, np.int64)
    if masked_lm_prob == 0 or n_rows == 0 or seq_len == 0:
        return masked, positions, labels, num
    budget = np.minimum(max_predictions,
                        np.maximum(1, np.round(lengths * float(masked_lm_prob)).astype(np.int64)))

    candidate = np.arange(seq_len)[None, :] < lengths[:, None]
    for special in special_ids:
        candidate &= ids != special
    after_special = np.ones_like(candidate)
    after_special[:, 1:] = ~candidate[:, :-1]
    starts = candidate & ((np.asarray(token_boundary) != 0) | after_special)
    num_units = starts.sum(axis=1)
    max_units = int(num_units.max())
    if max_units == 0:
        return masked, positions, labels, num
    unit_id = np.cumsum(starts, axis=1) - 1  # the unit of each candidate position
    cand_before = np.cumsum(candidate, axis=1) - candidate  # candidate positions strictly before
    # cum[i, u]: candidate positions before unit u; units past the end hold the row's total, so an n-gram
    # running off the end of the sequence is simply cut short.
    width = max_units + int(ngram) + 1
    cum = np.repeat(candidate.sum(axis=1)[:, None], width, axis=1)
    r, c = np.nonzero(starts)
    cum[r, unit_id[r, c]] = cand_before[r, c]

    # A random visiting order of each row's units; n is drawn when a unit is visited.
    keys = rng.random((n_rows, max_units))
    keys[np.arange(max_units)[None, :] >= num_units[:, None]] = 2.0
    order = np.argsort(keys, axis=1)
    cdf = np.cumsum(ngram_probabilities(ngram))[:-1]

    covered = np.zeros((n_rows, width), dtype=bool)
    count = np.zeros(n_rows, np.int64)
    offsets = np.arange(int(ngram))
    for step in range(max_units):
        rows = np.flatnonzero((count < budget) & (step < num_units))
        if rows.size == 0:
            break
        u = order[rows, step]
        spans = u[:, None] + offsets[None, :] + 1  # end unit (exclusive) for n = 1..ngram
        sizes = cum[rows[:, None], spans] - cum[rows, u][:, None]
        drawn = np.searchsorted(cdf, rng.random(rows.size), side="right") + 1
        fits = (offsets[None, :] < drawn[:, None]) & (count[rows, None] + sizes <= budget[rows, None])
        n = fits.sum(axis=1)  # sizes grow with n, so the fitting n form a prefix: take the longest
        in_gram = offsets[None, :] < n[:, None]
        touched = covered[rows[:, None], spans - 1] & in_gram
        accept = (n > 0) & ~touched.any(axis=1)
        rows, u, n, in_gram = rows[accept], u[accept], n[accept], in_gram[accept]
        hit_r, hit_j = np.nonzero(in_gram)
        covered[rows[hit_r], u[hit_r] + hit_j] = True
        count[rows] += cum[rows, u + n] - cum[rows, u]

    selected = candidate & np.take_along_axis(covered, np.where(candidate, unit_id, 0), axis=1)
    sel_r, sel_c = np.nonzero(selected)  # row-major, so positions come out sorted within each row
    slot = np.cumsum(selected, axis=1)[sel_r, sel_c] - 1
    num = selected.sum(axis=1)
    positions[sel_r, slot] = sel_c
    labels[sel_r, slot] = ids[sel_r, sel_c]
    draw = rng.random(sel_r.size)
    random_ids = rng.integers(0, vocab_size, sel_r.size)
    original = ids[sel_r, sel_c]
    masked[sel_r, sel_c] = np.where(draw < 0.8, mask_id, np.where(draw < 0.9, original, random_ids))
    return masked, positions, labels, num
