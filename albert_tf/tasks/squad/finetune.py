"""Fine-tuning SQuAD v1.1 / v2.0: start and end logits over the windows."""
import os

import keras
import tensorflow as tf

from albert_tf.modeling.span_qa import AlbertSpanQA
from albert_tf.tasks import squad
from albert_tf.tasks.base import FinetuneTask
from albert_tf.tasks.pipelines import array_dataset, predict_in_order
from albert_tf.tasks.squad.squad_export import export_squad
from albert_tf.tasks.squad.in_graph import featurize_squad


class SquadFinetune(FinetuneTask):
    """SQuAD v1.1 / v2.0: start and end logits over the windows (doc stride 128, max query 64); answers from the
    n-best (`squad.N_BEST`) spans of at most `squad.MAX_ANSWER_LENGTH` tokens; v2's no-answer threshold chosen on
    dev (best_f1_thresh)."""

    def __init__(self, data_dir, task):
        self.v2 = task == "squad2"
        version = "v2.0" if self.v2 else "v1.1"
        paths = {split: os.path.join(data_dir, f"{split}-{version}.json") for split in ("train", "dev")}
        for path in paths.values():
            if not tf.io.gfile.exists(path):
                raise FileNotFoundError(f"--data-dir {data_dir}: no {os.path.basename(path)} (SQuAD "
                                        f"{version}'s official file names)")
        self.train = squad.read_examples(paths["train"], version_2_with_negative=self.v2)
        self.dev = {"dev": squad.read_examples(paths["dev"], version_2_with_negative=self.v2)}
        self.primary_metric = "best_f1" if self.v2 else "f1"
        self._cache = {}

    def _features(self, name, examples, tokenizer, max_seq_length, is_training):
        """The windows of `max_seq_length` tokens, featurized once per split in tf.data by the export's in-graph
        tokenizer (`squad.in_graph.featurize_squad`, equal to `squad.featurize`), and their stacked arrays."""
        if name not in self._cache:
            features = featurize_squad(examples, tokenizer, max_seq_length=max_seq_length,
                                       is_training=is_training, **self.window_sizes(max_seq_length))
            self._cache[name] = (features, squad.features_to_arrays(features, is_training=is_training))
        return self._cache[name]

    def _train(self, tokenizer):
        """The training windows' arrays at the budget's sequence length."""
        return self._features("train", self.train, tokenizer, self.budget.max_seq_length, True)[1]

    @staticmethod
    def window_sizes(max_seq_length):
        """doc_stride 128 and max_query_length 64, at most half the sequence."""
        return {"doc_stride": min(128, max_seq_length // 2), "max_query_length": min(64, max_seq_length // 2 - 4)}

    def num_train(self, tokenizer, max_seq_length):
        return len(self._features("train", self.train, tokenizer, max_seq_length, True)[0])

    def build_model(self, encoder):
        return AlbertSpanQA(encoder, version_2_with_negative=self.v2)

    def loss_and_metrics(self):
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"start_logits": loss, "end_logits": loss}, []

    def sample_inputs(self, tokenizer, n):
        arrays = self._train(tokenizer)
        return {k: arrays[k][:n] for k in ("input_word_ids", "input_mask", "input_type_ids")}

    def train_dataset(self, tokenizer, order):
        arrays = dict(self._train(tokenizer))
        labels = {"start_logits": arrays.pop("start_positions"), "end_logits": arrays.pop("end_positions")}
        return array_dataset(arrays, labels, order, self.budget.batch_size, self.budget.length_bucket)

    def evaluate(self, model, tokenizer):
        examples = self.dev["dev"]
        features, arrays = self._features("dev", examples, tokenizer, self.budget.max_seq_length, False)
        # At full length (no length_bucket): predict stacks the per-window logits [B, L] of every batch.
        batches = self.dev_batches("dev", tokenizer, lambda order: array_dataset(arrays, None, order,
                                                                                  self.budget.batch_size),
                                   len(features))
        logits = predict_in_order(model, batches, len(features))
        predictions = squad.postprocess(examples, features, logits["start_logits"], logits["end_logits"],
                                        version_2_with_negative=self.v2)
        if self.v2:
            result = squad.evaluate(examples, predictions.best_span_answers, na_probs=predictions.null_score_diff,
                                    na_prob_thresh=0.0, version_2_with_negative=True)
        else:
            result = squad.evaluate(examples, predictions.answers)
        return {"dev": {k: float(v) for k, v in result.items()}}

    def export(self, model, tokenizer, results, output_base):
        """OUT/export/N: question and context in, the answer out (albert_tf.tasks.squad.squad_export); v2 keeps the dev
        set's best_f1_thresh as its no-answer threshold. Returns the path."""
        threshold = results["dev"]["best_f1_thresh"] if self.v2 else 0.0
        seq = self.budget.max_seq_length
        return export_squad(model, tokenizer, output_base, seq, version_2_with_negative=self.v2,
                            null_score_diff_threshold=threshold, **self.window_sizes(seq))
