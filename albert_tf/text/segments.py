"""How one or two texts become ALBERT's inputs: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, and the one rule for a
row without a second segment. `AlbertTokenizer.pack` (Python), `tf_pack` (in-graph: fine-tuning's tf.data, the
encoder export's signatures and every task export) and the tasks' readers all follow it.

No second segment. A row has none when its second text
  * is missing: None in Python; in the graph, a text_b input that is omitted (None, or a string tensor of size 0,
    which is what an export's optional text_b defaults to), or
  * tokenizes to no ids: "", whitespace only, or only characters that normalization drops (lone combining marks).
    This is the original's rule: classifier_utils.py packs the second segment `if tokens_b:`, after
    `preprocess_text` has collapsed whitespace and dropped combining marks.
Such a row is packed `[CLS] a [SEP]` with type ids 0 (a keeps up to seq_length - 2 ids), as if no text_b had been
given: training and serving give it the same ids. Any other text_b is a second segment, `b [SEP]` with type ids 1.
"""


def _where(condition, if_true, if_false):
    return if_true if condition else if_false


def segment_lengths(len_a, len_b, seq_length, minimum=min, maximum=max, where=_where):
    """How many ids of each segment a packed row keeps, with the no-second-segment rule (module doc).

    `len_b` 0 is no second segment: (min(len_a, seq_length - 2), 0, False). Otherwise the pair is cut to
    seq_length - 3 ids, the longer side first (b on a tie), as popping one id at a time from the longer side's end.

    Args:
      len_a, len_b: the segments' full lengths in ids: Python ints, or int64 tensors [B] (then pass tf.minimum,
        tf.maximum and tf.where).
      seq_length: the packed length L (an int).
      minimum, maximum, where: elementwise min, max and select (Python's for ints).
    Returns:
      (keep_a, keep_b, has_b): ids kept of a and of b, and whether the row has a second segment (its `b [SEP]`).
    """
    has_b = len_b > 0
    budget = seq_length - 3
    pair_a = minimum(len_a, maximum(budget - len_b, (budget + 1) // 2))
    keep_a = where(has_b, pair_a, minimum(len_a, seq_length - 2))
    keep_b = where(has_b, minimum(len_b, budget - pair_a), len_b * 0)
    return keep_a, keep_b, has_b


def truncated_lengths(len_a, len_b, seq_length):
    """Lengths kept of segments a and b when packing into seq_length (`segment_lengths` for Python ints): len_b
    None or 0 means no second segment, (min(len_a, seq_length - 2), None)."""
    keep_a, keep_b, has_b = segment_lengths(len_a, len_b or 0, seq_length)
    return keep_a, keep_b if has_b else None
