"""Pretraining step throughput: albert_tf vs keras-hub 0.32's AlbertMaskedLM, side by side, plus the machine's
measured bf16 matmul peak.

    python benchmarks/train_step.py --config configs/albert_base.json --seq-length 128 --batch-size 8 \
        --peer-python /work/venv-khub/bin/python

Ours: full pretraining steps — MLM + SOP forward/backward, the global-batch loss, clipping to global norm 1.0 and
the LAMB update — exactly `albert_tf.training.pretrain.make_train_step`, `--steps` steps per compiled call as the
training loop runs them, on a fixed synthetic batch (no input pipeline in the timing).
Peer: keras-hub's AlbertMaskedLM (MLM only, no SOP head) with the same architecture, compiled with
keras.optimizers.Lamb, trained with train_on_batch; each of `--peer-configs` is measured and the best one kept. It runs
in a separate interpreter (`--peer-python`, a venv with keras-hub==0.32.*) so the two installs cannot interfere.
Peak: the best of several large bf16 tf.matmul runs on this machine.
Achieved FLOP/s counts the matmul FLOPs of one training example (albert_tf.training.flops) × examples/s.

The last line is parseable:
    examples_per_sec=X achieved_flops=X peak_fraction=X keras_hub_examples_per_sec=X ratio=X
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def synthetic_batch(np, batch_size, seq_length, max_predictions, vocab_size, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_word_ids": rng.integers(5, vocab_size, (batch_size, seq_length)).astype("int32"),
        "input_mask": np.ones((batch_size, seq_length), "int32"),
        "input_type_ids": np.concatenate([np.zeros((batch_size, seq_length // 2), "int32"),
                                          np.ones((batch_size, seq_length - seq_length // 2), "int32")], 1),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, seq_length), (batch_size, max_predictions)),
                                       1).astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab_size, (batch_size, max_predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch_size, max_predictions), "float32"),
        "sentence_order_labels": rng.integers(0, 2, (batch_size,)).astype("int32"),
    }


def measure_matmul_peak(n=2048, repeats=5):
    """Best bf16 FLOP/s of an n×n×n tf.matmul chain (8 products per call, so dispatch is negligible)."""
    import tensorflow as tf

    a = tf.random.normal((n, n), dtype=tf.float32)
    a = tf.cast(a / n ** 0.5, tf.bfloat16)

    @tf.function
    def chain(x):
        for _ in range(8):
            x = tf.matmul(x, a)
        return x

    chain(a).numpy()
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        chain(a).numpy()
        best = max(best, 8 * 2 * n ** 3 / (time.perf_counter() - start))
    return best


def run_ours(args):
    """examples/s of albert_tf's pretraining step."""
    import keras
    import numpy as np
    import tensorflow as tf

    sys.path.insert(0, REPO)
    from albert_tf.config import load_config
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.training import LAMB, WarmupPolynomialDecay
    from albert_tf.training.pretrain import make_train_step

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
    config = load_config(args.config)
    keras.utils.set_random_seed(0)
    model = AlbertPretrainer(config)
    optimizer = LAMB(WarmupPolynomialDecay(1e-4, 10_000, 0))
    optimizer.build(model.trainable_variables)
    step = make_train_step(model, optimizer, args.batch_size, jit_compile=args.xla)
    batch = {k: tf.constant(v) for k, v in synthetic_batch(np, args.batch_size, args.seq_length,
                                                           args.max_predictions, config.vocab_size).items()}

    @tf.function
    def loop(num_steps):  # as pretrain.train_loop: several steps per host call
        total = tf.constant(0.0)
        for _ in tf.range(num_steps):
            total += step(batch, True)["mlm_nll"]
        return total

    loop(tf.constant(args.warmup_steps)).numpy()
    best = 0.0
    for _ in range(args.rounds):
        start = time.perf_counter()
        value = loop(tf.constant(args.steps)).numpy()
        best = max(best, args.steps * args.batch_size / (time.perf_counter() - start))
    if not np.isfinite(value):
        raise RuntimeError("non-finite loss in the benchmark")
    return best


