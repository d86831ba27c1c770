"""`albert-tf finetune`: fine-tune a pretrained ALBERT on GLUE, SQuAD v1.1/v2.0 or RACE with Keras `model.fit`.

Read it top to bottom: the per-task defaults (the paper's table), the flags, then `run()`:

    check the flags and the --init directory (config, spm.model, vocabulary)
    → read the task's official files (albert_tf.tasks.*) → featurize in tf.data (in-graph tokenizer)
    → task model (albert_tf.modeling.tasks) with the encoder restored from --init
    → AdamW (LayerNorm and biases not decayed) on a linear warm-up + linear decay schedule, clip-norm 1.0
    → model.fit: one Keras "epoch" is one pass over the training data; at each epoch's end the dev set is scored
      with the task's official metric (logged to TensorBoard), the best model is kept in OUTPUT/best, and a
      checkpoint (model, optimizer, epoch, best so far) is written to OUTPUT/checkpoints
    → OUTPUT/eval_results.json: the best epoch's official dev metrics.

Faults: a run killed at any point and started again with the same flags resumes from the last epoch's checkpoint
and reaches the same result: the data order of epoch e is a function of (seed, e) alone, and the checkpoint holds
everything that changes during training (weights, optimizer moments and step, dropout seed state, the best
metric so far).
"""
import argparse
import dataclasses
import json
import math
import os
import re
import signal
import sys

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
TASKS = GLUE_TASKS + ("squad1", "squad2", "race")


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """One row of the paper's fine-tuning table."""
    learning_rate: float
    batch_size: int
    train_steps: int
    warmup_steps: int
    max_seq_length: int
    albert_dropout: float        # dropout inside the encoder ("ALBERT DR")
    classifier_dropout: float    # dropout on the pooled output ("Classifier DR")


# The ALBERT paper (Lan et al., ICLR 2020), appendix A.4, Table 16 "Hyperparameters for ALBERT in downstream tasks":
# LR, batch size (BSZ), ALBERT dropout (ALBERT DR), classifier dropout (Classifier DR), training steps (TS),
# warm-up steps (WS), max sequence length (MSL). The GLUE rows are also the arguments of google-research/albert's
# run_glue.sh (warm-up, LR, steps, batch per task). Every value can be overridden by a flag.
PAPER_DEFAULTS = {
    "cola": Hyperparameters(1e-5, 16, 5336, 320, 512, 0.0, 0.1),
    "stsb": Hyperparameters(2e-5, 16, 3598, 214, 512, 0.0, 0.1),
    "sst2": Hyperparameters(1e-5, 32, 20935, 1256, 512, 0.0, 0.1),
    "mnli": Hyperparameters(3e-5, 128, 10000, 1000, 512, 0.0, 0.1),
    "qnli": Hyperparameters(1e-5, 32, 33112, 1986, 512, 0.0, 0.1),
    "qqp": Hyperparameters(5e-5, 128, 14000, 1000, 512, 0.1, 0.1),
    "rte": Hyperparameters(3e-5, 32, 800, 200, 512, 0.1, 0.1),
    "mrpc": Hyperparameters(2e-5, 32, 800, 200, 512, 0.0, 0.1),
    "wnli": Hyperparameters(2e-5, 16, 2000, 250, 512, 0.1, 0.1),
    "squad1": Hyperparameters(5e-5, 48, 3649, 365, 384, 0.0, 0.1),
    "squad2": Hyperparameters(3e-5, 48, 8144, 814, 512, 0.0, 0.1),
    "race": Hyperparameters(2e-5, 32, 12000, 1000, 512, 0.1, 0.1),
}

#: AdamW as the original fine-tuning optimizer: weight decay 0.01 except LayerNorm and bias, epsilon 1e-6.
WEIGHT_DECAY = 0.01
NO_DECAY = ("LayerNorm", "layer_norm", "bias")


def add_arguments(parser):
    a = parser.add_argument
    a("--task", required=True, choices=TASKS)
    a("--data-dir", required=True, help="the task's files as downloaded (GLUE task folder, SQuAD json dir, RACE)")
    a("--init", required=True, help="pretrained-model directory (albert_config.json, checkpoint, spm.model)")
    a("--output", required=True, help="output directory: checkpoints, TensorBoard logs, best model, results")
    a("--spm-model", default=None, help="SentencePiece model when --init has no spm.model")
    a("--epochs", type=float, default=None,
      help="passes over the training data (default: the paper's step count for the task, rounded up to passes)")
    a("--learning-rate", type=float, default=None, help="peak learning rate (default: the paper's, per task)")
    a("--batch-size", type=int, default=None, help="global batch (default: the paper's, per task)")
    a("--max-seq-length", type=int, default=None, help="default: the paper's, per task (capped by the config)")
    a("--warmup-proportion", type=float, default=None,
      help="fraction of the steps spent warming up (default: the paper's warm-up/steps ratio for the task)")
    a("--albert-dropout", type=float, default=None, help="dropout inside the encoder (default: the paper's)")
    a("--classifier-dropout", type=float, default=None, help="dropout before the head (default: the paper's)")
    a("--seed", type=int, default=12345, help="seeds the head's init, the data order and dropout")
    a("--collapsed-init", choices=("reset-biases", "keep"), default="reset-biases",
      help="when the --init encoder maps every input to nearly the same output (a too briefly pretrained model, "
           "see notes): zero its biases and LayerNorm betas before fine-tuning (default), or keep them")
    a("--tpu", default=None, help="TPU name or address (`local` on a TPU VM); paths must be gs://")
    a("--cpu-replicas", type=int, default=None, help="split the CPU into N replicas (tests the distributed path)")
    a("--steps-per-execution", type=int, default=1, help="training steps per compiled call (Keras)")
    a("--xla", choices=("auto", "on", "off"), default="auto", help="jit-compile the step; auto: on for GPU/TPU")
    a("--length-bucket", type=int, default=None,
      help="pad each batch only to its longest example, rounded up to a multiple of N (fewer FLOPs on short "
           "text; outputs unchanged); 0: every batch at --max-seq-length. Default: 16, and 0 on TPU, whose "
           "compiled steps need static shapes")
    a("--max-train-examples", type=int, default=None, help=argparse.SUPPRESS)  # quick runs on a prefix
    # Testing only: SIGKILL this process right after the checkpoint of epoch N is written.
    a("--debug-kill-after-epoch", type=int, default=None, help=argparse.SUPPRESS)


