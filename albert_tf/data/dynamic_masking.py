"""In-graph n-gram whole-word masking for dynamic masking (pure TensorFlow ops, batched).

The same semantics as the static masking of create-data (and of google-research/albert's
create_pretraining_data.py), applied to a batch of UNMASKED records inside tf.data or a tf.function:

- Units are whole words. A real token (input_mask 1) that is not [CLS]/[SEP] starts a unit when its
  `token_boundary` is 1 (or when it directly follows [CLS]/[SEP]); any other real token joins the unit before it.
  [CLS], [SEP] and padding are never masked (the original writes token_boundary 1 on [CLS]/[SEP], so specials are
  recognised by id, not by boundary).
- Budget per sequence: min(max_predictions, max(1, round(num_tokens * masked_lm_prob))), num_tokens counting [CLS]
  and [SEP] (Python's round, half to even, in float64 as the original).
- Candidate start units are visited in a random order. At each unit u, n <= ngram is drawn with p(n) ∝ 1/n and
  the n-gram is units u .. u+n-1, cut short at the last unit (as the original slices its candidate list); n is
  shortened until the n-gram fits the budget, and the n-gram is skipped when even one unit does not fit or when it
  overlaps an earlier n-gram. Visiting stops when the budget is spent (or nothing left can fit).
- Each selected token: 80% [MASK], 10% unchanged, 10% a random id in [RANDOM_ID_START, vocab_size) = the whole
  vocabulary, as the original and albert_tf.data.masking (the numpy version used by create-data) draw it.
- Positions are sorted, padded with 0 (and weight 0) up to max_predictions.

Randomness is stateless: given the same `seed` tensor the output is identical; callers pass a different seed per
batch (e.g. folded with the batch index) so every epoch draws fresh masks.

The sequential "visit in random order" loop runs over the whole batch at once (one tf.while_loop step visits the
r-th unit of every row), so its cost is per batch, not per example.
"""
import numpy as np
import tensorflow as tf

from albert_tf.settings.defaults import MASKED_LM_PROB, NGRAM
from albert_tf.text import CLS_ID, MASK_ID, PAD_ID, SEP_ID

# Random replacements are drawn from ids [RANDOM_ID_START, vocab_size): the whole vocabulary, like the original.
RANDOM_ID_START = 0


def masking_budget(num_tokens, max_predictions, masked_lm_prob):
    """min(max_predictions, max(1, round(num_tokens * masked_lm_prob))), round half to even in float64.

    Args: num_tokens int [B]. Returns int32 [B].
    """
    raw = tf.round(tf.cast(num_tokens, tf.float64) * tf.constant(masked_lm_prob, tf.float64))
    return tf.minimum(tf.cast(max_predictions, tf.int32), tf.maximum(1, tf.cast(raw, tf.int32)))


def _harmonic(ngram):
    """H[k] = sum_{n=1..k} 1/n for k = 0..ngram, float32 [ngram + 1]."""
    return tf.constant(np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, ngram + 1))]), tf.float32)


def _word_units(input_ids, input_mask, token_boundary):
    """The maskable whole-word units of each sequence (a unit starts at a token_boundary token or after a special
    token; [CLS], [SEP], padding belong to none).

    Args:
      input_ids, input_mask, token_boundary: int tensors [B, S].
    Returns:
      candidate: bool [B, S], the tokens that may be masked;
      unit_of_token: int32 [B, S], the unit holding each token (valid where candidate);
      num_units: int32 [B];
      cum_len: int32 [B, S+1], candidate tokens before unit k (all of them for k >= num_units), so an n-gram
        starting at unit u spans cum_len[u + n] - cum_len[u] tokens;
      min_unit_len: int32 [B], the shortest unit's length (a large number when there is none).
    """
    input_ids = tf.cast(input_ids, tf.int32)
    input_mask = tf.cast(input_mask, tf.int32)
    token_boundary = tf.cast(token_boundary, tf.int32)
    batch = tf.shape(input_ids)[0]
    seq = tf.shape(input_ids)[1]
    special = (tf.equal(input_ids, CLS_ID) | tf.equal(input_ids, SEP_ID) | tf.equal(input_ids, PAD_ID)
               | tf.equal(input_mask, 0))
    candidate = tf.logical_not(special)
    prev_special = tf.concat([tf.ones([batch, 1], tf.bool), special[:, :-1]], axis=1)
    unit_start = candidate & (tf.equal(token_boundary, 1) | prev_special)
    units_so_far = tf.cumsum(tf.cast(unit_start, tf.int32), axis=1)  # [B, S]
    num_units = units_so_far[:, -1]  # [B]
    # Unit k starts at the first s with units_so_far[s] = k + 1.
    unit_index = tf.range(seq)[None, :]
    start_of_unit = tf.searchsorted(units_so_far, tf.broadcast_to(unit_index + 1, [batch, seq]), side="left",
                                    out_type=tf.int32)  # [B, S], seq where k >= num_units
    candidates_before = tf.concat([tf.zeros([batch, 1], tf.int32), tf.cumsum(tf.cast(candidate, tf.int32), axis=1)],
                                  axis=1)  # [B, S+1]
    cum_len = tf.gather(candidates_before, tf.concat([start_of_unit, tf.fill([batch, 1], seq)], axis=1),
                        batch_dims=1)  # [B, S+1]
    valid_unit = unit_index < num_units[:, None]
    big = tf.int32.max // 4
    min_unit_len = tf.reduce_min(tf.where(valid_unit, cum_len[:, 1:] - cum_len[:, :-1], big), axis=1)
    return candidate, units_so_far - 1, num_units, cum_len, min_unit_len


