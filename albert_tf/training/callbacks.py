"""`albert-tf finetune`'s per-epoch work, as a Keras callback."""
import os

import keras
import tensorflow as tf

from albert_tf.training.loop import write_scalar_summary


class EpochEnd(keras.callbacks.Callback):
    """At each epoch's end, in order: score the dev set with the task's official metric, keep the best model
    (managers["best"]), log to TensorBoard (OUTPUT/logs/{train,dev}) and stdout, checkpoint (managers["resume"]).

    Args:
      task: the FinetuneTask; tokenizer: its AlbertTokenizer; plan: the run's Plan.
      state: {"epoch", "best_value", "best_epoch"} tf.Variables, checkpointed with the run.
      managers: {"resume", "best"} tf.train.CheckpointManagers; output: the run's --output.
    """

    def __init__(self, task, tokenizer, plan, state, managers, output):
        super().__init__()
        self.task, self.tokenizer, self.plan = task, tokenizer, plan
        self.state, self.managers = state, managers
        self.writers = {name: tf.summary.create_file_writer(os.path.join(output, "logs", name))
                        for name in ("train", "dev")}

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.plan.steps_per_epoch
        results = self.task.evaluate(self.model, self.tokenizer, self.plan)
        value = next(iter(results.values()))[self.task.primary_metric]
        improved = value > float(self.state["best_value"].numpy())
        if improved:
            self.state["best_value"].assign(value)
            self.state["best_epoch"].assign(epoch + 1)
            self.managers["best"].save(checkpoint_number=epoch + 1)
        self._log(step, logs or {}, results)
        text = " ".join(f"{split}/{k}={v:.4f}" for split, m in results.items() for k, v in m.items())
        print(f"epoch {epoch + 1}/{self.plan.epochs} step {step}: loss={(logs or {}).get('loss', float('nan')):.4f} "
              f"{text}{' (best)' if improved else ''}", flush=True)
        self.state["epoch"].assign(epoch + 1)
        self.managers["resume"].save(checkpoint_number=epoch + 1)

    def _log(self, step, logs, results):
        with self.writers["train"].as_default(step=step):
            for name, v in logs.items():
                write_scalar_summary(name, float(v))
            write_scalar_summary("learning_rate", float(self.model.optimizer.learning_rate.numpy()))
        with self.writers["dev"].as_default(step=step):
            for split, metrics in results.items():
                for name, v in metrics.items():
                    write_scalar_summary(f"{split}/{name}", v)
        for writer in self.writers.values():
            writer.flush()