# ---------------------------------------------------------------------------------------------- the plan
@dataclasses.dataclass
class Plan:
    """The resolved hyperparameters of a run."""
    learning_rate: float
    batch_size: int
    max_seq_length: int
    epochs: int
    steps_per_epoch: int
    warmup_steps: int
    albert_dropout: float
    classifier_dropout: float
    length_bucket: int = 0  # 0: batches at max_seq_length; N: at their longest example rounded up to N

    @property
    def total_steps(self):
        return self.epochs * self.steps_per_epoch


def resolve_length_bucket(flag, on_tpu):
    """--length-bucket resolved: 16 by default, 0 on TPU (static shapes); a positive value on TPU is refused."""
    if flag is None:
        return 0 if on_tpu else 16
    if flag < 0:
        raise ValueError(f"--length-bucket must be 0 or positive, got {flag}")
    if flag and on_tpu:
        raise ValueError(f"--length-bucket {flag}: a TPU's compiled step needs static shapes; use 0 (the default "
                         "on TPU)")
    return flag


def make_plan(args, num_train_examples, max_position_embeddings):
    """Flags over the paper's defaults. A Keras epoch is one pass over the training data (the examples that fill
    whole batches); the paper's step count is rounded up to whole passes."""
    paper = PAPER_DEFAULTS[args.task]
    batch = args.batch_size or paper.batch_size
    seq = args.max_seq_length or min(paper.max_seq_length, max_position_embeddings)
    if seq > max_position_embeddings:
        raise ValueError(f"--max-seq-length {seq} exceeds the config's max_position_embeddings "
                         f"{max_position_embeddings}")
    for flag, value in (("--batch-size", batch), ("--max-seq-length", seq)):
        if value <= 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    steps_per_epoch = num_train_examples // batch
    if steps_per_epoch < 1:
        raise ValueError(f"--data-dir {args.data_dir}: {num_train_examples} training examples, fewer than one "
                         f"batch of {batch} (lower --batch-size)")
    if args.epochs is not None:
        if args.epochs <= 0:
            raise ValueError(f"--epochs must be positive, got {args.epochs}")
        epochs = max(1, math.ceil(args.epochs))
    else:
        epochs = max(1, math.ceil(paper.train_steps / steps_per_epoch))
    proportion = args.warmup_proportion if args.warmup_proportion is not None else \
        paper.warmup_steps / paper.train_steps
    if not 0 <= proportion < 1:
        raise ValueError(f"--warmup-proportion must be in [0, 1), got {proportion}")
    for flag, value in (("--albert-dropout", args.albert_dropout), ("--classifier-dropout", args.classifier_dropout)):
        if value is not None and not 0 <= value < 1:
            raise ValueError(f"{flag} must be in [0, 1), got {value}")
    return Plan(
        learning_rate=args.learning_rate or paper.learning_rate, batch_size=batch, max_seq_length=seq,
        epochs=epochs, steps_per_epoch=steps_per_epoch,
        warmup_steps=int(round(proportion * epochs * steps_per_epoch)),
        albert_dropout=paper.albert_dropout if args.albert_dropout is None else args.albert_dropout,
        classifier_dropout=paper.classifier_dropout if args.classifier_dropout is None else args.classifier_dropout)


def epoch_order(seed, epoch, num_examples, steps_per_epoch, batch_size):
    """The training examples of epoch `epoch`, in order: a permutation drawn from (seed, epoch) alone, cut to
    whole batches. int64 [steps_per_epoch · batch_size]."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(num_examples)[: steps_per_epoch * batch_size]


# ---------------------------------------------------------------------------------------------- the optimizer
def create_optimizer(plan, model):
    """AdamW (β 0.9/0.999, ε 1e-6, weight decay 0.01 except LayerNorm and biases), gradients clipped to global norm
    1.0, on a linear warm-up then linear decay to 0 at the last step (the original's optimization.py). Builds it."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel

    schedule = WarmupPolynomialDecay(plan.learning_rate, plan.total_steps, plan.warmup_steps, power=1.0)
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=WEIGHT_DECAY, beta_1=0.9, beta_2=0.999,
                                       epsilon=1e-6, global_clipnorm=1.0)
    pattern = re.compile("|".join(NO_DECAY))
    # Keras matches var_names against the short name ("gamma", "kernel"); match the full path, as the original.
    optimizer.exclude_from_weight_decay(var_list=[v for v in model.trainable_variables if pattern.search(v.path)])
    optimizer.build(model.trainable_variables)
    return optimizer


