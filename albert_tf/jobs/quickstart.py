"""`albert-tf quickstart`: the whole pipeline on a built-in corpus, as a check that an installation works.

The steps are the Python calls a user makes (each printed first as the command line that does the same, made from
its config by run_config.to_argv): vocab, create_data, pretrain (with the tiny config), then finetune on a
two-class task built from the same docstrings (albert_tf/data/builtin_corpus.py); last, one raw-text request is
sent through the fine-tuned export (the SavedModel's `serving_default`, loaded as TF Serving would) and its answer
printed.

    result = albert_tf.quickstart(albert_tf.QuickstartConfig(output="/tmp/albert_quickstart"))
    result.dev_accuracy, result.export
"""
import json
import os
import shlex
import sys
import time

from albert_tf import config as albert_config
from albert_tf import files, layout, run_config
from albert_tf.data import builtin_corpus
from albert_tf.data.vocab import AUTO_LARGEST
from albert_tf.jobs.create_data import create_data
from albert_tf.jobs.finetune import finetune
from albert_tf.jobs.pretrain import pretrain
from albert_tf.jobs.vocab import vocab
from albert_tf.settings import (CreateDataConfig, FinetuneConfig, PretrainConfig, QuickstartConfig, QuickstartResult,
                                VocabConfig)
from albert_tf.training import costs

# The "your own corpus" steps: albert_base at 128 tokens (create-data's and pretrain's 20 predictions), the batch
# this machine holds (at most NEXT_BATCH), the learning rate square-root scaled to it, NEXT_STEPS steps.
NEXT_CONFIG, NEXT_SEQ, NEXT_BATCH, NEXT_STEPS = "albert_base", 128, 256, 10000


# The jobs the quickstart runs, by config type: (command, call).
_STEPS = {VocabConfig: ("vocab", vocab), CreateDataConfig: ("create-data", create_data),
          PretrainConfig: ("pretrain", pretrain), FinetuneConfig: ("finetune", finetune)}


def command_line(job_config):
    """The `albert-tf ...` line that runs what `job_config` (a VocabConfig, ..., FinetuneConfig) describes."""
    name, _ = _STEPS[type(job_config)]
    return shlex.join(["albert-tf", name, *run_config.to_argv(job_config)])


def _step(job_config):
    """Runs one job in this process, printed first as its command line; returns its result."""
    name, call = _STEPS[type(job_config)]
    print(f"[quickstart] $ {command_line(job_config)}", flush=True)
    start = time.time()
    result = call(job_config)
    if result.exit_code:
        print(f"[quickstart] step 'albert-tf {name}' failed with exit code {result.exit_code}", file=sys.stderr)
    else:
        print(f"[quickstart] {name} done in {time.time() - start:.0f}s", flush=True)
    return result


