"""Fine-tuning's tf.data pipelines, shared by the tasks' adapters (albert_tf.tasks.*.finetune): the examples an
order names (int64 [N], N a multiple of the batch), in that order, batched and featurized, each batch trimmed to its
longest example when a length bucket is given (`modeling.base.trim_padding`).
"""
import numpy as np
import tensorflow as tf

from albert_tf.modeling.base import trim_padding


def _with_trimmed_padding(dataset, length_bucket):
    """dataset of features or (features, labels) batches, trimmed by `trim_padding` when length_bucket > 0."""
    if not length_bucket:
        return dataset

    def trim(*element):
        if len(element) == 1:
            return trim_padding(element[0], length_bucket)
        return (trim_padding(element[0], length_bucket), *element[1:])

    return dataset.map(trim)


def featurized_batches(tokenizer, order, batch_size, featurize, length_bucket):
    """The examples `order` names (int64 [N], N a multiple of batch_size), batched, each batch of indices
    featurized in-graph by `featurize` (with `tokenizer`'s in-graph module), then trimmed (`_with_trimmed_padding`)
    and prefetched."""
    _ = tokenizer.in_graph  # (re)built now, eagerly, not inside the map function's trace (AlbertTokenizer.in_graph)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(order, tf.int64))
    dataset = dataset.batch(batch_size, drop_remainder=True)
    # no AutoGraph: the featurizers use tf.cond where they branch; converting them only costs tracing time
    dataset = dataset.map(tf.autograph.experimental.do_not_convert(featurize), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    return _with_trimmed_padding(dataset, length_bucket).prefetch(tf.data.AUTOTUNE)


def pack_dataset(tokenizer, seq_length, texts_a, texts_b, labels, order, batch_size, choices=None,
                 length_bucket=0):
    """A tf.data pipeline of packed batches: the examples `order` names (int64 [N]), in that order, batched, then
    tokenized and packed in-graph (`tokenizer.tf_pack`, the export's tokenizer; an empty text_b is no second
    segment: [CLS] a [SEP], albert_tf.text.segments).

    Args:
      texts_a, texts_b: numpy str arrays [E] (texts_b None for single-sentence tasks); with `choices` = C they hold
        C strings per example, [E, C].
      labels: numpy [E] (int or float), or None for prediction.
      order: int64 [N], N a multiple of batch_size.
      length_bucket: 0, or trim each batch's padding to a multiple of it (`modeling.base.trim_padding`).
    Yields:
      (features, labels) or features; features int32 [b, L] (multiple choice: [b, C, L]); L = seq_length, or
      the batch's longest example rounded up to length_bucket.
    """
    table_a = tf.constant(texts_a)
    table_b = None if texts_b is None else tf.constant(texts_b)
    table_labels = None if labels is None else tf.constant(labels)

    def featurize(index):
        a = tf.gather(table_a, index)
        b = None if table_b is None else tf.gather(table_b, index)
        if choices:
            a, b = tf.reshape(a, [-1]), None if b is None else tf.reshape(b, [-1])
        features = tokenizer.tf_pack(a, b, seq_length)
        if choices:
            features = {k: tf.reshape(v, [-1, choices, seq_length]) for k, v in features.items()}
        return features if table_labels is None else (features, tf.gather(table_labels, index))

    return featurized_batches(tokenizer, order, batch_size, featurize, length_bucket)


def array_dataset(features, labels, order, batch_size, length_bucket=0):
    """A tf.data pipeline of batches of precomputed features (a host-side generator, so the arrays are not
    embedded in the graph): the examples `order` names, in order.

    Args:
      features: dict of numpy int32 arrays [E, ...]; labels: numpy [E] or a dict of them, or None.
      order: int64 [N], N a multiple of batch_size.
      length_bucket: 0, or trim each batch's padding to a multiple of it (`modeling.base.trim_padding`).
    """
    def spec(array):
        return tf.TensorSpec([batch_size, *array.shape[1:]], tf.as_dtype(array.dtype))

    def gather(tree, index):
        return {k: v[index] for k, v in tree.items()} if isinstance(tree, dict) else tree[index]

    def batches():
        for start in range(0, len(order), batch_size):
            index = np.asarray(order[start:start + batch_size])
            x = gather(features, index)
            yield x if labels is None else (x, gather(labels, index))

    x_spec = {k: spec(v) for k, v in features.items()}
    if labels is None:
        signature = x_spec
    else:
        signature = (x_spec, {k: spec(v) for k, v in labels.items()} if isinstance(labels, dict) else spec(labels))
    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return _with_trimmed_padding(dataset, length_bucket).prefetch(tf.data.AUTOTUNE)


def in_order(make_dataset, num_examples, batch_size):
    """`make_dataset(order)` for all `num_examples` examples in order, the last batch padded (with example 0) to a
    full batch, as TPUs need static shapes; cached in memory on its first full pass (`tf.data.Dataset.cache`), so a
    run that scores the same examples at every epoch's end featurizes them once."""
    padded = -(-num_examples // batch_size) * batch_size
    order = np.concatenate([np.arange(num_examples), np.zeros(padded - num_examples, np.int64)])
    return make_dataset(order).cache()


def predict_in_order(model, batches, num_examples):
    """model.predict over `batches` (`in_order`'s dataset of `num_examples` examples); the padding's outputs are
    dropped."""
    outputs = model.predict(batches, verbose=0)
    if isinstance(outputs, dict):
        return {k: np.asarray(v)[:num_examples] for k, v in outputs.items()}
    return np.asarray(outputs)[:num_examples]
