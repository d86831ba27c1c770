"""Serving on this CPU, raw strings → pooled_output: our `albert-tf export` SavedModel vs keras-hub 0.32.

    python benchmarks/serving.py --config configs/albert_base.json --seq-length 128 --batch-size 32 \
        [--dtype float32|bfloat16|auto] [--before-checkout DIR]

The parent (this project's Python) first builds what both sides serve, from one seed:
  * a SentencePiece vocabulary (`albert-tf vocab`'s trainer) on a generated English-like corpus; its size replaces
    the config's vocab_size on both sides (a generated corpus cannot support 30,000 pieces; the embedding lookup
    is a negligible part of the work), so both tokenize with the same vocabulary;
  * random weights (AlbertPretrainer(config) saved as a pretrained-model directory) and
    `albert-tf export --max-seq-length L --no-warmup` of it: its size on disk is reported;
  * the requests: real-looking English sentences (1–3 per text) generated deterministically from `--seed`;
  * with `--before-checkout DIR`: the same model exported by that checkout's `albert-tf export` (e.g. the previous
    main), served by a second worker like ours (`before`), for a before/after beside the peer in one run.
Then each side runs in its own worker process (loaded and warmed first, then idle while the others are timed),
alternating round by round, `--rounds` times (the worker protocol of benchmarks/common.py):

  ours   a fresh process importing only tensorflow and tensorflow_text: tf.saved_model.load(export), then
         signatures["serving_default"](text_a=strings, text_b=<its default, empty>)["pooled_output"]
         (normalization, SentencePiece and packing in the graph; the encoder runs the batch's tokens only).
         Load time (tf.saved_model.load) and the first call are reported. `--dtype` is the export's.
  peer   keras-hub 0.32 (under `--peer-python`): AlbertTokenizer(proto=the same vocabulary),
         AlbertTextClassifierPreprocessor(tokenizer, sequence_length=L) in a tf.function, then
         AlbertBackbone (the config's sizes, random weights).predict_on_batch(...)["pooled_output"], in every
         configuration of `--peer-configs` (float32 / mixed_bfloat16, jit_compile off / on); the fastest is the
         figure.

Per round and side: `--batches` requests of `--batch-size` strings (examples/s), then `--singles` requests of one
string (each timed; the round's p50). The figures are medians over rounds (best rounds beside them).
With --before-checkout, a line `before: examples_per_sec=… ratio=… p50_ms=… latency_ratio=…` (against the same
peer figures). The last line: examples_per_sec=X keras_hub_examples_per_sec=Y ratio=X/Y p50_ms=A keras_hub_p50_ms=B
latency_ratio=B/A export_mb=S load_seconds=T, then the chosen peer configurations.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import common


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(common.REPO, "configs", "albert_base.json"))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=3, help="timed batch requests per round and side (default 3)")
    p.add_argument("--singles", type=int, default=20, help="timed batch-1 requests per round and side (default 20)")
    p.add_argument("--vocab-size", type=int, default=600,
                   help="pieces of the generated vocabulary (default 600; its corpus supports at most about 675)")
    common.add_peer_arguments(p)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "auto"),
                   help="our export's --dtype (default float32)")
    p.add_argument("--before-checkout", default=None, metavar="DIR",
                   help="also serve the export written by this checkout's `albert-tf export` of the same model")
    p.add_argument("--workdir", default=None, help="keep the vocabulary, model and export here (default: a temp dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="show the workers' stderr")
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)  # ours | before | peer:CONFIG
    p.add_argument("--_export", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_spm", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_model_config", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------ workers
def _serve_requests(predict, args):
    """Worker loop: 'batches N' times N batch requests, 'singles N' N one-string requests (each timed); 'quit' ends.

    predict(list of str) -> numpy pooled_output [B, H] (it must wait for the result)."""
    texts = common.make_texts(max(args.batch_size * 8, 64), args.seed + 1)
    batches = [texts[i:i + args.batch_size] for i in range(0, len(texts) - args.batch_size + 1, args.batch_size)]
    cursor = {"batch": 0, "single": 0}

    def batch_requests(count):
        for _ in range(count):
            cursor["batch"] += 1
            predict(batches[cursor["batch"] % len(batches)])

    def single_requests(count):
        times = []
        for _ in range(count):
            cursor["single"] += 1
            start = time.perf_counter()
            predict([texts[cursor["single"] % len(texts)]])
            times.append(time.perf_counter() - start)
        return {"times": times}

    common.serve({"batches": common.timed(batch_requests), "singles": single_requests})


def _warm(predict, args):
    """First call (timed), then a few untimed batch and single requests."""
    start = time.perf_counter()
    out = predict(common.make_texts(args.batch_size, args.seed + 2))
    first = time.perf_counter() - start
    for texts in (common.make_texts(args.batch_size, args.seed + 3), common.make_texts(1, args.seed + 4),
                  common.make_texts(1, args.seed + 5)):
        predict(texts)
    return first, out


def _worker_ours(args):
    """tensorflow + tensorflow_text only: load the export, serve serving_default."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    start = time.perf_counter()
    model = tf.saved_model.load(args._export)  # pylint: disable=protected-access
    load_seconds = time.perf_counter() - start
    serve = model.signatures["serving_default"]
    no_text_b = tf.constant([], tf.string)  # what TF Serving feeds for an absent text_b (SignatureDef.defaults)

    def predict(texts):
        return serve(text_a=tf.constant(texts), text_b=no_text_b)["pooled_output"].numpy()

    first, out = _warm(predict, args)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("albert_tf", "keras_hub"))
    common.say("ready", load_seconds=load_seconds, first_call_seconds=first, hidden=int(out.shape[1]),
               modules=leaked)
    _serve_requests(predict, args)


