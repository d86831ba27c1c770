"""Text in: ALBERT's normalization and tokenization, identical ids in Python and in the graph.

    normalize, normalize_with_offsets      albert_tf.text.normalize (Python; the vocabulary is trained on it)
    AlbertTokenizer                        albert_tf.text.sentencepiece (Python, plus `.in_graph` / `tf_*`)
    read_text_record, write_text_record    albert_tf.text.record: the vocabulary's record (casing, accents,
                                           fingerprint)
    SPM_FILE, check_vocabulary             albert_tf.text.vocabulary: a model's vocabulary files and the checks
                                           that a vocabulary fits a config
    segment_lengths, truncated_lengths     albert_tf.text.segments: [CLS] a [SEP] (b [SEP]), the one rule for a
                                           row without a second segment
    InGraphTokenizer, OffsetEncoder        albert_tf.text.in_graph (TensorFlow + tensorflow-text; imported on use)

Special ids, fixed by the vocabulary: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4. Importing this package imports
neither TensorFlow nor tensorflow-text.
"""
from albert_tf.text.normalize import MAX_WORD_CHARS, normalize, normalize_with_offsets
from albert_tf.text.sentencepiece import (CLS_ID, MASK_ID, PAD_ID, SEP_ID, SPECIAL_PIECES, SPIECE_UNDERLINE, UNK_ID,
                                          AlbertTokenizer, canonical_order, pieces_stay_in_words, primitive_root,
                                          run_tables)
from albert_tf.text.segments import segment_lengths, truncated_lengths

__all__ = ["AlbertTokenizer", "normalize", "normalize_with_offsets", "truncated_lengths", "segment_lengths", "canonical_order",
           "primitive_root", "run_tables", "pieces_stay_in_words", "MAX_WORD_CHARS", "SPIECE_UNDERLINE",
           "SPECIAL_PIECES", "PAD_ID", "UNK_ID", "CLS_ID", "SEP_ID", "MASK_ID"]