def select_ngram_spans(input_ids, input_mask, token_boundary, *, seed, max_predictions,
                       masked_lm_prob=MASKED_LM_PROB, ngram=NGRAM):
    """Chooses the whole-word n-grams to mask (no 80/10/10 yet).

    Args:
      input_ids, input_mask, token_boundary: int tensors [B, S] of unmasked records.
      seed: int32/int64 [2], a stateless RNG seed.
    Returns a dict:
      selected: bool [B, S], the token positions chosen for prediction.
      span_units: int32 [B, S], at the first unit of each chosen n-gram its length in units (after any cut at the
        end of the sequence), 0 elsewhere; indexed by unit.
      budget: int32 [B], the number of tokens the sequence may mask.
    """
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")
    if not 0 < masked_lm_prob <= 1:
        raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}")
    input_mask = tf.cast(input_mask, tf.int32)
    batch = tf.shape(input_ids)[0]
    seq = tf.shape(input_ids)[1]
    order_seed, ngram_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
    candidate, unit_of_token, num_units, cum_len, min_unit_len = _word_units(input_ids, input_mask, token_boundary)
    unit_index = tf.range(seq)[None, :]
    valid_unit = unit_index < num_units[:, None]

    # Units are visited in ascending order of iid uniform keys (a uniformly random order); each step takes the
    # smallest remaining key with an argmin, so the cost grows with the steps taken, not with a full sort.
    keys = tf.where(valid_unit, tf.random.stateless_uniform([batch, seq], seed=order_seed), 2.0)
    # The uniform deciding n at step r (iid, so indexing by step rather than by unit changes nothing).
    ngram_uniform = tf.random.stateless_uniform([batch, seq], seed=ngram_seed)
    harmonic = _harmonic(ngram)
    ks = tf.range(1, ngram + 1)
    budget = masking_budget(tf.reduce_sum(input_mask, axis=1), max_predictions, masked_lm_prob)
    max_units = tf.reduce_max(num_units)

    def done(step, count):
        return (count >= budget) | (step >= num_units) | (budget - count < min_unit_len)

    def cond(step, count, covered, spans, keys):
        del covered, spans, keys
        return (step < max_units) & tf.reduce_any(tf.logical_not(done(step, count)))

    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, ngram])

    def body(step, count, covered, spans, keys):
        # Only argmin touches all S slots; the updates are scatters at the <= ngram units concerned.
        u = tf.argmin(keys, axis=1, output_type=tf.int32)  # [B], the unit visited now
        at_u = tf.stack([rows[:, 0], u], axis=1)  # [B, 2]
        keys = tf.tensor_scatter_nd_update(keys, at_u, tf.fill([batch], 3.0))
        # n drawn with p(n) ∝ 1/n, n = 1..ngram, by inverse CDF.
        draw = ngram_uniform[:, step] * harmonic[ngram]
        n_draw = 1 + tf.reduce_sum(tf.cast(draw[:, None] >= harmonic[None, 1:ngram], tf.int32), axis=1)
        # Tokens of the k-unit n-gram at u, k = 1..ngram, cut short at the last unit (cum_len holds the total
        # beyond it): [B, ngram], non-decreasing in k.
        end = u[:, None] + ks[None, :]
        toks = tf.gather(cum_len, tf.minimum(end, seq), batch_dims=1) - tf.gather(cum_len, u, batch_dims=1)[:, None]
        fits = (ks[None, :] <= n_draw[:, None]) & (toks <= (budget - count)[:, None])
        n_eff = tf.reduce_sum(tf.cast(fits, tf.int32), axis=1)  # fits is a prefix: take the longest
        span_units = tf.stack([rows, tf.minimum(end - 1, seq - 1)], axis=2)  # [B, ngram, 2]: units u .. u+ngram-1
        in_span = (ks[None, :] <= n_eff[:, None]) & (end <= num_units[:, None])  # [B, ngram], real units only
        overlap = tf.reduce_any(in_span & (tf.gather_nd(covered, span_units) > 0), axis=1)
        take = tf.logical_not(done(step, count)) & (n_eff > 0) & tf.logical_not(overlap)
        covered = tf.tensor_scatter_nd_max(covered, span_units, tf.cast(in_span & take[:, None], tf.int32))
        count = count + tf.where(take, tf.gather(toks, tf.maximum(n_eff - 1, 0), batch_dims=1), 0)
        units_taken = tf.reduce_sum(tf.cast(in_span, tf.int32), axis=1)
        spans = tf.tensor_scatter_nd_add(spans, at_u, tf.where(take, units_taken, 0))
        return step + 1, count, covered, spans, keys

    _, _, covered_units, span_units, _ = tf.while_loop(
        cond, body,
        (tf.constant(0), tf.zeros([batch], tf.int32), tf.zeros([batch, seq], tf.int32),
         tf.zeros([batch, seq], tf.int32), keys),
    )
    selected = candidate & (tf.gather(covered_units, tf.maximum(unit_of_token, 0), batch_dims=1) > 0)
    return {"selected": selected, "span_units": span_units, "budget": budget}


