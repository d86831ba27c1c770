"""Helpers for the pretraining tests: generated pretraining TFRecords with a learnable sentence order and
predictable masked tokens, a minimal reader (used only while albert_tf.data.dataset has not landed), and a CLI
runner for subprocesses (--cpu-replicas must configure devices before TensorFlow initializes them).
"""
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # when run as a script
    sys.path.insert(0, REPO)

from albert_tf.data.features import CLS_ID, MASK_ID, SEP_ID, feature_spec  # noqa: E402


def make_example(rng, seq_length, max_predictions, vocab_size):
    """One record. Segment "first" counts up through the low half of the vocabulary, segment "second" through the
    high half; label 0 keeps (first, second), label 1 swaps them, so the order is learnable from either segment's
    ids. Masked tokens are predictable from their neighbours (each token is the previous one + 1)."""
    half = (vocab_size - 5) // 2
    len_a = int(rng.integers(4, seq_length // 2 - 2))
    len_b = int(rng.integers(4, seq_length - 3 - len_a + 1))
    first = 5 + (int(rng.integers(0, half)) + np.arange(len_a)) % half
    second = 5 + half + (int(rng.integers(0, half)) + np.arange(len_b)) % half
    label = int(rng.integers(0, 2))
    a, b = (first, second) if label == 0 else (second, first)
    tokens = np.concatenate([[CLS_ID], a, [SEP_ID], b, [SEP_ID]]).astype(np.int64)
    segments = np.concatenate([np.zeros(len(a) + 2), np.ones(len(b) + 1)]).astype(np.int64)
    n = len(tokens)
    candidates = [i for i in range(1, n) if tokens[i] not in (CLS_ID, SEP_ID)]
    num_masked = min(max_predictions, max(1, int(round(n * 0.15))))
    positions = np.sort(rng.choice(candidates, size=num_masked, replace=False))
    ids = tokens[positions].copy()
    tokens[positions] = MASK_ID

    def pad(x, length, dtype=np.int64):
        out = np.zeros(length, dtype)
        out[: len(x)] = x
        return out

    feature = {
        "input_ids": pad(tokens, seq_length), "input_mask": pad(np.ones(n), seq_length),
        "segment_ids": pad(segments, seq_length), "token_boundary": pad(np.ones(n), seq_length),
        "masked_lm_positions": pad(positions, max_predictions), "masked_lm_ids": pad(ids, max_predictions),
        "masked_lm_weights": pad(np.ones(num_masked), max_predictions, np.float32),
        "next_sentence_labels": np.array([label], np.int64),
    }

    def to_feature(v):
        if v.dtype == np.float32:
            return tf.train.Feature(float_list=tf.train.FloatList(value=v.tolist()))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v.tolist()))

    return tf.train.Example(features=tf.train.Features(feature={k: to_feature(v) for k, v in feature.items()}))


def write_records(path, num_examples, seq_length=32, max_predictions=5, vocab_size=1000, seed=0):
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(num_examples):
            writer.write(make_example(rng, seq_length, max_predictions, vocab_size).SerializeToString())
    return path


def minimal_pretraining_dataset(file_pattern, *, seq_length, max_predictions, batch_size, is_training,
                                input_context=None, dynamic_masking=False, seed=None):
    """Stand-in for albert_tf.data.pretraining_dataset (same signature and batch layout) for these tests only."""
    if dynamic_masking:
        raise NotImplementedError("the test stand-in reader has no dynamic masking")
    files = sorted(tf.io.gfile.glob(file_pattern))
    dataset = tf.data.TFRecordDataset(files)
    if input_context and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.repeat().shuffle(64, seed=seed)
    spec = feature_spec(seq_length, max_predictions)

    def parse(record):
        f = tf.io.parse_single_example(record, spec)
        i32 = lambda name: tf.cast(f[name], tf.int32)  # noqa: E731
        return {"input_word_ids": i32("input_ids"), "input_mask": i32("input_mask"),
                "input_type_ids": i32("segment_ids"), "masked_lm_positions": i32("masked_lm_positions"),
                "masked_lm_ids": i32("masked_lm_ids"), "masked_lm_weights": f["masked_lm_weights"],
                "sentence_order_labels": tf.cast(f["next_sentence_labels"][0], tf.int32)}

    return dataset.map(parse).batch(batch_size, drop_remainder=True)


def use_stand_in_reader_if_needed():
    """Points albert_tf.data.pretraining_dataset at the stand-in while the real reader has not landed."""
    try:
        import albert_tf.data.dataset  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        import albert_tf.data  # pylint: disable=import-outside-toplevel

        albert_tf.data.pretraining_dataset = minimal_pretraining_dataset


def run_cli(args, timeout=600, check=True):
    """Runs `albert-tf pretrain ARGS` in a fresh Python process; returns the CompletedProcess."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "pretrain", *map(str, args)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"pretrain exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


if __name__ == "__main__":
    use_stand_in_reader_if_needed()
    from albert_tf import cli  # pylint: disable=import-outside-toplevel

    sys.exit(cli.main(sys.argv[1:]))
