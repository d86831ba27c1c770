"""What the benchmarks share: the keras-hub peer, the worker protocol, child processes, the generated inputs.

Every benchmark is a program run from the repository root as `python benchmarks/NAME.py`; Python puts the
script's folder on the path, so they `import common` as any module. This module imports only the standard
library at the top (a peer's interpreter, which has no albert_tf, imports it too); numpy, TensorFlow and albert_tf
are imported inside the functions that need them.

The benchmarks measure this checkout's albert_tf, whatever else is installed: its root goes first on this
process's path (below), and `child_env` passes it on to child processes.

Workers (train_step, finetune_step, serving): each side runs in its own process, `SCRIPT ARGS --_worker NAME`,
built and compiled first and then idle while the other sides are timed. The parent sends lines `VERB N` on the
worker's stdin; the worker answers each with one line `MARK {"kind": "result", ...}` on stdout (`ready` once
first); anything else it prints is noise. Rounds alternate between the sides, and every figure is the best and
the median over rounds, because a shared machine's speed drifts within minutes.

One-shot children (long_requests, create_data): `SCRIPT --child NAME ARGS...` runs the module's function NAME in a
fresh process and prints its result as the last line.
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

DEFAULT_PEER_PYTHON = "/work/venv-khub/bin/python"
PEER_CONFIGS = ("float32", "mixed_bfloat16", "float32+xla", "mixed_bfloat16+xla")
PEER_SETUP = ("python3 -m venv /work/venv-khub && /work/venv-khub/bin/pip install 'tensorflow==2.21.*' "
              "'keras-hub==0.32.*'")
MARK = "@@bench "  # worker → parent protocol lines on stdout; everything else is noise
CHILD_FLAG = "--child"


# ------------------------------------------------------------------------------------------ the keras-hub peer
def add_peer_arguments(parser, configs=True):
    """--peer-python (default DEFAULT_PEER_PYTHON where it exists) and, with `configs`, --peer-configs."""
    parser.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON if os.path.exists(DEFAULT_PEER_PYTHON) else None,
                        help=f"interpreter with keras-hub 0.32 (default {DEFAULT_PEER_PYTHON} if present)")
    if configs:
        parser.add_argument("--peer-configs", default=",".join(PEER_CONFIGS),
                            help=f"comma-separated peer configurations among {', '.join(PEER_CONFIGS)} "
                                 "(default: all)")


def peer_configs(args):
    """The configurations of --peer-configs to measure: [] (with a printed reason) when the peer's interpreter is
    missing or cannot import keras_hub; an unknown configuration is a usage error."""
    configs = [c.strip() for c in getattr(args, "peer_configs", PEER_CONFIGS[0]).split(",") if c.strip()]
    for c in configs:
        if c not in PEER_CONFIGS:
            raise SystemExit(f"--peer-configs: unknown configuration '{c}' (expected some of {PEER_CONFIGS})")
    problem = None
    if not args.peer_python:
        problem = f"no --peer-python and {DEFAULT_PEER_PYTHON} does not exist"
    elif not os.path.exists(args.peer_python):
        problem = f"--peer-python {args.peer_python} does not exist"
    elif subprocess.run([args.peer_python, "-c", "import keras_hub"], capture_output=True, check=False).returncode:
        problem = f"{args.peer_python} cannot import keras_hub"
    if problem:
        print(f"keras-hub peer not measured: {problem}. Create it with: {PEER_SETUP}", flush=True)
        return []
    return configs


def load_config_dict(path):
    """An albert_config.json as a plain dict (the peer's interpreter has no albert_tf)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def keras_hub_backbone(keras_hub, c):
    """keras-hub's AlbertBackbone with the sizes of albert_config.json dict `c` (every benchmark's peer)."""
    return keras_hub.models.AlbertBackbone(
        vocabulary_size=c["vocab_size"], num_layers=c["num_hidden_layers"], num_heads=c["num_attention_heads"],
        embedding_dim=c["embedding_size"], hidden_dim=c["hidden_size"], intermediate_dim=c["intermediate_size"],
        num_groups=c["num_hidden_groups"], num_inner_repetitions=c.get("inner_group_num", 1),
        dropout=c["hidden_dropout_prob"], max_sequence_length=c["max_position_embeddings"],
        num_segments=c["type_vocab_size"])


# ------------------------------------------------------------------------------------------ worker protocol
def say(kind, **fields):
    """One protocol line to the parent."""
    print(MARK + json.dumps({"kind": kind, **fields}), flush=True)


def timed(run):
    """A `serve` handler that times run(N) (wall and process CPU seconds, beside the dict run returns)."""

    def handler(count):
        start, cpu_start = time.perf_counter(), time.process_time()
        extra = run(count) or {}
        return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu_start, **extra}

    return handler


