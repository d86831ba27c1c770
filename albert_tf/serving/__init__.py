"""Serving: SavedModels for TF Serving that take raw text, and the way back to Keras.

    saved_model    BASE/N written atomically (TF Serving's layout), assets.extra/, warm-up records
    signatures     the encoder's signatures (serving_default / text / encode) and the in-graph text packing
    encoder        `albert-tf export` (export_encoder) and load_encoder

The fine-tuned tasks' exports (classifier, SQuAD, RACE) live with their tasks: albert_tf.tasks.*.export.
"""