def mask_records(input_ids, input_mask, token_boundary, *, seed, max_predictions, vocab_size,
                 masked_lm_prob=MASKED_LM_PROB, ngram=NGRAM):
    """Dynamic n-gram whole-word masking of a batch of unmasked records.

    Args:
      input_ids, input_mask, token_boundary: int tensors [B, S] (the records' features).
      seed: int32/int64 [2], a stateless RNG seed (fold in the batch index for fresh masks each batch/epoch).
      max_predictions: P, the number of prediction slots.
      vocab_size: random replacements are drawn from [RANDOM_ID_START, vocab_size) = [0, vocab_size).
    Returns a dict:
      input_word_ids int32 [B, S] (with [MASK] / random / unchanged at the chosen positions),
      masked_lm_positions int32 [B, P] (sorted, 0-padded), masked_lm_ids int32 [B, P] (the original ids, 0-padded),
      masked_lm_weights float32 [B, P] (1.0 for real predictions, 0.0 for padding).
    """
    if vocab_size is None or vocab_size <= max(RANDOM_ID_START, MASK_ID):
        raise ValueError(f"dynamic masking needs the vocab_size (> {MASK_ID}) to draw random replacements, "
                         f"got {vocab_size}")
    input_ids = tf.cast(input_ids, tf.int32)
    span_seed, replace_seed, random_id_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=3))
    selected = select_ngram_spans(input_ids, input_mask, token_boundary, seed=span_seed,
                                  max_predictions=max_predictions, masked_lm_prob=masked_lm_prob,
                                  ngram=ngram)["selected"]
    batch = tf.shape(input_ids)[0]

    # Sorted positions: the (j+1)-th selected token is where the running count of selected tokens first reaches j+1.
    running = tf.cumsum(tf.cast(selected, tf.int32), axis=1)
    slots = tf.broadcast_to(tf.range(1, max_predictions + 1)[None, :], [batch, max_predictions])
    first = tf.searchsorted(running, slots, side="left", out_type=tf.int32)
    real = slots <= running[:, -1:]
    positions = tf.where(real, first, 0)
    labels = tf.where(real, tf.gather(input_ids, positions, batch_dims=1), 0)

    # 80% [MASK], 10% unchanged, 10% random id: one uniform per prediction.
    roll = tf.random.stateless_uniform([batch, max_predictions], seed=replace_seed)
    random_ids = tf.random.stateless_uniform([batch, max_predictions], seed=random_id_seed, minval=RANDOM_ID_START,
                                             maxval=vocab_size, dtype=tf.int32)
    replacement = tf.where(roll < 0.8, MASK_ID, tf.where(roll < 0.9, labels, random_ids))
    # Scatter as an addition so padded slots (position 0, delta 0) never disturb position 0.
    delta = tf.where(real, replacement - labels, 0)
    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, max_predictions])
    masked_ids = tf.tensor_scatter_nd_add(input_ids, tf.stack([rows, positions], axis=-1), delta)
    return {
        "input_word_ids": masked_ids,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": tf.cast(real, tf.float32),
    }
