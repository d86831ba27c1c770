"""Resume cost: seconds from process start to the end of the first training step, resuming at step 0, 10k, 100k.

    python benchmarks/resume.py [--shards 1024] [--records-per-shard 64] [--batch-size 32] [--steps 0,10000,100000]
                                [--peer-repo /work/main]

Data: `--shards` small shards of generated records (seq 128, 20 predictions) with the record-count index
create-data writes beside them (albert_tf.data.record_index), as a corpus cut into many files. Model: configs/
albert_tiny.json. For each step N a model dir is prepared with a checkpoint at step N (the tiny model's freshly
initialized weights and optimizer with its step counter set to N), then `albert-tf pretrain ... --num-train-steps
N+1 --steps-per-loop 1` runs in a fresh process: the figure is the wall time from its start to its first
"train step" log line (import, start-up record checks, model build, restore, positioning the input pipeline at
step N, first batch, first compiled step). Resuming at N means the pipeline stands where N × batch records have
been consumed (100k steps × 32 = 3.2M records, ~49 epochs of the default data).

  ours   this checkout: positions from the record counts (whole epochs and file groups skipped, one shuffle window
         and at most one group of files read)
  peer   `--peer-repo` (a checkout of the previous main, whose resume is `dataset.skip` over the consumed
         batches: every record before N is read and parsed); skipped when not given or steps over `--peer-max-step`

Last line: ours_s_at_0=... ours_s_at_10000=... ours_s_at_100000=... ratio_100000_to_0=... [peer_s_at_...=...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SEQ, PRED = 128, 20


def _parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shards", type=int, default=1024)
    p.add_argument("--records-per-shard", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", default="0,10000,100000", help="comma-separated resume steps")
    p.add_argument("--peer-repo", default=None, help="a checkout whose albert_tf resumes with dataset.skip")
    p.add_argument("--peer-max-step", type=int, default=100000, help="largest step timed for the peer")
    p.add_argument("--work-dir", default=None, help="where data and model dirs go (default: a temp dir)")
    return p.parse_args()


def _write_data(directory, shards, per_shard):
    """Generated records in `shards` files plus their record-count index; returns the glob."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.data import record_index  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(0)
    os.makedirs(directory, exist_ok=True)

    def feature(values, floats=False):
        if floats:
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    entries = {}
    for shard in range(shards):
        name = f"train-{shard:05d}-of-{shards:05d}.tfrecord"
        path = os.path.join(directory, name)
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(per_shard):
                ids = rng.integers(5, 1000, SEQ).tolist()
                ids[0], ids[SEQ // 2], ids[-1] = 2, 3, 3
                positions = sorted(rng.choice(np.arange(1, SEQ - 1), PRED, replace=False).tolist())
                example = tf.train.Example(features=tf.train.Features(feature={
                    "input_ids": feature(ids), "input_mask": feature([1] * SEQ),
                    "segment_ids": feature([0] * (SEQ // 2 + 1) + [1] * (SEQ - SEQ // 2 - 1)),
                    "token_boundary": feature([1] * SEQ), "masked_lm_positions": feature(positions),
                    "masked_lm_ids": feature([ids[i] for i in positions]),
                    "masked_lm_weights": feature([1.0] * PRED, floats=True),
                    "next_sentence_labels": feature([int(rng.integers(2))])}))
                writer.write(example.SerializeToString())
        entries[name] = (per_shard, os.path.getsize(path))
    record_index.write_index(record_index.index_path(os.path.join(directory, "train")), entries)
    return os.path.join(directory, "train-*")


def _checkpoint_at(model_dir, step):
    """A model dir holding the tiny model's checkpoint with the optimizer's step counter at `step`."""
    from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel
    from albert_tf.training import pretrain_step  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel

    config = load_config(os.path.join(REPO, "configs", "albert_tiny.json"))
    model, optimizer, _ = pretrain_step.build_model_and_optimizer(config, 1e-3, step + 1, 0)
    optimizer.iterations.assign(step)
    pretrained.write_files(model_dir, config, None)
    tf.train.CheckpointManager(pretrained.checkpoint_for(model, optimizer), model_dir, max_to_keep=1,
                               step_counter=optimizer.iterations).save(checkpoint_number=step)


def _time_to_first_step(repo, pattern, model_dir, step, batch_size):
    """Seconds from the start of `albert-tf pretrain` (from `repo`) to its first train log line."""
    command = [sys.executable, "-u", "-m", "albert_tf", "pretrain", "--config",
               os.path.join(REPO, "configs", "albert_tiny.json"), "--train-data", pattern, "--model-dir", model_dir,
               "--max-seq-length", str(SEQ), "--max-predictions", str(PRED), "--batch-size", str(batch_size),
               "--num-train-steps", str(step + 1), "--num-warmup-steps", "0", "--steps-per-loop", "1",
               "--save-checkpoints-steps", str(10**9)]
    env = dict(os.environ, PYTHONPATH=repo, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.time()
    with subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if re.match(rf"train step {step + 1}:", line):
                seconds = time.time() - start
                proc.kill()
                return seconds
        proc.wait()
    raise RuntimeError(f"{repo}: no first step at {step}:\n{''.join(lines[-20:])}")


def main():
    args = _parse_args()
    sys.path.insert(0, REPO)
    work = args.work_dir or tempfile.mkdtemp(prefix="resume-bench-")
    start = time.time()
    pattern = _write_data(os.path.join(work, "data"), args.shards, args.records_per_shard)
    print(f"data: {args.shards} shards x {args.records_per_shard} records in {time.time() - start:.1f} s",
          file=sys.stderr)
    results = {}
    for step in (int(s) for s in args.steps.split(",")):
        sides = [("ours", REPO)] + ([("peer", args.peer_repo)] if args.peer_repo and step <= args.peer_max_step
                                    else [])
        for side, repo in sides:
            model_dir = os.path.join(work, f"{side}-{step}")
            if step:
                _checkpoint_at(model_dir, step)
            results[side, step] = _time_to_first_step(repo, pattern, model_dir, step, args.batch_size)
            print(f"{side} resume at step {step}: {results[side, step]:.1f} s to the first step "
                  f"({step * args.batch_size:,} records consumed before it)", file=sys.stderr, flush=True)
    fields = [f"{side}_s_at_{step}={seconds:.2f}" for (side, step), seconds in results.items()]
    steps = sorted(step for side, step in results if side == "ours")
    if len(steps) > 1 and steps[0] == 0:
        fields.append(f"ratio_{steps[-1]}_to_0={results['ours', steps[-1]] / results['ours', 0]:.2f}")
    print(" ".join(fields))


if __name__ == "__main__":
    main()
