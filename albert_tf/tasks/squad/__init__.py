"""SQuAD v1.1 / v2.0.

    data          the official JSON files (read_examples) and the Python featurizer (featurize, features_to_arrays)
    scoring       answers from the n-best spans (postprocess) and the official exact / F1 (evaluate)
    in_graph      the same featurization and answer extraction in TensorFlow (fine-tuning's tf.data, the export)
    squad_export  the raw-text SavedModel (question, context -> answer)
    finetune      the adapter `albert-tf finetune --task squad1|squad2` runs

`from albert_tf.tasks import squad` gives the Python side (no TensorFlow import).
"""
from albert_tf.tasks.squad.data import (SquadExample, SquadFeature, check_window_sizes, doc_windows, featurize,
                                        features_to_arrays, max_context_windows, read_examples,
                                        training_answer_span)
from albert_tf.tasks.squad.scoring import (MAX_ANSWER_LENGTH, N_BEST, SquadPredictions, evaluate, exact_match, f1_score,
                                           normalize_answer, postprocess)
