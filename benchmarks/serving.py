"""Serving on this CPU, raw strings → pooled_output: our `albert-tf export` SavedModel vs keras-hub 0.32.

    python benchmarks/serving.py --config configs/albert_base.json --seq-length 128 --batch-size 32

The parent (this project's Python) first builds what both sides serve, from one seed:
  * a SentencePiece vocabulary (`albert-tf vocab`'s trainer) on a generated English-like corpus; its size replaces
    the config's vocab_size on both sides (a generated corpus cannot support 30,000 pieces; the embedding lookup
    is a negligible part of the work), so both tokenize with the same vocabulary;
  * random weights (AlbertPretrainer(config) saved as a pretrained-model directory) and
    `albert-tf export --max-seq-length L --no-warmup` of it: its size on disk is reported;
  * the requests: real-looking English sentences (1–3 per text) generated deterministically from `--seed`.
Then each side runs in its own worker process (loaded and warmed first, then idle while the others are timed),
alternating round by round, `--rounds` times (the worker protocol of benchmarks/train_step.py):

  ours   a fresh process importing only tensorflow and tensorflow_text: tf.saved_model.load(export), then
         signatures["serving_default"](text_a=strings, text_b=<its default, empty>)["pooled_output"]
         (normalization, SentencePiece and packing in the graph, padded to L). Load time (tf.saved_model.load) and the first call are reported.
  peer   keras-hub 0.32 (under `--peer-python`): AlbertTokenizer(proto=the same vocabulary),
         AlbertTextClassifierPreprocessor(tokenizer, sequence_length=L) in a tf.function, then
         AlbertBackbone (the config's sizes, random weights).predict_on_batch(...)["pooled_output"], in every
         configuration of `--peer-configs` (float32 / mixed_bfloat16, jit_compile off / on); the fastest is the
         figure.

Per round and side: `--batches` requests of `--batch-size` strings (examples/s), then `--singles` requests of one
string (each timed; the round's p50). The figures are medians over rounds (best rounds beside them).
The last line: examples_per_sec=X keras_hub_examples_per_sec=Y ratio=X/Y p50_ms=A keras_hub_p50_ms=B
latency_ratio=B/A export_mb=S load_seconds=T, then the chosen peer configurations.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_step as ts  # noqa: E402  pylint: disable=wrong-import-position

_WORDS = {
    "det": "the a this that every each one another some no".split(),
    "adj": ("old new small large quiet early late bright dark simple careful modern ancient northern local "
            "famous narrow wide strange common").split(),
    "noun": ("river city teacher garden report engine village market student window letter bridge doctor "
             "museum forest station company library winter question machine harbor painter theory").split(),
    "verb": ("crossed opened described followed reached built changed visited repaired explained found "
             "closed measured carried watched studied").split(),
    "adv": "slowly quickly again today finally carefully often rarely yesterday".split(),
    "prep": "near behind across under beside after before through".split(),
    "name": "Anna Paris Lisbon Tokyo Marcus Elena Oslo Kenya Peter Sofia".split(),
}


def make_texts(count, seed):
    """`count` texts of 1-3 generated English sentences each (deterministic given seed)."""
    rng = random.Random(seed)
    w = _WORDS

    def sentence():
        subject = (rng.choice(w["name"]) if rng.random() < 0.3 else
                   f"{rng.choice(w['det'])} {rng.choice(w['adj'])} {rng.choice(w['noun'])}")
        words = [subject, rng.choice(w["verb"]), rng.choice(w["det"]), rng.choice(w["noun"])]
        if rng.random() < 0.6:
            words += [rng.choice(w["prep"]), rng.choice(w["det"]), rng.choice(w["adj"]), rng.choice(w["noun"])]
        if rng.random() < 0.4:
            words.append(rng.choice(w["adv"]))
        if rng.random() < 0.3:
            words += ["in", str(rng.randint(1850, 2024))]
        text = " ".join(words)
        return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "!", "?"])

    return [" ".join(sentence() for _ in range(rng.randint(1, 3))) for _ in range(count)]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(ts.REPO, "configs", "albert_base.json"))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=3, help="timed batch requests per round and side (default 3)")
    p.add_argument("--singles", type=int, default=20, help="timed batch-1 requests per round and side (default 20)")
    p.add_argument("--vocab-size", type=int, default=600,
                   help="pieces of the generated vocabulary (default 600; its corpus supports at most about 675)")
    p.add_argument("--peer-python", default=ts.DEFAULT_PEER_PYTHON if os.path.exists(ts.DEFAULT_PEER_PYTHON)
                   else None, help=f"interpreter with keras-hub 0.32 (default {ts.DEFAULT_PEER_PYTHON})")
    p.add_argument("--peer-configs", default=",".join(ts.PEER_CONFIGS),
                   help=f"comma-separated, among {', '.join(ts.PEER_CONFIGS)} (default: all)")
    p.add_argument("--workdir", default=None, help="keep the vocabulary, model and export here (default: a temp dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="show the workers' stderr")
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)  # ours | peer:CONFIG
    p.add_argument("--_export", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_spm", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_model_config", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------ workers
def _serve_requests(predict, args):
    """Worker loop: 'batches N' times N batch requests, 'singles N' N one-string requests; 'quit' ends.

    predict(list of str) -> numpy pooled_output [B, H] (it must wait for the result)."""
    texts = make_texts(max(args.batch_size * 8, 64), args.seed + 1)
    batches = [texts[i:i + args.batch_size] for i in range(0, len(texts) - args.batch_size + 1, args.batch_size)]
    cursor = {"batch": 0, "single": 0}

    def next_batch():
        cursor["batch"] += 1
        return batches[cursor["batch"] % len(batches)]

    def next_single():
        cursor["single"] += 1
        return [texts[cursor["single"] % len(texts)]]

    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            return
        count = int(command[1])
        if command[0] == "batches":
            start = time.perf_counter()
            for _ in range(count):
                predict(next_batch())
            ts._say("result", seconds=time.perf_counter() - start)  # pylint: disable=protected-access
        else:
            times = []
            for _ in range(count):
                start = time.perf_counter()
                predict(next_single())
                times.append(time.perf_counter() - start)
            ts._say("result", times=times)  # pylint: disable=protected-access


def _warm(predict, args):
    """First call (timed), then a few untimed batch and single requests."""
    start = time.perf_counter()
    out = predict(make_texts(args.batch_size, args.seed + 2))
    first = time.perf_counter() - start
    for texts in (make_texts(args.batch_size, args.seed + 3), make_texts(1, args.seed + 4),
                  make_texts(1, args.seed + 5)):
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
    ts._say("ready", load_seconds=load_seconds, first_call_seconds=first,  # pylint: disable=protected-access
            hidden=int(out.shape[1]), modules=leaked)
    _serve_requests(predict, args)


def _worker_peer(args, peer_config):
    """keras-hub 0.32: AlbertTextClassifierPreprocessor + AlbertBackbone, in `peer_config`."""
    dtype, _, xla = peer_config.partition("+")
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with open(args._model_config, encoding="utf-8") as f:  # pylint: disable=protected-access
        c = json.load(f)
    keras.mixed_precision.set_global_policy(dtype)
    keras.utils.set_random_seed(args.seed)
    start = time.perf_counter()
    tokenizer = keras_hub.models.AlbertTokenizer(proto=args._spm)  # pylint: disable=protected-access
    preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=args.seq_length)
    backbone = ts.keras_hub_backbone(keras_hub, c)
    backbone.compile(jit_compile=bool(xla))
    preprocess = tf.function(preprocessor)
    load_seconds = time.perf_counter() - start

    def predict(texts):
        x = preprocess(tf.constant(texts))
        return backbone.predict_on_batch(x)["pooled_output"]

    first, out = _warm(predict, args)
    ts._say("ready", load_seconds=load_seconds, first_call_seconds=first,  # pylint: disable=protected-access
            hidden=int(out.shape[1]), modules=[])
    _serve_requests(predict, args)


# ------------------------------------------------------------------------------------------ the parent
def prepare(args, workdir):
    """Vocabulary, random pretrained-model directory and its export under workdir; returns
    (export path, spm path, model config path, export bytes)."""
    sys.path.insert(0, ts.REPO)
    from albert_tf.serving.encoder import export_encoder  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    corpus = os.path.join(workdir, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        rng = random.Random(args.seed)
        f.write("\n".join(make_texts(20000, args.seed)) + "\n")
        f.write("\n".join(" ".join(rng.choice(sum(_WORDS.values(), [])) + str(i) for i in range(12))
                          for _ in range(2000)) + "\n")  # enough distinct strings for a few thousand pieces
    spm = train_vocab(corpus, os.path.join(workdir, "spm"), vocab_size=args.vocab_size)["model"]
    config = AlbertConfig.from_json_file(args.config).to_dict()
    config["vocab_size"] = AlbertTokenizer(spm).vocab_size
    model_config = os.path.join(workdir, "model_config.json")
    with open(model_config, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    model_dir = os.path.join(workdir, "model")
    if not os.path.exists(model_dir):
        AlbertPretrainer(AlbertConfig.from_dict(config)).save_pretrained(model_dir, spm_model=spm)
    path = export_encoder(model_dir, os.path.join(workdir, "export"), version=1, seq_length=args.seq_length,
                                 overwrite=True, warmup=False)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names)
    return path, spm, model_config, size


class _Worker(ts.Worker):
    """train_step's worker protocol, running this script."""

    def __init__(self, name, python, argv, verbose):  # pylint: disable=super-init-not-called
        self.name = name
        self.log = None if verbose else tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        env.pop("PYTHONPATH", None)  # the workers import only their own stack
        self.process = subprocess.Popen([python, os.path.abspath(__file__), *argv, "--_worker", name], cwd=HERE,
                                        env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log)
        self.ready = self._read("ready")

    def command(self, verb, count):
        self.process.stdin.write(f"{verb} {count}\n")
        self.process.stdin.flush()
        return self._read("result")