def serve(handlers):
    """The worker loop: each stdin line `VERB N` is answered with say("result", **handlers[VERB](N)); a line
    `quit`, an empty line or the end of stdin ends it."""
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            return
        say("result", **handlers[command[0]](int(command[1])))


def child_env(checkout=True, xla_flags=""):
    """The environment of a child process: TensorFlow's C++ log quieted (TF_CPP_MIN_LOG_LEVEL 2 unless set);
    this checkout first on PYTHONPATH (`checkout`) or no PYTHONPATH at all (a child that must import only its
    own stack); `xla_flags` appended to XLA_FLAGS."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    else:
        env.pop("PYTHONPATH", None)
    if xla_flags:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {xla_flags}".strip()
    return env


class Worker:
    """A worker process (`python SCRIPT ARGV --_worker NAME`) speaking the MARK protocol; `ready` holds the
    fields of its ready line."""

    def __init__(self, name, python, script, argv, verbose=False, env=None, cwd=REPO):
        self.name = name
        self.log = None if verbose else tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [python, os.path.abspath(script), *argv, "--_worker", name], cwd=cwd,
            env=child_env() if env is None else env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log)
        self.ready = self._read("ready")

    def _read(self, kind):
        for line in self.process.stdout:
            if line.startswith(MARK):
                message = json.loads(line[len(MARK):])
                if message["kind"] == kind:
                    return message
        tail = ""
        if self.log is not None:
            self.log.seek(0)
            tail = "".join(self.log.readlines()[-15:])
        raise RuntimeError(f"worker {self.name} exited (status {self.process.wait()}) before '{kind}':\n{tail}")

    def command(self, verb, count):
        """Sends `VERB COUNT`; returns the result's fields."""
        self.process.stdin.write(f"{verb} {count}\n")
        self.process.stdin.flush()
        return self._read("result")

    def run(self, count):
        return self.command("run", count)

    def close(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def start_peers(name_to_args):
    """{name: Worker} for the peer workers that start: name_to_args maps "peer:CONFIG" to Worker's arguments
    after the name; one that fails is reported and skipped."""
    started = {}
    for name, worker_args in name_to_args.items():
        try:
            started[name] = Worker(name, *worker_args)
        except RuntimeError as e:
            print(f"keras-hub {name.split(':', 1)[1]}: failed to start: {e}", flush=True)
    return started


def fastest_peer(rates):
    """(configuration, best, median) of the peer worker ("peer:CONFIG" in rates: {name: per-round rates}) whose
    best round is the fastest; None without peers."""
    peers = {name: values for name, values in rates.items() if name.startswith("peer:")}
    if not peers:
        return None
    name = max(peers, key=lambda n: max(peers[n]))
    return name.split(":", 1)[1], max(peers[name]), statistics.median(peers[name])


def close_all(workers):
    for worker in workers.values():
        worker.close()


# ------------------------------------------------------------------------------------------ one-shot children
def child_command(python, script, name, *args):
    """The command that runs function NAME of SCRIPT in a fresh process (see `run_child_if_asked`)."""
    return [python, os.path.abspath(script), CHILD_FLAG, name, *map(str, args)]


def run_child_if_asked(children):
    """When this process was started as `SCRIPT --child NAME ARGS...`, runs children[NAME](ARGS) and exits."""
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        sys.exit(children[sys.argv[2]](sys.argv[3:]) or 0)


# ------------------------------------------------------------------------------------------ reporting
def cpu_model():
    """This machine's CPU model as /proc/cpuinfo names it (else platform's processor or machine)."""
    import platform  # pylint: disable=import-outside-toplevel

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                        platform.processor() or platform.machine())
    except OSError:
        return platform.processor() or platform.machine()


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def now():
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


