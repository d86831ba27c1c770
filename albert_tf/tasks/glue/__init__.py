"""GLUE (cola sst2 mrpc stsb qqp mnli qnli rte wnli).

    data               the official TSV files (read_examples), each task's layout (SPECS: the task registry's
                       GLUE rows) and its metrics
    classifier_export  the raw-text classifier SavedModel (export_classifier)
    finetune           the adapter `albert-tf finetune --task <glue task>` runs

`from albert_tf.tasks import glue` gives the Python side (no TensorFlow import).
"""
from albert_tf.tasks.glue.data import SPECS, Example, GlueTask, compute_metrics, get_task, read_examples, task_file
