"""RACE.

    data         the official download's JSON files (read_examples), the Python featurizer, accuracy per level
    in_graph     the same featurization in TensorFlow (fine-tuning's tf.data, the export)
    race_export  the raw-text SavedModel (article, question, options -> probabilities)
    finetune     the adapter `albert-tf finetune --task race` runs

`from albert_tf.tasks import race` gives the Python side (no TensorFlow import).
"""
from albert_tf.tasks.race.data import (LEVELS, NUM_CHOICES, SPLITS, RaceExample, check_qa_length, compute_metrics,
                                       featurize, read_examples)
