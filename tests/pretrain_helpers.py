"""Helpers for the pretraining tests: generated pretraining TFRecords with a learnable sentence order and
predictable masked tokens, and a CLI runner for subprocesses (--cpu-replicas must configure devices before
TensorFlow initializes them).
"""
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from albert_tf.data.features import CLS_ID, MASK_ID, SEP_ID

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_example(rng, seq_length, max_predictions, vocab_size, alphabet=None, unmasked=False):
    """One record in the original order (label 0) or swapped (label 1).

    The original order is a long segment counting up (cyclically) through the low half of the ids, then a short one
    counting through the high half. Swapping moves the short high segment first, so the order is learnable from
    which ids carry segment id 0 and from where [SEP] falls. Masked tokens are predictable from their neighbours
    (each token is the previous one + 1). `alphabet` limits each half to that many ids (an easier MLM task).
    `unmasked` writes the tokens as they are and zero prediction slots (create-data --no-mask's layout).
    """
    half = alphabet or (vocab_size - 5) // 2
    room = seq_length - 3
    len_b = int(rng.integers(3, max(4, room // 4)))
    len_a = int(rng.integers(max(len_b + 2, room // 2), room - len_b + 1))
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
    if unmasked:
        tokens[positions] = ids
        positions, ids, num_masked = positions[:0], ids[:0], 0

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


def write_records(path, num_examples, seq_length=32, max_predictions=5, vocab_size=1000, seed=0, alphabet=None,
                  unmasked=False):
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(num_examples):
            example = make_example(rng, seq_length, max_predictions, vocab_size, alphabet, unmasked)
            writer.write(example.SerializeToString())
    return path


def run_cli(args, timeout=600, check=True):
    """Runs `albert-tf pretrain ARGS` in a fresh Python process; returns the CompletedProcess."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "albert_tf", "pretrain", *map(str, args)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"pretrain exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc
