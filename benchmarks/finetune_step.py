"""Fine-tuning step throughput on this CPU: albert_tf's AlbertClassifier.fit step vs keras-hub 0.32's
AlbertTextClassifier.fit step (sequence classification, 2 classes).

    python benchmarks/finetune_step.py --config configs/albert_base.json --seq-length 128 --batch-size 32

Each side runs in its own worker process (built and compiled first, then idle while the others are timed),
alternating round by round, `--rounds` times (the machine and its helpers are those of benchmarks/train_step.py):

  ours   AlbertClassifier(AlbertEncoder(config), 2) compiled as `albert-tf finetune` compiles it (AdamW with LayerNorm
         and biases excluded from decay, linear warm-up/decay, clip-norm 1.0, sparse CE from logits, accuracy),
         `train_on_batch` (the compiled `fit` step) in `--dtype` (default float32) with `--xla`.
  peer   keras-hub 0.32 AlbertTextClassifier with the same backbone sizes and preprocessor=None, its default
         compile (Adam 5e-5, sparse CE from logits, accuracy), `train_on_batch`, in every configuration of
         `--peer-configs`; the fastest is the figure. Runs under `--peer-python` (/work/venv-khub).

Both get the same random batch ([CLS] A [SEP] B [SEP], no padding, random labels).
The last line: steps_per_sec=X keras_hub_steps_per_sec=Y ratio=X/Y (best rounds), then the medians.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_step as ts  # noqa: E402  pylint: disable=wrong-import-position


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(ts.REPO, "configs", "albert_base.json"))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=3, help="timed steps per round and side (default 3)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="ours: compute dtype")
    p.add_argument("--xla", choices=("on", "off"), default="off", help="ours: compile the step with XLA")
    p.add_argument("--peer-python", default=ts.DEFAULT_PEER_PYTHON if os.path.exists(ts.DEFAULT_PEER_PYTHON)
                   else None)
    p.add_argument("--peer-configs", default=",".join(ts.PEER_CONFIGS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--max-predictions", type=int, default=1, help=argparse.SUPPRESS)  # random_batch's argument
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _batch(args, vocab_size):
    import numpy as np  # pylint: disable=import-outside-toplevel

    b = ts.random_batch(vocab_size, args.batch_size, args.seq_length, 1, args.seed)
    labels = np.random.default_rng(args.seed).integers(0, 2, args.batch_size).astype("int32")
    return b, labels


def _worker_ours(args):
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.tasks import AlbertClassifier  # pylint: disable=import-outside-toplevel
    from albert_tf.training import finetune  # pylint: disable=import-outside-toplevel

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(args.seed)
    model = AlbertClassifier(AlbertEncoder(args.config), 2)
    plan = finetune.Plan(learning_rate=2e-5, batch_size=args.batch_size, max_seq_length=args.seq_length,
                         epochs=1, steps_per_epoch=10000, warmup_steps=100, albert_dropout=0.0,
                         classifier_dropout=0.1)
    model.compile(optimizer=finetune.create_optimizer(plan, model),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=args.xla == "on")
    b, y = _batch(args, model.encoder.config.vocab_size)
    x = {k: b[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    _serve_model(model, x, y, args)


def _worker_peer(args, peer_config):
    dtype, _, xla = peer_config.partition("+")
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel

    c = ts._load_config_dict(args.config)  # pylint: disable=protected-access
    keras.mixed_precision.set_global_policy(dtype)
    keras.utils.set_random_seed(args.seed)
    backbone = ts.keras_hub_backbone(keras_hub, c)
    model = keras_hub.models.AlbertTextClassifier(backbone, num_classes=2, preprocessor=None)
    model.compile(jit_compile=bool(xla))
    b, y = _batch(args, c["vocab_size"])
    x = {"token_ids": b["input_word_ids"], "padding_mask": b["input_mask"], "segment_ids": b["input_type_ids"]}
    _serve_model(model, x, y, args)


def _serve_model(model, x, y, args):
    def run(num_steps):
        for _ in range(num_steps):
            logs = model.train_on_batch(x, y, return_dict=True)
        return {"loss": float(logs["loss"])}

    start = time.perf_counter()
    first = run(1)
    compile_seconds = time.perf_counter() - start
    run(args.warmup_steps)
    ts._say("ready", compile_seconds=compile_seconds, first_loss=first["loss"],  # pylint: disable=protected-access
            params=int(model.count_params()))
    ts._serve(run)  # pylint: disable=protected-access


def main(args):
    argv = ["--config", os.path.abspath(args.config), "--seq-length", str(args.seq_length), "--batch-size",
            str(args.batch_size), "--warmup-steps", str(args.warmup_steps), "--seed", str(args.seed),
            "--dtype", args.dtype, "--xla", args.xla]
    peer_configs = [c.strip() for c in args.peer_configs.split(",") if c.strip()]
    if not args.peer_python or subprocess.run([args.peer_python, "-c", "import keras_hub"],
                                              capture_output=True).returncode:
        print(f"keras-hub peer not measured: {args.peer_python} missing or without keras_hub", flush=True)
        peer_configs = []
    script = os.path.abspath(__file__)
    workers = {}
    try:
        workers["ours"] = _Worker("ours", sys.executable, script, argv, args.verbose)
        for c in peer_configs:
            try:
                workers[f"peer:{c}"] = _Worker(f"peer:{c}", args.peer_python, script, argv, args.verbose)
            except RuntimeError as e:
                print(f"keras-hub {c}: failed to start: {e}", flush=True)
        for name, w in workers.items():
            print(f"{name}: compiled in {w.ready['compile_seconds']:.1f}s, {w.ready['params']} parameters, "
                  f"first loss {w.ready['first_loss']:.4f}", flush=True)
        rates = {name: [] for name in workers}
        for r in range(args.rounds):
            for name, w in workers.items():
                rates[name].append(args.steps / w.run(args.steps)["seconds"])
            print(f"round {r + 1}/{args.rounds}: " + " ".join(f"{n}={v[-1]:.3f}steps/s" for n, v in rates.items()),
                  flush=True)
    finally:
        for w in workers.values():
            w.close()
    ours_best, ours_median = max(rates["ours"]), statistics.median(rates["ours"])
    peers = {n: v for n, v in rates.items() if n.startswith("peer:")}
    if peers:
        best_peer = max(peers, key=lambda n: max(peers[n]))
        peer_best, peer_median = max(peers[best_peer]), statistics.median(peers[best_peer])
        tail = (f"keras_hub_steps_per_sec={peer_best:.3f} ratio={ours_best / peer_best:.3f} "
                f"median_steps_per_sec={ours_median:.3f} keras_hub_median_steps_per_sec={peer_median:.3f} "
                f"median_ratio={ours_median / peer_median:.3f} keras_hub_config={best_peer.split(':', 1)[1]}")
    else:
        tail = f"keras_hub_steps_per_sec=nan ratio=nan median_steps_per_sec={ours_median:.3f} keras_hub_config=none"
    print(f"steps_per_sec={ours_best:.3f} {tail} config={args.dtype}{'+xla' if args.xla == 'on' else ''}",
          flush=True)
    return 0


class _Worker(ts.Worker):
    """train_step's worker protocol, running this script."""

    def __init__(self, name, python, script, argv, verbose):  # pylint: disable=super-init-not-called
        import tempfile  # pylint: disable=import-outside-toplevel

        self.name = name
        self.log = None if verbose else tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        self.process = subprocess.Popen([python, script, *argv, "--_worker", name], cwd=ts.REPO, env=env,
                                        text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.ready = self._read("ready")


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._worker == "ours":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        _worker_ours(parsed)
    elif parsed._worker:
        _worker_peer(parsed, parsed._worker.split(":", 1)[1])
    else:
        sys.exit(main(parsed))