# ---------------------------------------------------------------------------------------------- --init
def read_init(init, spm_flag):
    """(config, spm model path) of the --init directory; refuses a vocabulary that disagrees with the config."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import pretrained  # pylint: disable=import-outside-toplevel

    if not tf.io.gfile.isdir(init):
        raise FileNotFoundError(f"--init {init}: no such directory (expected a pretrained-model directory)")
    config = pretrained.read_config(init)
    spm_model = spm_flag or pretrained.spm_model_path(init)
    if spm_model is None:
        raise FileNotFoundError(f"--init {init}: no spm.model in it; give the vocabulary with --spm-model")
    if not tf.io.gfile.exists(spm_model):
        raise FileNotFoundError(f"--spm-model {spm_model}: no such file")
    try:
        pretrained.check_vocabulary(config, spm_model)
    except ValueError as e:
        raise ValueError(f"--init {init}: {e}") from None
    return config, spm_model


# ---------------------------------------------------------------------------------------------- the data
def _with_trimmed_padding(dataset, length_bucket):
    """dataset of features or (features, labels) batches, trimmed by `trim_padding` when length_bucket > 0."""
    if not length_bucket:
        return dataset
    from albert_tf.modeling.base import trim_padding  # pylint: disable=import-outside-toplevel

    def trim(*element):
        if len(element) == 1:
            return trim_padding(element[0], length_bucket)
        return (trim_padding(element[0], length_bucket), *element[1:])

    return dataset.map(trim)


def _featurized_batches(tokenizer, order, batch_size, featurize, length_bucket):
    """The examples `order` names (int64 [N], N a multiple of batch_size), batched, each batch of indices
    featurized in-graph by `featurize` (with `tokenizer`'s in-graph module), then trimmed (`_with_trimmed_padding`)
    and prefetched."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    _ = tokenizer.in_graph  # (re)built now, eagerly, not inside the map function's trace (AlbertTokenizer.in_graph)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(order, tf.int64))
    dataset = dataset.batch(batch_size, drop_remainder=True)
    # no AutoGraph: the featurizers use tf.cond where they branch; converting them only costs tracing time
    dataset = dataset.map(tf.autograph.experimental.do_not_convert(featurize), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    return _with_trimmed_padding(dataset, length_bucket).prefetch(tf.data.AUTOTUNE)


def pack_dataset(tokenizer, seq_length, texts_a, texts_b, labels, order, batch_size, choices=None,
                 length_bucket=0):
    """A tf.data pipeline of packed batches: the examples `order` names (int64 [N]), in that order, batched, then
    tokenized and packed in-graph (`tokenizer.tf_pack`, the export's tokenizer).

    Args:
      texts_a, texts_b: numpy str arrays [E] (texts_b None for single-sentence tasks); with `choices` = C they hold
        C strings per example, [E, C].
      labels: numpy [E] (int or float), or None for prediction.
      order: int64 [N], N a multiple of batch_size.
      length_bucket: 0, or trim each batch's padding to a multiple of it (`modeling.base.trim_padding`).
    Yields:
      (features, labels) or features; features int32 [b, L] (multiple choice: [b, C, L]); L = seq_length, or
      the batch's longest example rounded up to length_bucket.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    table_a = tf.constant(texts_a)
    table_b = None if texts_b is None else tf.constant(texts_b)
    table_labels = None if labels is None else tf.constant(labels)

    def featurize(index):
        a = tf.gather(table_a, index)
        b = None if table_b is None else tf.gather(table_b, index)
        if choices:
            a, b = tf.reshape(a, [-1]), None if b is None else tf.reshape(b, [-1])
        features = tokenizer.tf_pack(a, b, seq_length)
        if choices:
            features = {k: tf.reshape(v, [-1, choices, seq_length]) for k, v in features.items()}
        return features if table_labels is None else (features, tf.gather(table_labels, index))

    return _featurized_batches(tokenizer, order, batch_size, featurize, length_bucket)


def train_order(seed, initial_epoch, plan, num_examples):
    """The training examples of epochs initial_epoch .. plan.epochs-1, concatenated (int64)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    return np.concatenate([epoch_order(seed, e, num_examples, plan.steps_per_epoch, plan.batch_size)
                           for e in range(initial_epoch, plan.epochs)])


def predict_in_order(model, make_dataset, num_examples, batch_size):
    """model.predict over all `num_examples` examples in order. The last batch is padded (with example 0) to a full
    batch, as TPUs need static shapes, and the padding's outputs are dropped."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    padded = -(-num_examples // batch_size) * batch_size
    order = np.concatenate([np.arange(num_examples), np.zeros(padded - num_examples, np.int64)])
    outputs = model.predict(make_dataset(order), verbose=0)
    if isinstance(outputs, dict):
        return {k: np.asarray(v)[:num_examples] for k, v in outputs.items()}
    return np.asarray(outputs)[:num_examples]


class GlueTask:
    """A GLUE task: sentence (pair) classification or regression on the pooled output."""

    def __init__(self, args):
        from albert_tf.tasks import glue  # pylint: disable=import-outside-toplevel

        self.glue = glue
        self.spec = glue.TASKS[args.task]
        self.train = glue.read_examples(args.data_dir, self.spec, "train")
        self.dev = {split: glue.read_examples(args.data_dir, self.spec, split) for split in self.spec.dev_splits}
        self.regression = self.spec.num_labels == 1
        self.primary_metric = self.spec.metrics[0]
        self.pairs = any(e.text_b is not None for e in self.train)

    def _columns(self, examples):
        import numpy as np  # pylint: disable=import-outside-toplevel

        a = np.array([e.text_a for e in examples], dtype=object).astype(str)
        b = np.array([e.text_b or "" for e in examples], dtype=object).astype(str) if self.pairs else None
        labels = np.array([e.label for e in examples], np.float32 if self.regression else np.int32)
        return a, b, labels

    def build_model(self, encoder, plan):
        from albert_tf.modeling.tasks import AlbertClassifier  # pylint: disable=import-outside-toplevel

        return AlbertClassifier(encoder, self.spec.num_labels, dropout=plan.classifier_dropout)

    def loss_and_metrics(self):
        import keras  # pylint: disable=import-outside-toplevel

        if self.regression:
            return keras.losses.MeanSquaredError(), []
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"]

    def sample_inputs(self, tokenizer, plan, n):
        """The first n training examples' model inputs (Python tokenizer: no tf.data pipeline before training's,
        whose in-graph tokenizer resources must live for the whole run)."""
        examples = self.train[:n]
        return tokenizer.pack([e.text_a for e in examples], [e.text_b or "" for e in examples] if self.pairs
                              else None, seq_length=plan.max_seq_length)

    def train_dataset(self, tokenizer, plan, order):
        a, b, labels = self._columns(self.train)
        return pack_dataset(tokenizer, plan.max_seq_length, a, b, labels, order, plan.batch_size,
                            length_bucket=plan.length_bucket)

    def evaluate(self, model, tokenizer, plan):
        """{dev split: official metrics}."""
        results = {}
        for split, examples in self.dev.items():
            a, b, labels = self._columns(examples)
            logits = predict_in_order(
                model, lambda order: pack_dataset(tokenizer, plan.max_seq_length, a, b, None, order,
                                                  plan.batch_size, length_bucket=plan.length_bucket),
                len(examples), plan.batch_size)
            predictions = logits[:, 0] if self.regression else logits.argmax(-1)
            results[split] = {k: float(v) for k, v in self.glue.compute_metrics(self.spec, predictions,
                                                                                 labels).items()}
        return results

    def export(self, model, tokenizer, plan, results, output_base):  # pylint: disable=unused-argument
        """OUT/export/N: raw text in (see `export_classifier`). Returns the path."""
        return export_classifier(model, tokenizer, plan, self.pairs, self.regression, output_base)


def array_dataset(features, labels, order, batch_size, length_bucket=0):
    """A tf.data pipeline of batches of precomputed features (a host-side generator, so the arrays are not
    embedded in the graph): the examples `order` names, in order.

    Args:
      features: dict of numpy int32 arrays [E, ...]; labels: numpy [E] or a dict of them, or None.
      order: int64 [N], N a multiple of batch_size.
      length_bucket: 0, or trim each batch's padding to a multiple of it (`modeling.base.trim_padding`).
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def spec(array):
        return tf.TensorSpec([batch_size, *array.shape[1:]], tf.as_dtype(array.dtype))

    def gather(tree, index):
        return {k: v[index] for k, v in tree.items()} if isinstance(tree, dict) else tree[index]

    def batches():
        for start in range(0, len(order), batch_size):
            index = np.asarray(order[start:start + batch_size])
            x = gather(features, index)
            yield x if labels is None else (x, gather(labels, index))

    x_spec = {k: spec(v) for k, v in features.items()}
    if labels is None:
        signature = x_spec
    else:
        signature = (x_spec, {k: spec(v) for k, v in labels.items()} if isinstance(labels, dict) else spec(labels))
    dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return _with_trimmed_padding(dataset, length_bucket).prefetch(tf.data.AUTOTUNE)


def race_dataset(examples, tokenizer, seq_length, max_qa_length, order, batch_size, labels=True, length_bucket=0):
    """A tf.data pipeline of RACE batches: the examples `order` names (int64 [N], N a multiple of batch_size),
    featurized in-graph by `task_export.race_inputs` (the export's featurizer, equal to `race.featurize`).

    Yields:
      (features, labels int32 [b]) or features: int32 [b, 4, L] input_word_ids, input_mask, input_type_ids; L =
      seq_length, or the batch's longest sequence rounded up to length_bucket.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import task_export  # pylint: disable=import-outside-toplevel

    articles = {}  # each article once: questions of one file share it
    article_index = np.asarray([articles.setdefault(e.article, len(articles)) for e in examples], np.int64)
    tables = {"article": tf.constant(list(articles)), "article_index": tf.constant(article_index),
              "question": tf.constant([e.question for e in examples]),
              "options": tf.constant([list(e.options) for e in examples]),
              "label": tf.constant([e.label for e in examples], tf.int32)}

    def featurize(index):
        article = tf.gather(tables["article"], tf.gather(tables["article_index"], index))
        features = task_export.race_inputs(tokenizer, article, tf.gather(tables["question"], index),
                                           tf.gather(tables["options"], index), seq_length, max_qa_length)
        return (features, tf.gather(tables["label"], index)) if labels else features

    return _featurized_batches(tokenizer, order, batch_size, featurize, length_bucket)


class RaceTask:
    """RACE: four (article, question + option) sequences per question, one logit each (original layout)."""

    primary_metric = "accuracy"

    def __init__(self, args):
        from albert_tf.tasks import race  # pylint: disable=import-outside-toplevel

        self.race = race
        self.train = race.read_examples(args.data_dir, "train")
        self.dev = {"dev": race.read_examples(args.data_dir, "dev")}

    def _dataset(self, examples, tokenizer, plan, order, labels):
        """Batches of `order`'s examples featurized in tf.data by the export's in-graph tokenizer
        (`task_export.race_inputs`, equal to `race.featurize`)."""
        return race_dataset(examples, tokenizer, plan.max_seq_length, self.max_qa_length(plan), order,
                            plan.batch_size, labels=labels, length_bucket=plan.length_bucket)

    def build_model(self, encoder, plan):
        from albert_tf.modeling.tasks import AlbertMultipleChoice  # pylint: disable=import-outside-toplevel

        return AlbertMultipleChoice(encoder, self.race.NUM_CHOICES, dropout=plan.classifier_dropout)

    def loss_and_metrics(self):
        import keras  # pylint: disable=import-outside-toplevel

        return keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"]

    def sample_inputs(self, tokenizer, plan, n):
        arrays = self.race.featurize(self.train[:n], tokenizer, max_seq_length=plan.max_seq_length,
                                     max_qa_length=self.max_qa_length(plan))
        return {k: v for k, v in arrays.items() if k != "labels"}

    def train_dataset(self, tokenizer, plan, order):
        return self._dataset(self.train, tokenizer, plan, order, labels=True)

    def evaluate(self, model, tokenizer, plan):
        logits = predict_in_order(model, lambda order: self._dataset(self.dev["dev"], tokenizer, plan, order,
                                                                     labels=False),
                                  len(self.dev["dev"]), plan.batch_size)
        return {"dev": {k: float(v) for k, v in self.race.compute_metrics(logits, self.dev["dev"]).items()}}

    def export(self, model, tokenizer, plan, results, output_base):  # pylint: disable=unused-argument
        """OUT/export/N: article, question, options [B, 4] in (albert_tf.task_export). Returns the path."""
        from albert_tf import task_export  # pylint: disable=import-outside-toplevel

        return task_export.export_race(model, tokenizer, output_base, plan.max_seq_length,
                                       max_qa_length=self.max_qa_length(plan))

    @staticmethod
    def max_qa_length(plan):
        """Tokens kept of each question + option (128, at most half the sequence)."""
        return min(128, plan.max_seq_length // 2)


class SquadTask:
    """SQuAD v1.1 / v2.0: start and end logits over the windows (doc stride 128, max query 64); answers from the
    n-best (20) spans of at most 30 tokens; v2's no-answer threshold chosen on dev (best_f1_thresh)."""

    def __init__(self, args):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        from albert_tf.tasks import squad  # pylint: disable=import-outside-toplevel

        self.squad = squad
        self.v2 = args.task == "squad2"
        version = "v2.0" if self.v2 else "v1.1"
        paths = {split: os.path.join(args.data_dir, f"{split}-{version}.json") for split in ("train", "dev")}
        for path in paths.values():
            if not tf.io.gfile.exists(path):
                raise FileNotFoundError(f"--data-dir {args.data_dir}: no {os.path.basename(path)} (SQuAD "
                                        f"{version}'s official file names)")
        self.train = squad.read_examples(paths["train"], version_2_with_negative=self.v2)
        self.dev = {"dev": squad.read_examples(paths["dev"], version_2_with_negative=self.v2)}
        self.primary_metric = "best_f1" if self.v2 else "f1"
        self._cache = {}

    def _features(self, name, examples, tokenizer, plan, is_training):
        """The windows, featurized once per split in tf.data by the export's in-graph tokenizer
        (`task_export.featurize_squad`, equal to `squad.featurize`), and their stacked arrays."""
        from albert_tf import task_export  # pylint: disable=import-outside-toplevel

        if name not in self._cache:
            features = task_export.featurize_squad(examples, tokenizer, max_seq_length=plan.max_seq_length,
                                                   is_training=is_training, **self.window_sizes(plan))
            self._cache[name] = (features, self.squad.features_to_arrays(features, is_training=is_training))
        return self._cache[name]

    @staticmethod
    def window_sizes(plan):
        """doc_stride 128 and max_query_length 64, at most half the sequence."""
        return {"doc_stride": min(128, plan.max_seq_length // 2),
                "max_query_length": min(64, plan.max_seq_length // 2 - 4)}

    def num_train(self, tokenizer, plan):
        return len(self._features("train", self.train, tokenizer, plan, True)[0])

    def build_model(self, encoder, plan):
        from albert_tf.modeling.tasks import AlbertSpanQA  # pylint: disable=import-outside-toplevel

        return AlbertSpanQA(encoder, version_2_with_negative=self.v2)

    def loss_and_metrics(self):
        import keras  # pylint: disable=import-outside-toplevel

        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"start_logits": loss, "end_logits": loss}, []

    def sample_inputs(self, tokenizer, plan, n):
        arrays = self._features("train", self.train, tokenizer, plan, True)[1]
        return {k: arrays[k][:n] for k in ("input_word_ids", "input_mask", "input_type_ids")}

    def train_dataset(self, tokenizer, plan, order):
        arrays = dict(self._features("train", self.train, tokenizer, plan, True)[1])
        labels = {"start_logits": arrays.pop("start_positions"), "end_logits": arrays.pop("end_positions")}
        return array_dataset(arrays, labels, order, plan.batch_size, plan.length_bucket)

    def evaluate(self, model, tokenizer, plan):
        examples = self.dev["dev"]
        features, arrays = self._features("dev", examples, tokenizer, plan, False)
        # At full length (no length_bucket): predict stacks the per-window logits [B, L] of every batch.
        logits = predict_in_order(model, lambda order: array_dataset(arrays, None, order, plan.batch_size),
                                  len(features), plan.batch_size)
        predictions = self.squad.postprocess(examples, features, logits["start_logits"], logits["end_logits"],
                                             n_best=20, max_answer_length=30, version_2_with_negative=self.v2)
        if self.v2:
            result = self.squad.evaluate(examples, predictions.best_span_answers,
                                         na_probs=predictions.null_score_diff, na_prob_thresh=0.0)
        else:
            result = self.squad.evaluate(examples, predictions.answers)
        return {"dev": {k: float(v) for k, v in result.items()}}

    def export(self, model, tokenizer, plan, results, output_base):
        """OUT/export/N: question and context in, the answer out (albert_tf.task_export); v2 keeps the dev
        set's best_f1_thresh as its no-answer threshold. Returns the path."""
        from albert_tf import task_export  # pylint: disable=import-outside-toplevel

        threshold = results["dev"]["best_f1_thresh"] if self.v2 else 0.0
        return task_export.export_squad(model, tokenizer, output_base, plan.max_seq_length,
                                        max_answer_length=30, n_best=20, version_2_with_negative=self.v2,
                                        null_score_diff_threshold=threshold, **self.window_sizes(plan))


def export_classifier(model, tokenizer, plan, pairs, regression, output_base):
    """OUT/export/N: a SavedModel whose serving_default takes raw text (`text_a`, and `text_b` for pair tasks) and
    returns `probabilities` [B, K] and `label` [B] (classification) or `score` [B] (regression); written with
    albert_tf.export's atomic BASE/N writer and in-graph text packing. Returns the path."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import export  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.base import trim_padding  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.model_weights = export.keras_weights(model)  # not the Keras model: see export.keras_weights
    module.tokenizer = tokenizer.in_graph

    def outputs(text_a, text_b):
        inputs = export.text_to_inputs(tokenizer, text_a, text_b, plan.max_seq_length)
        logits = model(trim_padding(inputs, export.SERVING_LENGTH_BUCKET), training=False)  # as the encoder export
        if regression:
            return {"score": logits[:, 0]}
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "label": tf.argmax(logits, -1, output_type=tf.int32)}

    if pairs:
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                      tf.TensorSpec([None], tf.string, name="text_b")])
        def serving_default(text_a, text_b):
            return outputs(text_a, text_b)
    else:
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a")])
        def serving_default(text_a):
            return outputs(text_a, None)
    module.serving_default = serving_default
    return export.write_saved_model(module, output_base, {"serving_default": serving_default.get_concrete_function()})


def make_task(args):
    """Reads the task's files; FileNotFoundError / ValueError name the file when they are missing or malformed."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not tf.io.gfile.isdir(args.data_dir):
        raise FileNotFoundError(f"--data-dir {args.data_dir}: no such directory")
    if not tf.io.gfile.listdir(args.data_dir):
        raise FileNotFoundError(f"--data-dir {args.data_dir}: the directory is empty (expected the {args.task} "
                                "files as downloaded)")
    if args.task in GLUE_TASKS:
        task = GlueTask(args)
    elif args.task == "race":
        task = RaceTask(args)
    else:
        task = SquadTask(args)
    if args.max_train_examples:
        task.train = task.train[: args.max_train_examples]
    if not task.train:
        raise ValueError(f"--data-dir {args.data_dir}: no training examples")
    return task


# ---------------------------------------------------------------------------------------------- collapse check
#: An --init encoder whose token vectors vary across inputs less than this fraction of a randomly initialized
#: encoder's (same config, same inputs) is "collapsed": it maps every input to nearly the same output.
COLLAPSE_RATIO = 0.25


def input_spread(encoder, inputs):
    """How much the encoder's last-layer token vectors depend on the input: the std across all real tokens of
    the batch (input_mask 1, [CLS] excluded), averaged over the H features, divided by the mean std within one
    token vector. 0 when every token of every input gets the same vector.

    Args:
      encoder: an AlbertEncoder; inputs: dict of int32 [B, L] (numpy).
    Returns:
      float.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    sequence = np.asarray(encoder(inputs, training=False)["sequence_output"], np.float64)  # [B, L, H]
    mask = np.asarray(inputs["input_mask"]).astype(bool).copy()
    mask[:, 0] = False
    tokens = sequence[mask]                                                                 # [T, H]
    if len(tokens) < 2:
        return float("nan")
    return float(tokens.std(axis=0).mean() / max(tokens.std(axis=1).mean(), 1e-12))


def reset_biases(encoder):
    """Zeroes the encoder's biases and LayerNorm betas (the input-independent terms). Returns how many."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    variables = [v for v in encoder.trainable_variables if v.path.endswith(("bias", "beta"))]
    for v in variables:
        v.assign(np.zeros(v.shape, v.dtype))
    return len(variables)


def check_collapse(encoder, inputs, seed):
    """(spread of `encoder`, spread of a fresh randomly initialized encoder of the same config) on `inputs`."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(seed)
    reference = AlbertEncoder(encoder.config)
    return input_spread(encoder, inputs), input_spread(reference, inputs)


def handle_collapse(encoder, task, tokenizer, plan, args):
    """Measures the --init encoder's input spread on a training batch against a random encoder's; when it is
    collapsed, says so on stderr and (unless --collapsed-init keep) zeroes its biases and LayerNorm betas."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    features = task.sample_inputs(tokenizer, plan, min(plan.batch_size, 64))
    features = {k: np.asarray(v).reshape(-1, np.asarray(v).shape[-1]) for k, v in features.items()}
    spread, reference = check_collapse(encoder, features, args.seed)
    print(f"--init input spread {spread:.4f} (a randomly initialized encoder: {reference:.4f})", flush=True)
    if not spread < COLLAPSE_RATIO * reference:
        return
    action = {"reset-biases": "zeroing its biases and LayerNorm betas (--collapsed-init keep to leave them)",
              "keep": "keeping it as it is (--collapsed-init keep): fine-tuning will start slowly"}[args.collapsed_init]
    print(f"albert-tf finetune: warning: the --init encoder {args.init} maps every input to nearly the same output "
          f"(its token vectors vary across inputs {spread / reference:.2f}x as much as a random encoder's): it was "
          f"pretrained too briefly (its biases dominate its outputs) and would fine-tune slower than a random "
          f"initialization; {action}. Pretrain longer for a useful --init.", file=sys.stderr, flush=True)
    if args.collapsed_init == "reset-biases":
        reset_biases(encoder)


# ---------------------------------------------------------------------------------------------- callbacks
def _keras_callback_base():
    import keras  # pylint: disable=import-outside-toplevel

    return keras.callbacks.Callback


def make_callbacks(task, tokenizer, plan, state, managers, output, debug_kill_after_epoch=None):
    """The per-epoch work, in order: score the dev set, keep the best model, log, checkpoint (then, in tests only,
    die)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.training.loop import write_scalar_summary  # pylint: disable=import-outside-toplevel

    writers = {name: tf.summary.create_file_writer(os.path.join(output, "logs", name)) for name in ("train", "dev")}

    class EpochEnd(_keras_callback_base()):
        def on_epoch_end(self, epoch, logs=None):
            step = (epoch + 1) * plan.steps_per_epoch
            results = task.evaluate(self.model, tokenizer, plan)
            first = next(iter(results.values()))
            value = first[task.primary_metric]
            improved = value > float(state["best_value"].numpy())
            if improved:
                state["best_value"].assign(value)
                state["best_epoch"].assign(epoch + 1)
                managers["best"].save(checkpoint_number=epoch + 1)
            learning_rate = float(self.model.optimizer.learning_rate.numpy())
            with writers["train"].as_default(step=step):
                for name, v in (logs or {}).items():
                    write_scalar_summary(name, float(v))
                write_scalar_summary("learning_rate", learning_rate)
            with writers["dev"].as_default(step=step):
                for split, metrics in results.items():
                    for name, v in metrics.items():
                        write_scalar_summary(f"{split}/{name}", v)
            for writer in writers.values():
                writer.flush()
            text = " ".join(f"{split}/{k}={v:.4f}" for split, m in results.items() for k, v in m.items())
            print(f"epoch {epoch + 1}/{plan.epochs} step {step}: loss={(logs or {}).get('loss', float('nan')):.4f} "
                  f"{text}{' (best)' if improved else ''}", flush=True)
            state["epoch"].assign(epoch + 1)
            managers["resume"].save(checkpoint_number=epoch + 1)
            if debug_kill_after_epoch is not None and epoch + 1 >= debug_kill_after_epoch:
                os.kill(os.getpid(), signal.SIGKILL)

    return [EpochEnd()]


# ---------------------------------------------------------------------------------------------- run
def run(args):  # noqa: C901  (one readable function on purpose)
    from albert_tf import pretrained  # pylint: disable=import-outside-toplevel

    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.tokenization import AlbertTokenizer  # pylint: disable=import-outside-toplevel
    from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel
    from albert_tf.utils import atomic_write_text  # pylint: disable=import-outside-toplevel

    if args.tpu:
        distribute.check_cloud_paths({"--data-dir": args.data_dir, "--init": args.init, "--output": args.output})
    if args.steps_per_execution <= 0:
        raise ValueError(f"--steps-per-execution must be positive, got {args.steps_per_execution}")
    config, spm_model = read_init(args.init, args.spm_model)
    task = make_task(args)
    tokenizer = AlbertTokenizer(spm_model)
    # The strategy first: connecting to a TPU (or splitting the CPU into replicas) must precede any TensorFlow
    # work, such as SQuAD's in-graph featurization below.
    strategy = distribute.create_strategy(tpu=args.tpu, cpu_replicas=args.cpu_replicas)
    plan = make_plan(args, len(task.train), config.max_position_embeddings)
    if isinstance(task, SquadTask):  # one training example per window: count them at the planned length
        plan = make_plan(args, task.num_train(tokenizer, plan), config.max_position_embeddings)
    replicas = strategy.num_replicas_in_sync
    if plan.batch_size % replicas:
        raise ValueError(f"--batch-size {plan.batch_size} is not divisible by the {replicas} replicas")
    on_tpu = distribute.is_tpu_strategy(strategy)
    plan = dataclasses.replace(plan, length_bucket=resolve_length_bucket(args.length_bucket, on_tpu))
    jit = args.xla == "on" or (args.xla == "auto" and (on_tpu or bool(tf.config.list_physical_devices("GPU"))))

    # The run's plan is part of the output: a restart with different flags would not resume the same run.
    run_config = {"task": args.task, "init": args.init, "seed": args.seed,
                  **dataclasses.asdict(plan)}
    run_config_path = os.path.join(args.output, "finetune_config.json")
    if tf.io.gfile.exists(run_config_path):
        with tf.io.gfile.GFile(run_config_path) as f:
            existing = json.load(f)
        if existing != run_config:
            diff = sorted(k for k in run_config if existing.get(k) != run_config[k])
            raise ValueError(f"{run_config_path}: the output directory holds a different run (differs in "
                             f"{', '.join(diff)}); use a new --output or the same flags")
    tf.io.gfile.makedirs(args.output)
    atomic_write_text(run_config_path, json.dumps(run_config, indent=2) + "\n")

    keras.utils.set_random_seed(args.seed)
    config = config.replace(hidden_dropout_prob=plan.albert_dropout,
                            attention_probs_dropout_prob=plan.albert_dropout)
    with strategy.scope():
        model = task.build_model(AlbertEncoder(config), plan)
        init_path = pretrained.restore(model, args.init, part="encoder")
        optimizer = create_optimizer(plan, model)
        loss, metrics = task.loss_and_metrics()
        model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit,
                      steps_per_execution=args.steps_per_execution)
        state = {"epoch": tf.Variable(0, dtype=tf.int64, trainable=False),
                 "best_value": tf.Variable(-math.inf, dtype=tf.float64, trainable=False),
                 "best_epoch": tf.Variable(0, dtype=tf.int64, trainable=False)}
    # Dropout's seed-generator states are not in the model's checkpoint graph: saved beside it, so that a resumed
    # run draws the same masks as an uninterrupted one.
    seed_states = [layer.seed_generator.state.value for layer in model._flatten_layers()  # pylint: disable=protected-access
                   if getattr(layer, "seed_generator", None) is not None]
    managers = {
        "resume": tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer,
                                                                 dropout_seeds=seed_states, **state),
                                             os.path.join(args.output, "checkpoints"), max_to_keep=2),
        "best": tf.train.CheckpointManager(tf.train.Checkpoint(model=model), os.path.join(args.output, "best"),
                                           max_to_keep=1),
    }
    if managers["resume"].latest_checkpoint:
        managers["resume"].checkpoint.restore(managers["resume"].latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {managers['resume'].latest_checkpoint} after epoch {int(state['epoch'].numpy())}",
              flush=True)
    else:
        print(f"initialized the encoder from {init_path}", flush=True)
        handle_collapse(model.encoder, task, tokenizer, plan, args)
    initial_epoch = int(state["epoch"].numpy())

    print(f"fine-tuning {args.task}: {len(task.train)} training examples, {plan.epochs} epoch(s) of {plan.steps_per_epoch} "
          f"steps at batch {plan.batch_size}, seq {plan.max_seq_length}, lr {plan.learning_rate:g} (warm-up "
          f"{plan.warmup_steps} steps), {replicas} replica(s) ({type(strategy).__name__})", flush=True)
    if initial_epoch < plan.epochs:
        num_train = task.num_train(tokenizer, plan) if isinstance(task, SquadTask) else len(task.train)
        dataset = task.train_dataset(tokenizer, plan, train_order(args.seed, initial_epoch, plan, num_train))
        callbacks = make_callbacks(task, tokenizer, plan, state, managers, args.output, args.debug_kill_after_epoch)
        model.fit(dataset, epochs=plan.epochs, initial_epoch=initial_epoch, steps_per_epoch=plan.steps_per_epoch,
                  callbacks=callbacks, shuffle=False, verbose=0)

    # ---- the best epoch's model: its official dev metrics, and the model directory
    if managers["best"].latest_checkpoint:  # none when every epoch's metric was NaN: the last weights stay
        managers["best"].checkpoint.restore(managers["best"].latest_checkpoint).assert_existing_objects_matched()
    results = task.evaluate(model, tokenizer, plan)
    best_epoch = int(state["best_epoch"].numpy())
    report = {"task": args.task, "epoch": best_epoch, "global_step": best_epoch * plan.steps_per_epoch, **results}
    atomic_write_text(os.path.join(args.output, "eval_results.json"), json.dumps(report, indent=2) + "\n")
    config.to_json_file(os.path.join(args.output, "best", "albert_config.json"))
    path = task.export(model, tokenizer, plan, results, os.path.join(args.output, "export"))
    print(f"exported the best model to {path} (serving_default: raw text in)", flush=True)
    print(f"done: best epoch {best_epoch}: {json.dumps(results)}; {os.path.join(args.output, 'eval_results.json')}",
          flush=True)
    return 0
