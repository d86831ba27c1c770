"""Pretraining data: vocabulary, TFRecord creation (local and Apache Beam), and the tf.data input pipeline.

    corpus                   reading corpus text: UTF-8 decoding, binary and UTF-16 files refused, long lines split
    vocab, vocab_trainer     `albert-tf vocab`'s work: the SentencePiece vocabulary, trained in a child process
    instances, masking       pretraining instances (SOP pairs) from blocks of documents; n-gram whole-word masking
    features                 the pretraining TFRecord format (google-research/albert's)
    create_pretraining_data  `albert-tf create-data`'s work: raw text → TFRecord shards, streamed, deterministic
    beam                     the same on Apache Beam (`create-data --beam`)
    record_index             the record-count index beside the shards (resume at any step without reading)
    dataset                  the tf.data input pipeline: TFRecords → batch dicts (pretraining_dataset)
    dynamic_masking          the masking in the graph, for unmasked records
    pretraining_input        pretraining's input as a run reads it: the records' checks, counts, dataset_fn
    builtin_corpus           the quickstart's built-in corpus and fine-tuning tasks
"""


def pretraining_dataset(file_pattern, **kwargs):
    """See `albert_tf.data.dataset.pretraining_dataset` (imported lazily so the CLI stays fast)."""
    from albert_tf.data.dataset import pretraining_dataset as _impl  # pylint: disable=import-outside-toplevel

    return _impl(file_pattern, **kwargs)


__all__ = ["pretraining_dataset"]
