"""Fine-tuning in float32 and under mixed bfloat16: the same runs of `albert_tf.finetune` with each `--dtype`, over
several seeds; dev accuracy (computed in float32, as the export serves) and wall time per run.

    python benchmarks/finetune_dtype.py [--seeds 5] [--epochs 4] [--learning-rate 1e-3] [--work-dir DIR]

Task: the quickstart's (`albert_tf.builtin_corpus.write_document_task`: does a docstring sentence of the standard
library come from a module about files and archives or about networking and mail; 970 train / 242 dev real
sentences), a 2000-piece vocabulary trained on the quickstart's corpus, the tiny config. Each seed draws one random
init, and both dtypes fine-tune it with the same flags (the quickstart's: batch 16, seq 64, lr 1e-3, Keras AdamW, no
classifier dropout) and the same seed (head init, data order, dropout); the order of the two runs alternates by
seed, so that a change of machine load does not favour one dtype. Only the compute dtype differs.

Prints one line per run and a table: dev accuracy mean ± std over seeds, each seed's, the paired difference
(bfloat16 − float32) and the median seconds per run, with the CPU model and the load average. Last line:
`float32_accuracy=... bfloat16_accuracy=... float32_seconds=... bfloat16_seconds=...`.
"""
import argparse
import os
import statistics
import tempfile
import time

import common

DTYPES = ("float32", "bfloat16")


def _parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--work-dir", default=None, help="where the corpus, task, inits and runs go (default: a temp dir)")
    return p.parse_args()


def main():
    args = _parse_args()
    import albert_tf  # pylint: disable=import-outside-toplevel
    from albert_tf import AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel
    from albert_tf.data.builtin_corpus import write_builtin_corpus, write_document_task  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_dtype_")
    os.makedirs(work, exist_ok=True)
    print(f"finetune_dtype: {common.cpu_model()}, {os.cpu_count()} cpus, load average {common.load_average():.2f} "
          f"at start; work dir {work}", flush=True)
    sizes = write_document_task(os.path.join(work, "task"), seed=12345)
    corpus = os.path.join(work, "corpus.txt")
    write_builtin_corpus(corpus)
    spm = train_vocab(corpus, os.path.join(work, "spm"), vocab_size=2000).model
    config = AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=AlbertTokenizer(spm).vocab_size)
    print(f"task: {sizes['train']} train / {sizes['dev']} dev sentences", flush=True)
    results = {dtype: {"accuracy": [], "seconds": []} for dtype in DTYPES}
    for seed in range(args.seeds):
        init = common.random_init(os.path.join(work, f"init-{seed}"), config, spm, seed)
        for dtype in (DTYPES if seed % 2 == 0 else DTYPES[::-1]):
            started = time.perf_counter()
            result = albert_tf.finetune(albert_tf.FinetuneConfig(
                task="sst2", data_dir=os.path.join(work, "task"), init=init,
                output=os.path.join(work, f"run-{seed}-{dtype}-{time.time_ns()}"), epochs=args.epochs,
                batch_size=args.batch_size, max_seq_length=64, learning_rate=args.learning_rate,
                warmup_proportion=0.1, classifier_dropout=0.0, optimizer="adamw-keras", seed=seed, dtype=dtype))
            seconds = time.perf_counter() - started
            accuracy = result.metrics["dev"]["accuracy"]
            results[dtype]["accuracy"].append(accuracy)
            results[dtype]["seconds"].append(seconds)
            print(f"seed {seed} {dtype}: dev accuracy {accuracy:.4f} ({seconds:.0f}s, load "
                  f"{common.load_average():.2f})", flush=True)
    report(results, args)


def report(results, args):
    """The markdown table and the last line."""
    print(f"\nquickstart task, tiny config, {args.epochs} epochs at batch {args.batch_size}, lr "
          f"{args.learning_rate:g}, Keras AdamW, {args.seeds} seeds")
    print("| --dtype | dev accuracy | per seed | median seconds per run |\n|---|---|---|---|")
    for dtype, r in results.items():
        print(f"| {dtype} | {common.summary(r['accuracy'])[2]} | {' '.join(f'{v:.3f}' for v in r['accuracy'])} | "
              f"{statistics.median(r['seconds']):.0f} |")
    differences = [b - f for b, f in zip(results["bfloat16"]["accuracy"], results["float32"]["accuracy"])]
    print(f"| bfloat16 − float32 (paired) | {common.summary(differences)[2]} | "
          f"{' '.join(f'{v:+.3f}' for v in differences)} | |")
    print(f"load average {common.load_average():.2f} at the end")
    print(" ".join(f"{dtype}_{key}={statistics.mean(r[key]) if key == 'accuracy' else statistics.median(r[key]):.4f}"
                   for dtype, r in results.items() for key in ("accuracy", "seconds")), flush=True)


if __name__ == "__main__":
    main()
