"""The original's fine-tuning optimizer against Keras AdamW: the same runs with each, over several seeds.

    python benchmarks/finetune_optimizers.py [--seeds 5] [--learning-rate 1e-3] [--epochs 4] [--init MODEL_DIR]

Task: the quickstart's (`albert_tf.builtin_corpus.write_document_task`: does a docstring sentence of the standard
library come from a module about files and archives or about networking and mail; 970 train / 242 dev real
sentences, balanced), with a 2000-piece vocabulary trained on the quickstart's corpus and the tiny config, fine-tuned
as the quickstart does (batch 16, seq 64, lr 1e-3, 4 epochs, warm-up 10 % then linear decay, dense-norm clip 1.0,
weight decay 0.01 outside LayerNorm and biases, no dropout). For each seed both optimizers start from the same
weights (a random init drawn from the seed, or `--init`'s encoder) and see the same batches; only the update rule
differs:

  adamw-original  AdamWeightDecay, the original's (no bias correction)
  adamw-keras     keras.optimizers.AdamW (bias-corrected)

Prints one line per run and a table: dev accuracy and the last epoch's training loss, mean ± std over seeds, and
the paired difference (original − keras). Last line: `original_accuracy=... keras_accuracy=... ...`.
"""
import argparse
import csv
import os
import tempfile

import common


def _parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--init", default=None, help="a pretrained-model directory whose encoder every run starts from "
                   "(its spm.model tokenizes the task); default: a random init of the tiny config per seed")
    p.add_argument("--work-dir", default=None, help="where the corpus, task and vocabulary go (default: a temp dir)")
    return p.parse_args()


def read_task(directory):
    """{"train": (texts, labels), "dev": ...} from SST-2's layout (sentence<TAB>label with a header)."""
    task = {}
    for split in ("train", "dev"):
        with open(os.path.join(directory, f"{split}.tsv"), encoding="utf-8") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
        task[split] = ([r[0] for r in rows], [int(r[1]) for r in rows])
    return task


def main():
    args = _parse_args()
    from albert_tf import AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.data.builtin_corpus import write_builtin_corpus, write_document_task  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_optimizers_")
    os.makedirs(work, exist_ok=True)
    print(f"finetune_optimizers: load average {common.load_average():.2f} at start; work dir {work}", flush=True)
    sizes = write_document_task(os.path.join(work, "task"), seed=12345)
    task = read_task(os.path.join(work, "task"))
    if args.init:
        config, spm = pretrained.read_config(args.init), os.path.join(args.init, "spm.model")
    else:
        corpus = os.path.join(work, "corpus.txt")
        write_builtin_corpus(corpus)
        spm = train_vocab(corpus, os.path.join(work, "spm"), vocab_size=2000).model
        config = AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
            vocab_size=AlbertTokenizer(spm).vocab_size)
    tokenizer = AlbertTokenizer(spm)
    print(f"task: {sizes['train']} train / {sizes['dev']} dev sentences; init: {args.init or 'random, per seed'}",
          flush=True)
    tuners = {name: common.FineTuner(config, tokenizer, task, 64, args.epochs, args.batch_size,
                                     args.learning_rate, name) for name in ("adamw-original", "adamw-keras")}
    fixed = AlbertEncoder.from_pretrained(args.init).get_weights() if args.init else None
    results = {name: {"accuracy": [], "loss": []} for name in tuners}
    for seed in range(args.seeds):
        weights = fixed or tuners["adamw-original"].random_encoder_weights(seed)
        for name, tuner in tuners.items():
            accuracy, loss, seconds = tuner.run(weights, seed)
            results[name]["accuracy"].append(accuracy)
            results[name]["loss"].append(loss)
            print(f"seed {seed} {name}: dev accuracy {accuracy:.4f}, last-epoch loss {loss:.4f} ({seconds:.0f}s)",
                  flush=True)
    report(results, args)


def report(results, args):
    """The markdown table and the last line."""
    original, keras_ = results["adamw-original"], results["adamw-keras"]
    print(f"\nquickstart task, tiny config, {args.epochs} epochs at batch {args.batch_size}, lr "
          f"{args.learning_rate:g}, {args.seeds} seeds")
    print("| optimizer | dev accuracy | last-epoch training loss | per-seed accuracy |\n|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {common.summary(r['accuracy'])[2]} | {common.summary(r['loss'])[2]} | "
              f"{' '.join(f'{v:.3f}' for v in r['accuracy'])} |")
    differences = {key: [a - b for a, b in zip(original[key], keras_[key])] for key in ("accuracy", "loss")}
    print(f"| original − keras (paired) | {common.summary(differences['accuracy'])[2]} | "
          f"{common.summary(differences['loss'])[2]} | |")
    print(f"load average {common.load_average():.2f} at the end")
    print(" ".join(f"{label}_{key}={common.summary(r[key])[0]:.4f}" for label, r in
                   (("original", original), ("keras", keras_)) for key in ("accuracy", "loss")), flush=True)


if __name__ == "__main__":
    main()
