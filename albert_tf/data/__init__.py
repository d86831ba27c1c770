"""Pretraining data: vocabulary, TFRecord creation (local and Apache Beam), and the tf.data input pipeline."""


def pretraining_dataset(file_pattern, **kwargs):
    """See `albert_tf.data.dataset.pretraining_dataset` (imported lazily so the CLI stays fast)."""
    from albert_tf.data.dataset import pretraining_dataset as _impl  # pylint: disable=import-outside-toplevel

    return _impl(file_pattern, **kwargs)


__all__ = ["pretraining_dataset"]