# ------------------------------------------------------------------------------------------ generated inputs
def random_batch(vocab_size, batch_size, seq_length, max_predictions, seed):
    """A random pretraining batch that is valid for both models.

    Returns a dict of numpy arrays: input_word_ids, input_mask, input_type_ids int32 [B, L] (no padding:
    [CLS] A [SEP] B [SEP] with the split drawn per row), masked_lm_positions / masked_lm_ids int32 [B, P] (sorted
    distinct positions, never [CLS]/[SEP]; ids are the original tokens, the inputs hold [MASK] there),
    masked_lm_weights float32 [B, P] (ones), sentence_order_labels int32 [B].
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    cls_id, sep_id, mask_id = 2, 3, 4
    rng = np.random.default_rng(seed)
    B, L, P = batch_size, seq_length, max_predictions
    ids = rng.integers(5, vocab_size, (B, L)).astype("int32")
    types = np.zeros((B, L), "int32")
    positions = np.zeros((B, P), "int32")
    for row in range(B):
        split = int(rng.integers(L // 4, 3 * L // 4))
        ids[row, 0], ids[row, split], ids[row, L - 1] = cls_id, sep_id, sep_id
        types[row, split + 1:] = 1
        candidates = np.setdiff1d(np.arange(1, L - 1), [split])
        positions[row] = np.sort(rng.choice(candidates, P, replace=False))
    labels = np.take_along_axis(ids, positions, axis=1)
    np.put_along_axis(ids, positions, mask_id, axis=1)
    return {
        "input_word_ids": ids, "input_mask": np.ones((B, L), "int32"), "input_type_ids": types,
        "masked_lm_positions": positions, "masked_lm_ids": labels.astype("int32"),
        "masked_lm_weights": np.ones((B, P), "float32"), "sentence_order_labels": rng.integers(0, 2, B).astype("int32"),
    }


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


def prepare_export(workdir, config_path, seq_length, vocab_size, seed, dtype="float32"):
    """What the serving benchmarks serve, under workdir: a SentencePiece vocabulary of `vocab_size` pieces
    trained on generated text, a pretrained-model directory of random weights with config_path's sizes (its
    vocab_size replaced by the vocabulary's) and its `albert-tf export --dtype DTYPE` at `seq_length` without
    warm-up records. Returns (export path, spm path, model config path, export bytes)."""
    from albert_tf.serving.encoder_export import export_encoder  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    corpus = os.path.join(workdir, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        rng = random.Random(seed)
        f.write("\n".join(make_texts(20000, seed)) + "\n")
        f.write("\n".join(" ".join(rng.choice(sum(_WORDS.values(), [])) + str(i) for i in range(12))
                          for _ in range(2000)) + "\n")  # enough distinct strings for a few thousand pieces
    spm = train_vocab(corpus, os.path.join(workdir, "spm"), vocab_size=vocab_size).model
    config = AlbertConfig.from_json_file(config_path).to_dict()
    config["vocab_size"] = AlbertTokenizer(spm).vocab_size
    model_config = os.path.join(workdir, "model_config.json")
    with open(model_config, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    model_dir = os.path.join(workdir, "model")
    if not os.path.exists(model_dir):
        AlbertPretrainer(AlbertConfig.from_dict(config)).save_pretrained(model_dir, spm_model=spm)
    path = export_encoder(model_dir, os.path.join(workdir, "export"), version=1, seq_length=seq_length,
                          overwrite=True, warmup=False, dtype=dtype)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names)
    return path, spm, model_config, size


def export_by_checkout(checkout, model_dir, output_base, seq_length):
    """`albert-tf export` of model_dir by another checkout's albert_tf (e.g. the previous main, for a before/after
    in one run), without warm-up records, to output_base/1. Returns that path."""
    env = dict(child_env(checkout=False), PYTHONPATH=os.path.abspath(checkout))
    subprocess.run([sys.executable, "-m", "albert_tf", "export", "--model", model_dir, "--output", output_base,
                    "--version", "1", "--overwrite", "--no-warmup", "--max-seq-length", str(seq_length)],
                   env=env, cwd=checkout, check=True)
    return os.path.join(output_base, "1")


# ------------------------------------------------------------------------------------------ fine-tuning runs
class FineTuner:
    """One classifier (AlbertClassifier on the pooled output, no dropout) and its optimizer, compiled once and
    reset before each run, so that every run reuses one traced train step (tracing costs more than fine-tuning
    a small model on a few hundred examples).

    A run: the encoder's weights set (pretrained, or a random init), the head drawn from the run's seed, the
    optimizer's slots and step zeroed; then `epochs` passes over the training examples in a seeded order at
    `batch_size` (whole batches, each cut to its longest example), with `optimizer` (albert_tf.training.optimizers.make_optimizer's name) on a
    linear warm-up (10 % of the steps) and linear decay from `learning_rate`.

    Args:
      config: the AlbertConfig; tokenizer: an AlbertTokenizer; task: {"train": (texts, labels), "dev": ...}
      (single texts, int labels in [0, num_classes)); seq_length: packed length.
    """

    def __init__(self, config, tokenizer, task, seq_length, epochs, batch_size, learning_rate, optimizer,
                 num_classes=2):
        import keras  # pylint: disable=import-outside-toplevel
        import numpy as np  # pylint: disable=import-outside-toplevel

        from albert_tf import AlbertClassifier  # pylint: disable=import-outside-toplevel
        from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
        from albert_tf.training.optimizers import make_optimizer  # pylint: disable=import-outside-toplevel
        from albert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel

        self.config, self.epochs, self.batch_size = config, epochs, batch_size
        self.x_train = tokenizer.pack(task["train"][0], seq_length=seq_length)
        self.y_train = np.asarray(task["train"][1], np.int32)
        self.x_dev = tokenizer.pack(task["dev"][0], seq_length=seq_length)
        self.y_dev = np.asarray(task["dev"][1])
        self.batches = len(self.y_train) // batch_size
        steps = epochs * self.batches
        self.model = AlbertClassifier(AlbertEncoder(config), num_classes, dropout=0.0)
        schedule = WarmupPolynomialDecay(learning_rate, steps, int(0.1 * steps))
        self.optimizer = make_optimizer(optimizer, schedule, self.model.trainable_variables)
        self.model.compile(optimizer=self.optimizer,
                           loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def random_encoder_weights(self, seed):
        """The weights of a fresh AlbertEncoder of the config, drawn from `seed`."""
        import keras  # pylint: disable=import-outside-toplevel

        from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

        keras.utils.set_random_seed(seed)
        return AlbertEncoder(self.config).get_weights()

    def run(self, encoder_weights, seed):
        """Fine-tunes from `encoder_weights` with `seed` (head init, data order). Returns (dev accuracy, the last
        epoch's mean training loss, seconds)."""
        import keras  # pylint: disable=import-outside-toplevel
        import numpy as np  # pylint: disable=import-outside-toplevel

        started = time.monotonic()
        self.model.encoder.set_weights(encoder_weights)
        head = self.model.get_layer("classifier")
        init = keras.initializers.TruncatedNormal(stddev=self.config.initializer_range, seed=seed)
        head.kernel.assign(init(head.kernel.shape))
        head.bias.assign(np.zeros(head.bias.shape, "float32"))
        for variable in self.optimizer.variables:
            variable.assign(np.zeros(variable.shape, variable.dtype))
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        from albert_tf.tasks.pipelines import array_dataset  # pylint: disable=import-outside-toplevel

        rng = np.random.default_rng(seed)
        loss = float("nan")
        for _ in range(self.epochs):  # each batch cut to its longest example (rounded up to 16), as finetune does
            order = rng.permutation(len(self.y_train))[: self.batches * self.batch_size]
            batches = array_dataset(self.x_train, self.y_train, order, self.batch_size, 16).apply(
                tf.data.experimental.assert_cardinality(self.batches))
            history = self.model.fit(batches, epochs=1, shuffle=False, verbose=0)
            loss = float(history.history["loss"][-1])
        logits = self.model.predict(self.x_dev, batch_size=256, verbose=0)
        accuracy = float((np.asarray(logits).argmax(-1) == self.y_dev).mean())
        return accuracy, loss, time.monotonic() - started


def random_init(directory, config, spm, seed):
    """A pretrained-model directory holding a random init of `config` drawn from `seed` (kept: a directory that
    holds one already is returned as it is)."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf import AlbertPretrainer  # pylint: disable=import-outside-toplevel

    if not os.path.exists(os.path.join(directory, "albert_config.json")):
        keras.utils.set_random_seed(seed)
        AlbertPretrainer(config).save_pretrained(directory, spm_model=spm)
    return directory


def summary(values):
    """(mean, sample std, "mean ± std" with 3 decimals) of a list of floats (std 0 for one value)."""
    mean = statistics.mean(values)
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return mean, spread, f"{mean:.3f} ± {spread:.3f}"
