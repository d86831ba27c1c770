"""In-graph n-gram whole-word masking for dynamic masking (pure TensorFlow ops, batched).

The same semantics as the static masking of create-data (and of google-research/albert's
create_pretraining_data.py), applied to a batch of UNMASKED records inside tf.data or a tf.function:

- Units are whole words. A real token (input_mask 1) that is not [CLS]/[SEP] starts a unit when its
  `token_boundary` is 1 (or when it directly follows [CLS]/[SEP]); any other real token joins the unit before it.
  [CLS], [SEP] and padding are never masked (the original writes token_boundary 1 on [CLS]/[SEP], so specials are
  recognised by id, not by boundary).
- Budget per sequence: min(max_predictions, max(1, round(num_tokens * masked_lm_prob))), num_tokens counting [CLS]
  and [SEP] (Python's round, half to even, in float64 as the original).
- Candidate start units are visited in a random order. At each, n <= ngram units is drawn with p(n) ∝ 1/n (limited
  to the units left before the end of the sequence); n is shortened until the n-gram fits the budget, and the
  n-gram is skipped when even one unit does not fit or when it overlaps an earlier n-gram. Visiting stops when the
  budget is spent (or nothing left can fit).
- Each selected token: 80% [MASK], 10% unchanged, 10% a random id in [RANDOM_ID_START, vocab_size).
- Positions are sorted, padded with 0 (and weight 0) up to max_predictions.

Randomness is stateless: given the same `seed` tensor the output is identical; callers pass a different seed per
batch (e.g. folded with the batch index) so every epoch draws fresh masks.

The sequential "visit in random order" loop runs over the whole batch at once (one tf.while_loop step visits the
r-th unit of every row), so its cost is per batch, not per example.
"""
import numpy as np
import tensorflow as tf

from albert_tf.data.features import CLS_ID, MASK_ID, SEP_ID

# Random replacements are drawn from ids [RANDOM_ID_START, vocab_size): never pad/unk/[CLS]/[SEP]/[MASK].
RANDOM_ID_START = 5


def masking_budget(num_tokens, max_predictions, masked_lm_prob):
    """min(max_predictions, max(1, round(num_tokens * masked_lm_prob))), round half to even in float64.

    Args: num_tokens int [B]. Returns int32 [B].
    """
    raw = tf.round(tf.cast(num_tokens, tf.float64) * tf.constant(masked_lm_prob, tf.float64))
    return tf.minimum(tf.cast(max_predictions, tf.int32), tf.maximum(1, tf.cast(raw, tf.int32)))


def _harmonic(ngram):
    """H[k] = sum_{n=1..k} 1/n for k = 0..ngram, float32 [ngram + 1]."""
    return tf.constant(np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, ngram + 1))]), tf.float32)