def _worker_peer(args, peer_config):
    """keras-hub 0.32: AlbertTextClassifierPreprocessor + AlbertBackbone, in `peer_config`."""
    dtype, _, xla = peer_config.partition("+")
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    c = common.load_config_dict(args._model_config)  # pylint: disable=protected-access
    keras.mixed_precision.set_global_policy(dtype)
    keras.utils.set_random_seed(args.seed)
    start = time.perf_counter()
    tokenizer = keras_hub.models.AlbertTokenizer(proto=args._spm)  # pylint: disable=protected-access
    preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=args.seq_length)
    backbone = common.keras_hub_backbone(keras_hub, c)
    backbone.compile(jit_compile=bool(xla))
    preprocess = tf.function(preprocessor)
    load_seconds = time.perf_counter() - start

    def predict(texts):
        x = preprocess(tf.constant(texts))
        return backbone.predict_on_batch(x)["pooled_output"]

    first, out = _warm(predict, args)
    common.say("ready", load_seconds=load_seconds, first_call_seconds=first, hidden=int(out.shape[1]), modules=[])
    _serve_requests(predict, args)


# ------------------------------------------------------------------------------------------ the parent
def _worker(name, python, argv, args):
    """A worker running this script; no PYTHONPATH, so that each side imports only its own stack."""
    return common.Worker(name, python, __file__, argv, args.verbose, env=common.child_env(checkout=False),
                         cwd=common.HERE)


