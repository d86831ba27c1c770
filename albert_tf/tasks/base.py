"""What `albert-tf finetune` asks of a task: the one small interface the GLUE, SQuAD and RACE adapters implement
(albert_tf.tasks.{glue,squad,race}.finetune), so that `run` reads the same for every task.

An adapter is built as `Adapter(data_dir, task)`: the task's folder and its registered name
(albert_tf/settings/task_registry.py names the adapter class of each task; it reads the task's official files then).
It holds:
  train: list of training examples; dev: {split name: list of examples}; primary_metric: the dev metric that
  picks the best epoch (a key of `evaluate`'s result);
  budget: the run's albert_tf.tasks.budget.Budget, set by the run when it makes it (once: it depends on
  `num_train`), read by every method after that.
"""
import keras

from albert_tf.tasks.pipelines import in_order


def accuracy_metrics():
    """model.compile's metrics for a classification task: accuracy of integer labels against logits, as the metric
    object. Given the string "accuracy", Keras makes the metric and its variables while it traces the train step,
    and TensorFlow then traces the whole step a second time (a variable made in a trace): a third more CPU time
    for a short fine-tune."""
    return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]


class FinetuneTask:
    """Base class of the fine-tuning adapters. `self.budget` is the run's albert_tf.tasks.budget.Budget (batch size,
    sequence length, length bucket, dropout); `tokenizer` an AlbertTokenizer; `order` int64 [N] example indices."""

    primary_metric = "accuracy"
    budget = None  # the run's Budget, set once it is made (after num_train)

    def num_train(self, tokenizer, max_seq_length):  # pylint: disable=unused-argument
        """Training examples the model sees per epoch at `max_seq_length` tokens (what the budget is made from):
        one per example (SQuAD: one per window)."""
        return len(self.train)

    def build_model(self, encoder):
        """The task model (albert_tf.modeling) around `encoder`."""
        raise NotImplementedError

    def loss_and_metrics(self):
        """(loss, metrics) for model.compile (metrics as objects: `accuracy_metrics`), made in the strategy's
        scope."""
        raise NotImplementedError

    def sample_inputs(self, tokenizer, n):
        """The first n training examples' model inputs (numpy int32 [n, ..., L]), featurized in Python."""
        raise NotImplementedError

    def train_dataset(self, tokenizer, order):
        """tf.data batches (features, labels) of the examples `order` names, in that order."""
        raise NotImplementedError

    def evaluate(self, model, tokenizer):
        """{dev split: {metric: float}}, the task's official metrics."""
        raise NotImplementedError

    def dev_batches(self, split, tokenizer, make_dataset, num_examples):
        """The dev split's `num_examples` model examples (SQuAD: windows) in order, batched
        (`pipelines.in_order(make_dataset, ...)`), built once per (split, tokenizer, sequence length, batch size,
        length bucket) and kept: a run scores its dev set at every epoch's end and once more at its end, featurized
        (and the featurizer traced) only the first time."""
        budget = self.budget
        key = (split, tokenizer, budget.max_seq_length, budget.batch_size, budget.length_bucket)
        cache = self.__dict__.setdefault("_dev_batches", {})
        if key not in cache:
            cache[key] = in_order(make_dataset, num_examples, budget.batch_size)
        return cache[key]

    def chance_reference(self):
        """(majority-class rate of the first dev split, number of labels) for a classification task whose
        `evaluate` reports accuracy, else None: what a model that predicts one class scores (the collapse check,
        albert_tf.training.collapse.CollapseWatch)."""
        return None

    def export(self, model, tokenizer, results, output_base):
        """Writes OUTPUT_BASE/N, a raw-text SavedModel of the fine-tuned model; returns its path."""
        raise NotImplementedError
