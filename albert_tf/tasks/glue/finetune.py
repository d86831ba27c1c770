"""Fine-tuning a GLUE task: sentence (pair) classification or regression on the pooled output."""
import keras
import numpy as np

from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks import glue
from albert_tf.tasks.base import FinetuneTask, accuracy_metrics
from albert_tf.tasks.glue.classifier_export import export_classifier
from albert_tf.tasks.pipelines import pack_dataset, predict_in_order


class GlueFinetune(FinetuneTask):
    """A GLUE task: sentence (pair) classification or regression on the pooled output."""

    def __init__(self, data_dir, task):
        self.task = task
        self.spec = glue.SPECS[task]
        self.train = glue.read_examples(data_dir, self.spec, "train")
        self.dev = {split: glue.read_examples(data_dir, self.spec, split) for split in self.spec.dev_splits}
        self.regression = self.spec.num_labels == 1
        self.primary_metric = self.spec.metrics[0]
        self.pairs = any(e.text_b is not None for e in self.train)

    def _columns(self, examples):
        """(text_a str [E], text_b str [E] or None, labels [E]); a missing text_b is "": no second segment, packed
        [CLS] a [SEP] as the original and the export do (albert_tf.text.segments)."""
        a = np.array([e.text_a for e in examples], dtype=object).astype(str)
        b = np.array([e.text_b or "" for e in examples], dtype=object).astype(str) if self.pairs else None
        labels = np.array([e.label for e in examples], np.float32 if self.regression else np.int32)
        return a, b, labels

    def build_model(self, encoder):
        return AlbertClassifier(encoder, self.spec.num_labels, dropout=self.budget.classifier_dropout)

    def loss_and_metrics(self):
        if self.regression:
            return keras.losses.MeanSquaredError(), []
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True), accuracy_metrics()

    def sample_inputs(self, tokenizer, n):
        """The first n training examples' model inputs (Python tokenizer: no tf.data pipeline before training's,
        whose in-graph tokenizer resources must live for the whole run)."""
        rows = [tokenizer.pack(e.text_a, e.text_b, seq_length=self.budget.max_seq_length) for e in self.train[:n]]
        return {k: np.stack([r[k] for r in rows]) for k in rows[0]}

    def _dataset(self, examples, tokenizer, order, labels):
        """Batches of `order`'s examples packed in tf.data (with their labels when `labels`)."""
        a, b, gold = self._columns(examples)
        budget = self.budget
        return pack_dataset(tokenizer, budget.max_seq_length, a, b, gold if labels else None, order,
                            budget.batch_size, length_bucket=budget.length_bucket)

    def train_dataset(self, tokenizer, order):
        return self._dataset(self.train, tokenizer, order, labels=True)

    def evaluate(self, model, tokenizer):
        """{dev split: official metrics}."""
        results = {}
        for split, examples in self.dev.items():
            labels = self._columns(examples)[2]
            batches = self.dev_batches(split, tokenizer, lambda order, examples=examples: self._dataset(
                examples, tokenizer, order, labels=False), len(examples))
            logits = predict_in_order(model, batches, len(examples))
            predictions = logits[:, 0] if self.regression else logits.argmax(-1)
            results[split] = {k: float(v) for k, v in glue.compute_metrics(self.spec, predictions,
                                                                                 labels).items()}
        return results

    def chance_reference(self):
        """(the first dev split's majority-class rate, number of labels) when the task reports accuracy, else
        None (regression, CoLA's MCC only)."""
        if self.regression or "accuracy" not in self.spec.metrics:
            return None
        labels = np.array([e.label for e in next(iter(self.dev.values()))], np.int64)
        if not len(labels):
            return None
        return float(np.bincount(labels).max() / len(labels)), self.spec.num_labels

    def export(self, model, tokenizer, results, output_base):  # pylint: disable=unused-argument
        """OUT/export/N: raw text in (see `export_classifier`). Returns the path."""
        return export_classifier(model, tokenizer, self.budget.max_seq_length, self.pairs, self.regression,
                                 output_base, task=self.task)