def main(args):  # noqa: C901
    peer_configs = common.peer_configs(args)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        path, spm, model_config, size = common.prepare_export(workdir, args.config, args.seq_length,
                                                              args.vocab_size, args.seed, dtype=args.dtype)
        print(f"{common.now()} load average {common.load_average():.2f}; "
              f"seq {args.seq_length}, batch {args.batch_size} x {args.batches} and {args.singles} batch-1 requests "
              f"x {args.rounds} rounds; export {path} ({args.dtype}): {size / 2**20:.1f} MiB", flush=True)
        common_argv = ["--seq-length", str(args.seq_length), "--batch-size", str(args.batch_size),
                       "--seed", str(args.seed), "--_spm", spm, "--_model_config", model_config]
        argv = common_argv + ["--_export", path]
        workers = {}
        try:
            workers["ours"] = _worker("ours", sys.executable, argv, args)
            if workers["ours"].ready["modules"]:
                raise SystemExit(f"ours imported {workers['ours'].ready['modules']}")
            if args.before_checkout:
                before = common.export_by_checkout(args.before_checkout, os.path.join(workdir, "model"),
                                                   os.path.join(workdir, "before"), args.seq_length)
                workers["before"] = _worker("before", sys.executable, common_argv + ["--_export", before], args)
            workers.update(common.start_peers({f"peer:{c}": (args.peer_python, __file__, argv, args.verbose,
                                                             common.child_env(checkout=False), common.HERE)
                                               for c in peer_configs}))
            for name, w in workers.items():
                print(f"{name}: loaded in {w.ready['load_seconds']:.2f}s, first call {w.ready['first_call_seconds']:.2f}s"
                      f", hidden {w.ready['hidden']}", flush=True)
            rates = {name: [] for name in workers}
            p50s = {name: [] for name in workers}
            for r in range(args.rounds):
                line = []
                for name, w in workers.items():
                    rates[name].append(args.batches * args.batch_size / w.command("batches", args.batches)["seconds"])
                    p50s[name].append(1000 * statistics.median(w.command("singles", args.singles)["times"]))
                    line.append(f"{name}={rates[name][-1]:.2f}ex/s,p50={p50s[name][-1]:.1f}ms")
                print(f"round {r + 1}/{args.rounds} (load {common.load_average():.2f}): " + " ".join(line),
                      flush=True)
        finally:
            common.close_all(workers)
    for name in workers:
        print(f"{name}: examples/s median {statistics.median(rates[name]):.2f} best {max(rates[name]):.2f}; "
              f"batch-1 p50 median {statistics.median(p50s[name]):.1f} ms best {min(p50s[name]):.1f} ms", flush=True)
    ours_rate, ours_p50 = statistics.median(rates["ours"]), statistics.median(p50s["ours"])
    ours_text = (f"examples_per_sec={ours_rate:.3f} p50_ms={ours_p50:.2f} export_mb={size / 2**20:.1f} "
                 f"load_seconds={workers['ours'].ready['load_seconds']:.2f}")
    peers = [n for n in workers if n.startswith("peer:")]
    if peers:
        fastest = max(peers, key=lambda n: statistics.median(rates[n]))
        quickest = min(peers, key=lambda n: statistics.median(p50s[n]))
        peer_rate, peer_p50 = statistics.median(rates[fastest]), statistics.median(p50s[quickest])
        if "before" in workers:
            before_rate, before_p50 = statistics.median(rates["before"]), statistics.median(p50s["before"])
            print(f"before: examples_per_sec={before_rate:.3f} ratio={before_rate / peer_rate:.3f} "
                  f"p50_ms={before_p50:.2f} latency_ratio={peer_p50 / before_p50:.3f}", flush=True)
        print(f"{ours_text} keras_hub_examples_per_sec={peer_rate:.3f} ratio={ours_rate / peer_rate:.3f} "
              f"keras_hub_p50_ms={peer_p50:.2f} latency_ratio={peer_p50 / ours_p50:.3f} "
              f"keras_hub_config={fastest.split(':', 1)[1]} keras_hub_latency_config={quickest.split(':', 1)[1]}",
              flush=True)
    else:
        print(f"{ours_text} keras_hub_examples_per_sec=nan ratio=nan keras_hub_config=none", flush=True)
    return 0


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._worker in ("ours", "before"):  # pylint: disable=protected-access
        _worker_ours(parsed)
    elif parsed._worker:  # pylint: disable=protected-access
        _worker_peer(parsed, parsed._worker.split(":", 1)[1])  # pylint: disable=protected-access
    else:
        sys.exit(main(parsed))
