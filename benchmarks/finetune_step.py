"""Fine-tuning step throughput on this CPU: albert_tf's AlbertClassifier.fit step vs keras-hub 0.32's
AlbertTextClassifier.fit step (sequence classification, 2 classes).

    python benchmarks/finetune_step.py --config configs/albert_base.json --seq-length 128 --batch-size 32

Each side runs in its own worker process (built and compiled first, then idle while the others are timed),
alternating round by round, `--rounds` times (the worker protocol of benchmarks/common.py):

  ours   AlbertClassifier(AlbertEncoder(config), 2) compiled as `albert-tf finetune` compiles it (AdamW with LayerNorm
         and biases excluded from decay, linear warm-up/decay, clip-norm 1.0, sparse CE from logits, accuracy),
         `train_on_batch` (the compiled `fit` step) in `--dtype` (default float32) with `--xla`.
  peer   keras-hub 0.32 AlbertTextClassifier with the same backbone sizes and preprocessor=None, its default
         compile (Adam 5e-5, sparse CE from logits, accuracy), `train_on_batch`, in every configuration of
         `--peer-configs`; the fastest is the figure. Runs under `--peer-python` (/work/venv-khub).

Both get the same random batch ([CLS] A [SEP] B [SEP], no padding, random labels): every example fills the whole
sequence, so each side does the full arithmetic of a seq-128 step.

`--text PATH --spm-model M` instead measures real sentence lengths, as `albert-tf finetune` trains on them: the
sentences of PATH (a text file, or every *.txt under a directory; one example each) tokenized and packed to
`--seq-length` by `AlbertTokenizer` (M's vocabulary: only the lengths matter), shuffled with `--seed`, into
`--steps` batches that every round repeats.
Ours gets each batch as finetune's input pipeline gives it: padded only to its longest example rounded up to
`--length-bucket` (`albert_tf.modeling.base.trim_padding`, finetune's default 16); keras-hub gets the same ids
padded to `--seq-length`, as its preprocessor (`MultiSegmentPacker`) always pads. Warm-up covers every batch once.
E.g. the sentences of the Python documentation (`apt-get install python3-doc`), with a vocabulary trained on it:

    albert-tf vocab --input "/usr/share/doc/python3.11/html/_sources/*.txt,/usr/share/doc/python3.11/html/_sources/*/*.txt" \
        --output-prefix pydocs8k --vocab-size 8000
    python benchmarks/finetune_step.py --config configs/albert_base.json --seq-length 128 --batch-size 32 \
        --text /usr/share/doc/python3.11/html/_sources --spm-model pydocs8k.model

The last line: steps_per_sec=X keras_hub_steps_per_sec=Y ratio=X/Y (best rounds), then the medians.
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
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=3, help="timed steps per round and side (default 3)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="ours: compute dtype")
    p.add_argument("--xla", choices=("on", "off"), default="off", help="ours: compile the step with XLA")
    common.add_peer_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--text", default=None, help="file or directory of text: its sentences' lengths (see above)")
    p.add_argument("--spm-model", default=None, help="SentencePiece model that tokenizes --text")
    p.add_argument("--length-bucket", type=int, default=16, help="ours, with --text: finetune's --length-bucket")
    p.add_argument("--_batches", default=None, help=argparse.SUPPRESS)  # .npz the parent wrote for --text
    p.add_argument("--max-predictions", type=int, default=1, help=argparse.SUPPRESS)  # random_batch's argument
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _batch(args, vocab_size):
    import numpy as np  # pylint: disable=import-outside-toplevel

    b = common.random_batch(vocab_size, args.batch_size, args.seq_length, 1, args.seed)
    labels = np.random.default_rng(args.seed).integers(0, 2, args.batch_size).astype("int32")
    return b, labels


def _sentences(path):
    """The sentences of a text file, or of every *.txt file under a directory (sorted): paragraphs (blank-line
    separated, reStructuredText directives and indented blocks skipped) joined and split after . ! ?; those of
    3 words or more."""
    import glob  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel

    files = sorted(glob.glob(os.path.join(path, "**", "*.txt"), recursive=True)) if os.path.isdir(path) else [path]
    sentences = []
    for name in files:
        with open(name, encoding="utf-8", errors="replace") as f:
            paragraphs = re.split(r"\n\s*\n", f.read())
        for paragraph in paragraphs:
            lines = [line for line in paragraph.splitlines() if line.strip() and not line.startswith((" ", ".."))]
            text = " ".join(line.strip() for line in lines)
            sentences += [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 3]
    return sentences


def _text_batches(args, path):
    """--text: `--steps` batches of packed lines (ids, mask, types [steps, B, L]) and labels, saved to `path`.
    Returns the mean packed length and the mean longest-per-batch length rounded up to --length-bucket."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    lines = _sentences(args.text)
    need = args.steps * args.batch_size
    if len(lines) < need:
        raise SystemExit(f"--text {args.text}: {len(lines)} non-blank lines, need {need} (--steps x --batch-size)")
    rng = np.random.default_rng(args.seed)
    chosen = [lines[i] for i in rng.permutation(len(lines))[:need]]
    tokenizer = AlbertTokenizer(args.spm_model)
    vocab_size = common.load_config_dict(args.config)["vocab_size"]
    if tokenizer.vocab_size > vocab_size:
        raise SystemExit(f"--spm-model {args.spm_model}: {tokenizer.vocab_size} pieces, more than --config's "
                         f"vocab_size {vocab_size}")
    packed = tokenizer.pack(chosen, None, seq_length=args.seq_length)
    arrays = {k: np.asarray(v, "int32").reshape(args.steps, args.batch_size, args.seq_length)
              for k, v in packed.items() if k in ("input_word_ids", "input_mask", "input_type_ids")}
    arrays["labels"] = rng.integers(0, 2, (args.steps, args.batch_size)).astype("int32")
    np.savez(path, **arrays)
    lengths = arrays["input_mask"].sum(-1)
    bucketed = np.minimum(args.seq_length, -(-lengths.max(-1) // args.length_bucket) * args.length_bucket)
    return float(lengths.mean()), float(bucketed.mean())


def _load_text_batches(args, trim):
    """[(x, y)] from the parent's .npz; x trimmed by trim_padding when `trim` (ours)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    data = np.load(args._batches)  # pylint: disable=protected-access
    batches = []
    for step in range(data["labels"].shape[0]):
        x = {k: data[k][step] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        if trim:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            from albert_tf.modeling.base import trim_padding  # pylint: disable=import-outside-toplevel

            x = {k: v.numpy() for k, v in trim_padding({k: tf.constant(v) for k, v in x.items()},
                                                       args.length_bucket).items()}
        batches.append((x, data["labels"][step]))
    return batches


def _worker_ours(args):
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf import AlbertClassifier  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks import budget as budgets  # pylint: disable=import-outside-toplevel
    from albert_tf.training import finetuning  # pylint: disable=import-outside-toplevel

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(args.seed)
    model = AlbertClassifier(AlbertEncoder(args.config), 2)
    budget = budgets.Budget(learning_rate=2e-5, batch_size=args.batch_size, max_seq_length=args.seq_length,
                             epochs=1, steps_per_epoch=10000, warmup_steps=100, albert_dropout=0.0,
                             classifier_dropout=0.1)
    model.compile(optimizer=finetuning.create_optimizer(budget, model),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=args.xla == "on")
    if args._batches:  # pylint: disable=protected-access
        _serve_model(model, _load_text_batches(args, trim=True), args)
        return
    b, y = _batch(args, model.encoder.config.vocab_size)
    x = {k: b[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    _serve_model(model, [(x, y)], args)


def _worker_peer(args, peer_config):
    dtype, _, xla = peer_config.partition("+")
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel

    c = common.load_config_dict(args.config)
    keras.mixed_precision.set_global_policy(dtype)
    keras.utils.set_random_seed(args.seed)
    backbone = common.keras_hub_backbone(keras_hub, c)
    model = keras_hub.models.AlbertTextClassifier(backbone, num_classes=2, preprocessor=None)
    model.compile(jit_compile=bool(xla))
    names = {"input_word_ids": "token_ids", "input_mask": "padding_mask", "input_type_ids": "segment_ids"}
    if args._batches:  # pylint: disable=protected-access
        batches = [({names[k]: v for k, v in x.items()}, y) for x, y in _load_text_batches(args, trim=False)]
    else:
        b, y = _batch(args, c["vocab_size"])
        batches = [({names[k]: b[k] for k in names}, y)]
    _serve_model(model, batches, args)


def _serve_model(model, batches, args):
    """batches: [(x, y)], cycled through: step i trains on batches[i % len(batches)]."""
    position = [0]

    def run(num_steps):
        for _ in range(num_steps):
            x, y = batches[position[0] % len(batches)]
            position[0] += 1
            logs = model.train_on_batch(x, y, return_dict=True)
        return {"loss": float(logs["loss"])}

    start = time.perf_counter()
    first = run(1)
    compile_seconds = time.perf_counter() - start
    run(max(args.warmup_steps, len(batches)))  # every batch (each of ours' lengths) once before timing
    position[0] = 0
    common.say("ready", compile_seconds=compile_seconds, first_loss=first["loss"], params=int(model.count_params()))
    common.serve({"run": common.timed(run)})


def main(args):
    argv = ["--config", os.path.abspath(args.config), "--seq-length", str(args.seq_length), "--batch-size",
            str(args.batch_size), "--warmup-steps", str(args.warmup_steps), "--seed", str(args.seed),
            "--dtype", args.dtype, "--xla", args.xla, "--steps", str(args.steps),
            "--length-bucket", str(args.length_bucket)]
    if args.text:
        if not args.spm_model:
            raise SystemExit("--text needs --spm-model (the vocabulary that tokenizes it)")
        batches_file = os.path.join(tempfile.mkdtemp(prefix="finetune_step_"), "batches.npz")
        mean_length, mean_bucketed = _text_batches(args, batches_file)
        argv += ["--_batches", batches_file]
        print(f"--text {args.text}: mean packed length {mean_length:.1f} tokens; ours' batches at a mean "
              f"{mean_bucketed:.1f} positions (longest per batch, rounded up to {args.length_bucket}); keras-hub's at "
              f"{args.seq_length}", flush=True)
    peer_configs = common.peer_configs(args)
    workers = {}
    try:
        workers["ours"] = common.Worker("ours", sys.executable, __file__, argv, args.verbose)
        workers.update(common.start_peers({f"peer:{c}": (args.peer_python, __file__, argv, args.verbose)
                                           for c in peer_configs}))
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
        common.close_all(workers)
    ours_best, ours_median = max(rates["ours"]), statistics.median(rates["ours"])
    peer = common.fastest_peer(rates)
    if peer:
        peer_config, peer_best, peer_median = peer
        tail = (f"keras_hub_steps_per_sec={peer_best:.3f} ratio={ours_best / peer_best:.3f} "
                f"median_steps_per_sec={ours_median:.3f} keras_hub_median_steps_per_sec={peer_median:.3f} "
                f"median_ratio={ours_median / peer_median:.3f} keras_hub_config={peer_config}")
    else:
        tail = f"keras_hub_steps_per_sec=nan ratio=nan median_steps_per_sec={ours_median:.3f} keras_hub_config=none"
    print(f"steps_per_sec={ours_best:.3f} {tail} config={args.dtype}{'+xla' if args.xla == 'on' else ''}",
          flush=True)
    return 0


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._worker == "ours":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        _worker_ours(parsed)
    elif parsed._worker:
        _worker_peer(parsed, parsed._worker.split(":", 1)[1])
    else:
        sys.exit(main(parsed))