def run_peer(args):
    """examples/s of keras-hub's AlbertMaskedLM for each of --peer-configs (runs inside the peer interpreter)."""
    import keras
    import keras_hub
    import numpy as np

    with open(os.path.join(REPO, args.config) if not os.path.isabs(args.config) else args.config) as f:
        c = json.load(f)
    results = {}
    for peer_config in args.peer_configs.split(","):
        policy, jit = peer_config.split(":")
        keras.mixed_precision.set_global_policy(policy)
        keras.utils.set_random_seed(0)
        backbone = keras_hub.models.AlbertBackbone(
            vocabulary_size=c["vocab_size"], num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
            embedding_dim=c["embedding_size"], hidden_dim=c["hidden_size"], intermediate_dim=c["intermediate_size"],
            num_groups=c.get("num_hidden_groups", 1), num_inner_repetitions=c.get("inner_group_num", 1),
            dropout=c.get("hidden_dropout_prob", 0.0), max_sequence_length=c["max_position_embeddings"],
            num_segments=c["type_vocab_size"])
        model = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=None)
        model.compile(optimizer=keras.optimizers.Lamb(1e-4, global_clipnorm=1.0),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=[], jit_compile=(jit == "jit"))
        b = synthetic_batch(np, args.batch_size, args.seq_length, args.max_predictions, c["vocab_size"])
        x = {"token_ids": b["input_word_ids"], "segment_ids": b["input_type_ids"],
             "padding_mask": b["input_mask"].astype(bool), "mask_positions": b["masked_lm_positions"]}
        y, w = b["masked_lm_ids"], b["masked_lm_weights"]
        for _ in range(args.warmup_steps):
            model.train_on_batch(x, y, sample_weight=w)
        best = 0.0
        for _ in range(args.rounds):
            start = time.perf_counter()
            for _ in range(args.steps):
                loss = model.train_on_batch(x, y, sample_weight=w)
            best = max(best, args.steps * args.batch_size / (time.perf_counter() - start))
        if not np.isfinite(loss):
            raise RuntimeError(f"keras-hub {peer_config}: non-finite loss")
        results[peer_config] = best
        print(f"keras-hub AlbertMaskedLM {peer_config}: {best:.3f} examples/s", file=sys.stderr, flush=True)
    print(json.dumps(results))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/albert_base.json")
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-predictions", type=int, default=20)
    p.add_argument("--steps", type=int, default=10, help="timed steps per round")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="timed rounds; the best is kept")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16", help="ours: compute dtype")
    p.add_argument("--xla", action="store_true", help="ours: jit-compile the forward/backward")
    p.add_argument("--peer-python", default="/work/venv-khub/bin/python",
                   help="an interpreter with keras-hub==0.32.*; empty to skip the peer")
    p.add_argument("--peer-configs", default="mixed_bfloat16:nojit,float32:nojit,mixed_bfloat16:jit",
                   help="policy:jit|nojit pairs measured for keras-hub; the best is compared")
    p.add_argument("--peer-mode", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.peer_mode:
        return run_peer(args)

    peer_results = {}
    if args.peer_python:  # first, so the two never compete for the cores
        proc = subprocess.run([args.peer_python, os.path.abspath(__file__), "--peer-mode", *sys.argv[1:]],
                              cwd=REPO, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""))
        if proc.returncode != 0:
            sys.exit(f"keras-hub peer failed:\n{proc.stderr[-3000:]}")
        sys.stderr.write("".join(l + "\n" for l in proc.stderr.splitlines() if "keras-hub" in l))
        peer_results = json.loads(proc.stdout.strip().splitlines()[-1])

    sys.path.insert(0, REPO)
    from albert_tf.config import load_config
    from albert_tf.training.flops import pretraining_flops_per_example

    examples_per_sec = run_ours(args)
    peak = measure_matmul_peak()
    flops = examples_per_sec * pretraining_flops_per_example(load_config(args.config), args.seq_length,
                                                             args.max_predictions)
    peer_best = max(peer_results.values()) if peer_results else float("nan")
    best_config = max(peer_results, key=peer_results.get) if peer_results else "none"
    print(f"albert_tf ({args.dtype}, xla {'on' if args.xla else 'off'}): {examples_per_sec:.3f} examples/s; "
          f"keras-hub best ({best_config}): {peer_best:.3f} examples/s; measured bf16 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s", flush=True)
    print(f"examples_per_sec={examples_per_sec:.4f} achieved_flops={flops:.4e} peak_fraction={flops / peak:.4f} "
          f"keras_hub_examples_per_sec={peer_best:.4f} ratio={examples_per_sec / peer_best:.4f}", flush=True)


if __name__ == "__main__":
    main()
