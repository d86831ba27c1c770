"""albert_tf: ALBERT pretraining, fine-tuning and serving with Keras 3 and TensorFlow.

Public API:
  AlbertConfig                       the original albert_config.json, validated
  AlbertEncoder, AlbertPretrainer    Keras models (inputs/outputs named as in TF-Hub BERT)
  AlbertTokenizer                    normalization + SentencePiece, Python and in-graph
  AlbertClassifier, AlbertSpanQA,    task models for fine-tuning with model.fit (classification/regression,
  AlbertMultipleChoice               SQuAD span QA, RACE multiple choice)
  AlbertPreprocessor                 raw text → model inputs in the graph (a Keras layer; task models take it)
  export_task_model                  a classifier trained in a notebook → its raw-text SavedModel (finetune's)
  data.pretraining_dataset           the tf.data input for pretraining
  load_pretrained                    the model any handle holds: a model dir, an export, a release name, an HF dir
  load_encoder                       a trainable AlbertEncoder from any of them
  load_export                        an `albert-tf export` SavedModel (BASE or BASE/N), TF Text's ops registered
  convert_release                    Google's released weights by name ("albert_base_v2") → a pretrained-model dir
  one call per command (albert_tf/jobs/): vocab(VocabConfig) → VocabResult, create_data, pretrain, finetune,
  convert, plan, export, quickstart: each as `albert-tf COMMAND` runs it
"""
import importlib

from albert_tf import jobs
from albert_tf.runtime import requirements, xla_flags

__version__ = "0.1.0"

# Before anything is compiled: XLA:CPU's YNNPACK fusions crash when one kernel runs on two threads at once (see
# albert_tf/runtime/xla_flags.py).
xla_flags.disable_ynn_fusions()
# TensorFlow comes from an extra or from the machine (a TPU VM's): if it is missing, `import tensorflow` says what to
# install (see albert_tf/runtime/requirements.py).
requirements.install_import_hint()

_LAZY = {
    "AlbertConfig": "albert_tf.config",
    "configs_dir": "albert_tf.config",
    "AlbertEncoder": "albert_tf.modeling.encoder",
    "AlbertPretrainer": "albert_tf.modeling.pretrainer",
    "AlbertTokenizer": "albert_tf.text",
    "load_encoder": "albert_tf.checkpoints.load",
    "load_pretrained": "albert_tf.checkpoints.load",
    "load_export": "albert_tf.serving.saved_model",
    "convert_release": "albert_tf.checkpoints.convert",
    "AlbertClassifier": "albert_tf.modeling.classifier",
    "AlbertSpanQA": "albert_tf.modeling.span_qa",
    "AlbertMultipleChoice": "albert_tf.modeling.multiple_choice",
    "AlbertPreprocessor": "albert_tf.modeling.preprocessor",
    "export_task_model": "albert_tf.tasks.task_model_export",
    **jobs.public_names(),  # every job's call, config and result: albert_tf.pretrain(PretrainConfig(...)), ...
}


def __getattr__(name):  # PEP 562: import heavy modules only when used
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = sorted(_LAZY) + ["__version__"]
