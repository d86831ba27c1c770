"""Fine-tuning RACE: four (article, question + option) sequences per question, one logit each."""
import keras
import numpy as np
import tensorflow as tf

from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks import race
from albert_tf.tasks.base import FinetuneTask, accuracy_metrics
from albert_tf.tasks.pipelines import featurized_batches, predict_in_order
from albert_tf.tasks.race.race_export import export_race
from albert_tf.tasks.race.in_graph import race_inputs


def race_dataset(examples, tokenizer, seq_length, max_qa_length, order, batch_size, labels=True, length_bucket=0):
    """A tf.data pipeline of RACE batches: the examples `order` names (int64 [N], N a multiple of batch_size),
    featurized in-graph by `race.in_graph.race_inputs` (the export's featurizer, equal to `race.featurize`).

    Yields:
      (features, labels int32 [b]) or features: int32 [b, 4, L] input_word_ids, input_mask, input_type_ids; L =
      seq_length, or the batch's longest sequence rounded up to length_bucket.
    """
    articles = {}  # each article once: questions of one file share it
    article_index = np.asarray([articles.setdefault(e.article, len(articles)) for e in examples], np.int64)
    tables = {"article": tf.constant(list(articles)), "article_index": tf.constant(article_index),
              "question": tf.constant([e.question for e in examples]),
              "options": tf.constant([list(e.options) for e in examples]),
              "label": tf.constant([e.label for e in examples], tf.int32)}

    def featurize(index):
        article = tf.gather(tables["article"], tf.gather(tables["article_index"], index))
        features = race_inputs(tokenizer, article, tf.gather(tables["question"], index),
                                           tf.gather(tables["options"], index), seq_length, max_qa_length)
        return (features, tf.gather(tables["label"], index)) if labels else features

    return featurized_batches(tokenizer, order, batch_size, featurize, length_bucket)


class RaceFinetune(FinetuneTask):
    """RACE: four (article, question + option) sequences per question, one logit each (original layout)."""

    primary_metric = "accuracy"

    def __init__(self, data_dir, task):  # pylint: disable=unused-argument  (RACE is one task)
        self.train = race.read_examples(data_dir, "train")
        self.dev = {"dev": race.read_examples(data_dir, "dev")}

    def _dataset(self, examples, tokenizer, order, labels):
        """Batches of `order`'s examples featurized in tf.data by the export's in-graph tokenizer
        (`race.in_graph.race_inputs`, equal to `race.featurize`)."""
        budget = self.budget
        return race_dataset(examples, tokenizer, budget.max_seq_length, self.max_qa_length(budget.max_seq_length),
                            order, budget.batch_size, labels=labels, length_bucket=budget.length_bucket)

    def build_model(self, encoder):
        return AlbertMultipleChoice(encoder, race.NUM_CHOICES, dropout=self.budget.classifier_dropout)

    def loss_and_metrics(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True), accuracy_metrics()

    def sample_inputs(self, tokenizer, n):
        seq = self.budget.max_seq_length
        arrays = race.featurize(self.train[:n], tokenizer, max_seq_length=seq, max_qa_length=self.max_qa_length(seq))
        return {k: v for k, v in arrays.items() if k != "labels"}

    def train_dataset(self, tokenizer, order):
        return self._dataset(self.train, tokenizer, order, labels=True)

    def evaluate(self, model, tokenizer):
        batches = self.dev_batches("dev", tokenizer, lambda order: self._dataset(
            self.dev["dev"], tokenizer, order, labels=False), len(self.dev["dev"]))
        logits = predict_in_order(model, batches, len(self.dev["dev"]))
        return {"dev": {k: float(v) for k, v in race.compute_metrics(logits, self.dev["dev"]).items()}}

    def export(self, model, tokenizer, results, output_base):  # pylint: disable=unused-argument
        """OUT/export/N: article, question, options [B, 4] in (albert_tf.tasks.race.race_export). Returns the path."""
        seq = self.budget.max_seq_length
        return export_race(model, tokenizer, output_base, seq, max_qa_length=self.max_qa_length(seq))

    @staticmethod
    def max_qa_length(max_seq_length):
        """Tokens kept of each question + option (128, at most half the sequence)."""
        return min(128, max_seq_length // 2)