def _start_peers(args, peer_configs, argv):
    """{"peer:CONFIG": worker} for the configurations that start (the others are reported and skipped)."""
    started = {}
    for c in peer_configs:
        try:
            started[f"peer:{c}"] = _Worker(f"peer:{c}", args.peer_python, argv, args.verbose)
        except RuntimeError as e:
            print(f"keras-hub {c}: failed to start: {e}", flush=True)
    return started


def main(args):  # noqa: C901
    peer_configs = [c.strip() for c in args.peer_configs.split(",") if c.strip()]
    for c in peer_configs:
        if c not in ts.PEER_CONFIGS:
            raise SystemExit(f"--peer-configs: unknown configuration '{c}' (expected some of {ts.PEER_CONFIGS})")
    if not args.peer_python or subprocess.run([args.peer_python, "-c", "import keras_hub"],
                                              capture_output=True, check=False).returncode:
        print(f"keras-hub peer not measured: {args.peer_python} missing or without keras_hub", flush=True)
        peer_configs = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        path, spm, model_config, size = prepare(args, workdir)
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} load average {ts._load_average():.2f}; "  # pylint: disable=protected-access
              f"seq {args.seq_length}, batch {args.batch_size} x {args.batches} and {args.singles} batch-1 requests "
              f"x {args.rounds} rounds; export {path}: {size / 2**20:.1f} MiB", flush=True)
        argv = ["--seq-length", str(args.seq_length), "--batch-size", str(args.batch_size), "--seed", str(args.seed),
                "--_export", path, "--_spm", spm, "--_model_config", model_config]
        workers = {}
        try:
            workers["ours"] = _Worker("ours", sys.executable, argv, args.verbose)
            if workers["ours"].ready["modules"]:
                raise SystemExit(f"ours imported {workers['ours'].ready['modules']}")
            workers.update(_start_peers(args, peer_configs, argv))
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
                print(f"round {r + 1}/{args.rounds} (load {ts._load_average():.2f}): " + " ".join(line),  # pylint: disable=protected-access
                      flush=True)
        finally:
            for w in workers.values():
                w.close()
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
        print(f"{ours_text} keras_hub_examples_per_sec={peer_rate:.3f} ratio={ours_rate / peer_rate:.3f} "
              f"keras_hub_p50_ms={peer_p50:.2f} latency_ratio={peer_p50 / ours_p50:.3f} "
              f"keras_hub_config={fastest.split(':', 1)[1]} keras_hub_latency_config={quickest.split(':', 1)[1]}",
              flush=True)
    else:
        print(f"{ours_text} keras_hub_examples_per_sec=nan ratio=nan keras_hub_config=none", flush=True)
    return 0


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._worker == "ours":  # pylint: disable=protected-access
        _worker_ours(parsed)
    elif parsed._worker:  # pylint: disable=protected-access
        _worker_peer(parsed, parsed._worker.split(":", 1)[1])  # pylint: disable=protected-access
    else:
        sys.exit(main(parsed))