def pretraining_steps(out, quickstart_config):
    """The configs of vocab, create-data and pretrain on the built-in corpus in `out` (`quickstart_config`: a
    QuickstartConfig)."""
    seq, preds = 128, 20
    corpus, spm_file = os.path.join(out, "corpus.txt"), os.path.join(out, layout.SPM_FILE)
    return [
        VocabConfig(input=corpus, output_prefix=os.path.join(out, "spm"), vocab_size=2000, overwrite=True),
        CreateDataConfig(input=corpus, spm_model=spm_file, output=os.path.join(out, "data", "train"), num_shards=2,
                         max_seq_length=seq, max_predictions=preds, dupe_factor=4, seed=quickstart_config.seed),
        PretrainConfig(config=os.path.join(out, layout.CONFIG_FILE), train_data=os.path.join(out, "data", "train-*"),
                       model_dir=os.path.join(out, "model"), spm_model=spm_file, max_seq_length=seq,
                       max_predictions=preds, batch_size=32, learning_rate=0.002,
                       num_train_steps=quickstart_config.num_train_steps,
                       num_warmup_steps=min(max(1, quickstart_config.num_train_steps // 10), quickstart_config.num_train_steps - 1),
                       steps_per_loop=25,
                       save_checkpoints_steps=100, seed=quickstart_config.seed),
    ]


def finetune_step(out, quickstart_config):
    """The finetune config of the document task in OUT/task (`quickstart_config`: a QuickstartConfig)."""
    return FinetuneConfig(
        task="sst2", data_dir=os.path.join(out, "task"), init=os.path.join(out, "model"),
        output=os.path.join(out, "finetune"), epochs=quickstart_config.finetune_epochs, batch_size=16,
        max_seq_length=64,
        learning_rate=0.001, warmup_proportion=0.1, classifier_dropout=0.0, seed=quickstart_config.seed,
        collapsed_init="reset-biases",
        # lr 1e-3 was tuned with Keras AdamW (README's figures); the original's optimizer takes 3-6x larger early
        # steps and at 1e-3 leaves some seeds at chance (docs/fine-tuning-quality.md)
        optimizer="adamw-keras")


def preflight(config):
    """--output is a directory it can make (not a file), checked before TensorFlow's import."""
    files.check_output_dir(config.output, "--output")


def quickstart(config):
    """Runs the whole pipeline in `config.output` (a QuickstartConfig), printing each step. Returns a
    QuickstartResult (exit_code: the first failed step's)."""
    preflight(config)
    out = os.path.abspath(config.output)
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "corpus.txt")
    docs, sents = builtin_corpus.write_builtin_corpus(corpus)
    print(f"[quickstart] built-in corpus: {docs} documents, {sents} sentences from the standard library's "
          f"docstrings → {corpus}", flush=True)
    albert_config.load_config("albert_tiny").replace(vocab_size=2000).to_json_file(
        os.path.join(out, layout.CONFIG_FILE))
    model_dir = os.path.join(out, "model")
    for step in pretraining_steps(out, config):
        code = _step(step).exit_code
        if code:
            return QuickstartResult(model_dir, exit_code=code)
    print(f"[quickstart] pretrained-model directory {model_dir} (load it with "
          "albert_tf.AlbertPretrainer.from_pretrained)", flush=True)

    # ---- fine-tune a classifier on a task built from the same docstrings, then ask its export one question
    task_dir = os.path.join(out, "task")
    sizes = builtin_corpus.write_document_task(task_dir, config.seed)
    names = [name for name, _ in builtin_corpus.TASK_GROUPS]
    print(f"[quickstart] fine-tuning task: which modules' docstrings a sentence comes from (0 = {names[0]}, "
          f"1 = {names[1]}), balanced: {sizes['train']} train / {sizes['dev']} dev sentences in SST-2's layout "
          f"→ {task_dir}", flush=True)
    print("[quickstart] note: a model pretrained for a few hundred steps maps most inputs to nearly the same output; "
          "fine-tune notices it and resets the encoder's biases, as expected here", flush=True)
    tuned = _step(finetune_step(out, config))
    if tuned.exit_code:
        return QuickstartResult(model_dir, exit_code=tuned.exit_code)
    results = json.loads(open(layout.FinetuneDir(tuned.output).eval_results, encoding="utf-8").read())
    accuracy = results["dev"]["accuracy"]
    print(f"[quickstart] dev accuracy {accuracy:.4f} (chance 0.5, best epoch {results['epoch']}); fine-tuned export "
          f"{tuned.export}", flush=True)
    label, probabilities = ask_export(tuned.export, builtin_corpus.REQUEST)
    print(f"[quickstart] request through the export's serving_default: text_a={builtin_corpus.REQUEST!r} → label "
          f"{label} ({names[label]}), probabilities [{', '.join(f'{p:.4f}' for p in probabilities)}]", flush=True)
    finetune_dir = layout.FinetuneDir(tuned.output)
    print(f"[quickstart] done: pretrained model {model_dir}, fine-tuned classifier {finetune_dir.best}, its raw-text "
          f"export {tuned.export}", flush=True)
    for line in next_steps(finetune_dir.export):
        print(f"[quickstart] {line}", flush=True)
    return QuickstartResult(model_dir, tuned.export, accuracy, label, probabilities)


def ask_export(export_dir, text):
    """One raw-text request through a fine-tuned classifier export, loaded as a server would (a SavedModel's
    serving_default). Returns (label, probabilities list)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.serving.saved_model import load_export  # pylint: disable=import-outside-toplevel

    outputs = load_export(export_dir).signatures["serving_default"](text_a=tf.constant([text]))
    return int(outputs["label"].numpy()[0]), [float(p) for p in outputs["probabilities"].numpy()[0]]


def own_corpus_steps(memory=None):
    """The commands of "next: your own corpus", as argv lists: the vocabulary sized from the corpus (`--vocab-size
    auto`), records, pretraining with the config's vocab_size taken from that vocabulary (`--set vocab_size=auto`)
    at the largest power-of-two batch that `memory` bytes (default: this machine's) hold by pretrain's own rule
    (albert_tf.training.costs.host_batch_that_fits, for the largest vocabulary `auto` picks), then an export."""
    largest = albert_config.load_config(NEXT_CONFIG).replace(vocab_size=AUTO_LARGEST)
    batch = max(1, costs.host_batch_that_fits(largest, NEXT_SEQ, 20, total=memory, largest=NEXT_BATCH))
    return [
        ["vocab", "--input", "corpus/*.txt", "--output-prefix", "work/spm", "--vocab-size", "auto"],
        ["create-data", "--input", "corpus/*.txt", "--spm-model", "work/spm.model", "--output", "work/data/train",
         "--max-seq-length", str(NEXT_SEQ)],
        ["pretrain", "--config", NEXT_CONFIG, "--set", "vocab_size=auto", "--spm-model", "work/spm.model",
         "--train-data", "work/data/train-*", "--model-dir", "work/model", "--max-seq-length", str(NEXT_SEQ),
         "--batch-size", str(batch), "--learning-rate", f"{costs.learning_rate_for(batch):.2g}",
         "--num-train-steps", str(NEXT_STEPS), "--num-warmup-steps", str(NEXT_STEPS // 10)],
        ["export", "--init", "work/model", "--output", "work/export"],
    ]


def next_steps(export_base, memory=None):
    """The closing lines: serve the export, run on your own corpus, fine-tune a GLUE task (commands pasteable)."""
    mount = shlex.quote(f"{export_base}:/models/albert")
    corpus = own_corpus_steps(memory)
    batch = corpus[2][corpus[2].index("--batch-size") + 1]
    return [
        "next: serve the export with TF Serving (REST on 8501, gRPC on 8500):",
        f"  docker run -p 8500:8500 -p 8501:8501 -v {mount} -e MODEL_NAME=albert tensorflow/serving:2.20.0 "
        "--enable_model_warmup=true",
        "next: your own corpus (text files, one sentence per line, a blank line between documents); batch "
        f"{batch} is what this machine's memory holds for {NEXT_CONFIG} at {NEXT_SEQ} tokens (`albert-tf plan "
        "--topology cpu` shows the plan), its learning rate square-root scaled from the paper's:",
        *("  " + shlex.join(["albert-tf", *argv]) for argv in corpus),
        "next: fine-tune a GLUE task (the task folder as downloaded, e.g. SST-2):",
        "  " + shlex.join(["albert-tf", "finetune", "--task", "sst2", "--data-dir", "glue/SST-2", "--init",
                           "work/model", "--output", "work/sst2"]),
    ]


__all__ = ["QuickstartConfig", "QuickstartResult", "quickstart", "preflight"]