def select_ngram_spans(input_ids, input_mask, token_boundary, *, seed, max_predictions, masked_lm_prob=0.15,
                       ngram=3):
    """Chooses the whole-word n-grams to mask (no 80/10/10 yet).

    Args:
      input_ids, input_mask, token_boundary: int tensors [B, S] of unmasked records.
      seed: int32/int64 [2], a stateless RNG seed.
    Returns a dict:
      selected: bool [B, S], the token positions chosen for prediction.
      span_units: int32 [B, S], at the first unit of each chosen n-gram its n (units), 0 elsewhere; indexed by unit.
      budget: int32 [B], the number of tokens the sequence may mask.
    """
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")
    input_ids = tf.cast(input_ids, tf.int32)
    input_mask = tf.cast(input_mask, tf.int32)
    token_boundary = tf.cast(token_boundary, tf.int32)
    batch = tf.shape(input_ids)[0]
    seq = tf.shape(input_ids)[1]
    order_seed, ngram_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))

    special = (input_ids == CLS_ID) | (input_ids == SEP_ID) | (input_mask == 0)
    candidate = tf.logical_not(special)
    prev_special = tf.concat([tf.ones([batch, 1], tf.bool), special[:, :-1]], axis=1)
    unit_start = candidate & ((token_boundary == 1) | prev_special)
    # unit_of_token[b, s]: index of the unit holding token s (valid where candidate).
    unit_of_token = tf.cumsum(tf.cast(unit_start, tf.int32), axis=1) - 1
    num_units = tf.reduce_sum(tf.cast(unit_start, tf.int32), axis=1)  # [B]
    # unit_len[b, u]: tokens in unit u; computed with one segment sum over the flattened batch.
    flat_segment = tf.where(candidate, unit_of_token, seq) + tf.range(batch)[:, None] * (seq + 1)
    unit_len = tf.math.unsorted_segment_sum(
        tf.reshape(tf.cast(candidate, tf.int32), [-1]), tf.reshape(flat_segment, [-1]), batch * (seq + 1))
    unit_len = tf.reshape(unit_len, [batch, seq + 1])[:, :seq]
    # cum_len[b, k] = tokens in units < k, so an n-gram starting at u spans cum_len[u + n] - cum_len[u] tokens.
    cum_len = tf.concat([tf.zeros([batch, 1], tf.int32), tf.cumsum(unit_len, axis=1)], axis=1)  # [B, S+1]
    unit_index = tf.range(seq)[None, :]
    valid_unit = unit_index < num_units[:, None]
    big = tf.int32.max // 4
    min_unit_len = tf.reduce_min(tf.where(valid_unit, unit_len, big), axis=1)

    # A random visiting order of the start units (invalid slots last).
    keys = tf.random.stateless_uniform([batch, seq], seed=order_seed)
    keys = tf.where(valid_unit, keys, 2.0)
    order = tf.argsort(keys, axis=1, stable=True)  # order[b, r] = unit visited at step r

    # n drawn for each start unit: p(n) ∝ 1/n over n <= min(ngram, units left), by inverse CDF.
    harmonic = _harmonic(ngram)
    units_left = tf.maximum(num_units[:, None] - unit_index, 1)
    kmax = tf.minimum(units_left, ngram)
    draw = tf.random.stateless_uniform([batch, seq], seed=ngram_seed) * tf.gather(harmonic, kmax)
    n_draw = 1 + tf.reduce_sum(tf.cast(draw[:, :, None] >= harmonic[None, None, 1:ngram], tf.int32), axis=2)

    # Token count of the k-unit n-gram at every start unit, k = 1..ngram: [B, S, ngram] (big when out of range).
    ks = tf.range(1, ngram + 1)
    end_unit = tf.broadcast_to(unit_index[:, :, None] + ks[None, None, :], [batch, seq, ngram])
    span_tokens = tf.gather(cum_len, tf.minimum(end_unit, seq), batch_dims=1) - cum_len[:, :seq, None]
    span_tokens = tf.where(end_unit <= num_units[:, None, None], span_tokens, big)

    # Re-index by visiting step.
    u_step = order
    n_step = tf.gather(n_draw, order, batch_dims=1)
    tok_step = tf.gather(span_tokens, order, batch_dims=1)

    budget = masking_budget(tf.reduce_sum(input_mask, axis=1), max_predictions, masked_lm_prob)
    max_units = tf.reduce_max(num_units)

    def done(step, count):
        return (count >= budget) | (step >= num_units) | (budget - count < min_unit_len)

    def cond(step, count, covered, spans):
        del covered, spans
        return (step < max_units) & tf.reduce_any(tf.logical_not(done(step, count)))

    def body(step, count, covered, spans):
        u = u_step[:, step]
        toks = tok_step[:, step, :]  # [B, ngram]
        fits = (ks[None, :] <= n_step[:, step, None]) & (toks <= (budget - count)[:, None])
        n_eff = tf.reduce_sum(tf.cast(fits, tf.int32), axis=1)  # fits is a prefix: toks grows with k
        in_span = (unit_index >= u[:, None]) & (unit_index < (u + n_eff)[:, None])  # [B, S]
        overlap = tf.reduce_any(in_span & covered, axis=1)
        take = tf.logical_not(done(step, count)) & (n_eff > 0) & tf.logical_not(overlap)
        covered = covered | (in_span & take[:, None])
        taken_tokens = tf.gather(toks, tf.maximum(n_eff - 1, 0), batch_dims=1)
        count = count + tf.where(take, taken_tokens, 0)
        spans = spans + tf.where(take[:, None] & (unit_index == u[:, None]), n_eff[:, None], 0)
        return step + 1, count, covered, spans

    _, _, covered_units, span_units = tf.while_loop(
        cond, body,
        (tf.constant(0), tf.zeros([batch], tf.int32), tf.zeros([batch, seq], tf.bool), tf.zeros([batch, seq], tf.int32)),
    )
    selected = candidate & tf.gather(covered_units, tf.maximum(unit_of_token, 0), batch_dims=1)
    return {"selected": selected, "span_units": span_units, "budget": budget}


