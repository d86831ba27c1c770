"""Input pipeline throughput at seq 512: examples/s on ONE core, static and dynamic masking, and a peer.

Pins the whole process to one CPU (os.sched_setaffinity, the same as `taskset -c CORE`) before TensorFlow starts,
and gives tf.data a private thread pool of 1 thread, so the figure is per core. The reported rate is examples per
CPU-second consumed by the process (time.process_time), i.e. examples/s on one dedicated core, which stays honest
on a shared machine where other processes also run on that core; the wall-clock rate is printed beside it.

Measured side by side in one run:
  static   albert_tf.data.pretraining_dataset on masked records (batch, then parse_example on the whole batch)
  dynamic  the same on unmasked records with dynamic_masking=True (in-graph n-gram whole-word masking)
  peer     a parse-per-record pipeline as google-research/albert's run_pretraining.py input_fn builds it
           (interleave TFRecordDataset → shuffle(100) → map(parse_single_example, cast to int32) → batch)

Records: generated (`--generate N`, seq 512, 20 predictions, ids drawn Zipf-like from a 30k vocabulary, ~75% word
starts, 10% short sequences as create-data's short_seq_prob) or your own (`--static-records`, `--dynamic-records`).

    python benchmarks/input_pipeline.py [--core 0] [--batch-size 64] [--seconds 10]

Last line: static_examples_per_sec_per_core=... dynamic_examples_per_sec_per_core=... peer_...=...
"""
import argparse
import os
import sys
import tempfile
import time

import common


def _parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--core", type=int, default=0, help="the CPU to pin to (default 0)")
    p.add_argument("--generate", type=int, default=8192, help="records to generate per kind (default 8192)")
    p.add_argument("--num-files", type=int, default=8)
    p.add_argument("--static-records", help="glob of existing masked records (instead of generating)")
    p.add_argument("--dynamic-records", help="glob of existing unmasked records (instead of generating)")
    p.add_argument("--seq-length", type=int, default=512)
    p.add_argument("--max-predictions", type=int, default=20)
    p.add_argument("--vocab-size", type=int, default=30000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0, help="timed seconds per pipeline and round")
    p.add_argument("--rounds", type=int, default=2, help="rounds (pipelines alternate; best round reported)")
    return p.parse_args()


def _generate(directory, kind, count, num_files, seq_length, max_predictions, vocab_size, seed):
    """Writes `count` records of `kind` ('static' masked or 'dynamic' unmasked) in the original layout."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab_size - 4)
    probs = 1.0 / ranks
    probs /= probs.sum()

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    paths = []
    for shard in range(num_files):
        path = os.path.join(directory, f"{kind}-{shard:05d}-of-{num_files:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(count // num_files):
                length = seq_length if rng.random() > 0.1 else int(rng.integers(16, seq_length))
                ids = (rng.choice(ranks, size=length, p=probs) + 4).tolist()
                split = int(rng.integers(2, length - 1))
                ids[0], ids[split], ids[length - 1] = 2, 3, 3
                boundary = (rng.random(length) < 0.75).astype(int).tolist()
                boundary[0] = boundary[split] = boundary[length - 1] = 1
                pad = seq_length - length
                segment = [0] * (split + 1) + [1] * (length - split - 1)
                if kind == "static":
                    positions = sorted(rng.choice(np.arange(1, length - 1), size=min(max_predictions, length - 2),
                                                  replace=False).tolist())
                    labels = [ids[i] for i in positions]
                    for i in positions:
                        ids[i] = 4
                    weights = [1.0] * len(positions)
                else:
                    positions, labels, weights = [], [], []
                extra = max_predictions - len(positions)
                feats = {
                    "input_ids": int_feature(ids + [0] * pad),
                    "input_mask": int_feature([1] * length + [0] * pad),
                    "segment_ids": int_feature(segment + [0] * pad),
                    "token_boundary": int_feature(boundary + [0] * pad),
                    "masked_lm_positions": int_feature(positions + [0] * extra),
                    "masked_lm_ids": int_feature(labels + [0] * extra),
                    "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights + [0.0] * extra)),
                    "next_sentence_labels": int_feature([int(rng.integers(0, 2))]),
                }
                writer.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
        paths.append(path)
    return os.path.join(directory, f"{kind}-*.tfrecord")


def _peer_dataset(pattern, seq_length, max_predictions, batch_size):
    """The original run_pretraining.py input_fn's shape, in TF2 spelling: one parse per record."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    spec = {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32),
    }
    files = sorted(tf.io.gfile.glob(pattern))

    def decode(record):
        example = tf.io.parse_single_example(record, spec)
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}

    d = tf.data.Dataset.from_tensor_slices(files).repeat().shuffle(len(files))
    d = d.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)), num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=False)
    d = d.shuffle(100)
    return d.map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size, drop_remainder=True)


def _examples_per_sec(dataset, batch_size, seconds):
    """(examples per CPU-second of this process, examples per wall-clock second) after a warm-up."""
    iterator = iter(dataset)
    for _ in range(5):  # warm up: fill the shuffle buffer, trace functions
        next(iterator)
    count, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        next(iterator)
        count += batch_size
    return count / (time.process_time() - cpu_start), count / (time.perf_counter() - start)


def main():
    args = _parse_args()
    os.sched_setaffinity(0, {args.core})  # before TensorFlow creates its threads: they inherit the mask
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.data.dataset import pretraining_dataset  # pylint: disable=import-outside-toplevel

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.autotune.cpu_budget = 1

    with tempfile.TemporaryDirectory() as tmp:
        static = args.static_records or _generate(tmp, "static", args.generate, args.num_files, args.seq_length,
                                                   args.max_predictions, args.vocab_size, seed=1)
        dynamic = args.dynamic_records or _generate(tmp, "dynamic", args.generate, args.num_files, args.seq_length,
                                                     args.max_predictions, args.vocab_size, seed=2)
        print(f"records: static {static}, dynamic {dynamic}", flush=True)
        flags = dict(seq_length=args.seq_length, max_predictions=args.max_predictions, batch_size=args.batch_size,
                      is_training=True, seed=0)
        pipelines = {
            "static": lambda: pretraining_dataset(static, **flags),
            "dynamic": lambda: pretraining_dataset(dynamic, dynamic_masking=True, vocab_size=args.vocab_size,
                                                   **flags),
            "peer_parse_per_record": lambda: _peer_dataset(static, args.seq_length, args.max_predictions,
                                                           args.batch_size),
        }
        best = {name: 0.0 for name in pipelines}
        for round_index in range(args.rounds):
            for name, build in pipelines.items():
                per_cpu_second, per_wall_second = _examples_per_sec(build().with_options(options), args.batch_size,
                                                                    args.seconds)
                best[name] = max(best[name], per_cpu_second)
                print(f"round {round_index}: {name:>22s} {per_cpu_second:8.0f} examples per CPU-second "
                      f"({per_wall_second:.0f}/s wall clock on core {args.core})", flush=True)
    print(f"pinned to core {args.core} (sched_setaffinity), tf.data private_threadpool_size=1, "
          f"seq {args.seq_length}, {args.max_predictions} predictions, batch {args.batch_size}, "
          f"load average {common.load_average():.2f}; figures are examples per CPU-second of the pinned process "
          f"(= examples/s on one dedicated core; robust to other processes sharing the core)")
    print(" ".join(f"{name}_examples_per_sec_per_core={rate:.0f}" for name, rate in best.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
