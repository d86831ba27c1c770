"""Serving: SavedModels for TF Serving that take raw text (loading one back into Keras: albert_tf.checkpoints.load).

    saved_model     BASE/N written atomically (TF Serving's layout), assets.extra/, warm-up records
    signatures      the encoder's signatures (serving_default / text / encode) and the in-graph text packing
    encoder_export  the encoder's export, the work of `albert-tf export` (export_encoder); loading one back is
                    albert_tf.checkpoints.load.load_encoder

The fine-tuned tasks' exports live with their tasks: albert_tf.tasks.glue.classifier_export (the classifier),
tasks.squad.squad_export, tasks.race.race_export; a notebook's classifier: albert_tf.tasks.task_model_export.
"""