def mask_batch(input_ids, input_mask, token_boundary, *, seed, max_predictions, vocab_size, masked_lm_prob=0.15,
               ngram=3):
    """Dynamic n-gram whole-word masking of a batch of unmasked records.

    Args:
      input_ids, input_mask, token_boundary: int tensors [B, S] (the records' features).
      seed: int32/int64 [2], a stateless RNG seed (fold in the batch index for fresh masks each batch/epoch).
      max_predictions: P, the number of prediction slots.
      vocab_size: random replacements are drawn from [RANDOM_ID_START, vocab_size).
    Returns a dict:
      input_word_ids int32 [B, S] (with [MASK] / random / unchanged at the chosen positions),
      masked_lm_positions int32 [B, P] (sorted, 0-padded), masked_lm_ids int32 [B, P] (the original ids, 0-padded),
      masked_lm_weights float32 [B, P] (1.0 for real predictions, 0.0 for padding).
    """
    if vocab_size is None or vocab_size <= RANDOM_ID_START:
        raise ValueError(f"dynamic masking needs vocab_size > {RANDOM_ID_START} for random replacements, "
                         f"got {vocab_size}")
    input_ids = tf.cast(input_ids, tf.int32)
    span_seed, replace_seed, random_id_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=3))
    selected = select_ngram_spans(input_ids, input_mask, token_boundary, seed=span_seed,
                                  max_predictions=max_predictions, masked_lm_prob=masked_lm_prob,
                                  ngram=ngram)["selected"]
    shape = tf.shape(input_ids)
    seq = shape[1]

    # 80% [MASK], 10% unchanged, 10% random id: one uniform per token.
    roll = tf.random.stateless_uniform(shape, seed=replace_seed)
    random_ids = tf.random.stateless_uniform(shape, seed=random_id_seed, minval=RANDOM_ID_START,
                                             maxval=vocab_size, dtype=tf.int32)
    replacement = tf.where(roll < 0.8, MASK_ID, tf.where(roll < 0.9, input_ids, random_ids))
    masked_ids = tf.where(selected, replacement, input_ids)

    # Sorted positions of the selected tokens first: top_k of -(position, selected ones ahead of the rest).
    position = tf.range(seq)[None, :]
    sort_key = tf.where(selected, position, position + seq)
    _, first = tf.math.top_k(-sort_key, k=max_predictions, sorted=True)
    num_selected = tf.reduce_sum(tf.cast(selected, tf.int32), axis=1)
    real = tf.range(max_predictions)[None, :] < num_selected[:, None]
    positions = tf.where(real, first, 0)
    labels = tf.where(real, tf.gather(input_ids, positions, batch_dims=1), 0)
    return {
        "input_word_ids": masked_ids,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": tf.cast(real, tf.float32),
    }
