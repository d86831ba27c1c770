"""`albert_tf.export_task_model`: the raw-text SavedModel of a task model trained in a notebook, with the signatures
and assets of `albert-tf finetune`'s exports (the classifier's: albert_tf.tasks.glue.classifier_export)."""
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks.glue.classifier_export import export_classifier


def export_task_model(model, output, pairs=True, tokenizer=None, seq_length=None, version=None, overwrite=False):
    """Writes OUTPUT/N (TF Serving's layout, atomically) for a fine-tuned AlbertClassifier: `serving_default`
    takes `text_a` (and, with `pairs`, an optional `text_b`: omitted or "" packs [CLS] a [SEP]) and returns
    `probabilities` [B, K] and `label` [B], or `score` [B] for a regression model (num_classes 1), exactly as
    `albert-tf finetune` exports a GLUE task.

    Args:
      model: an AlbertClassifier, with an AlbertPreprocessor (its tokenizer and seq_length are used) or with
        `tokenizer` and `seq_length` given.
      output: the export base (local or gs://); the version N is the next free one unless `version` is given.
      pairs: give the signature the optional `text_b` input (False: `text_a` only, as a single-sentence task's).
      tokenizer, seq_length: the AlbertTokenizer and packed length, for a model without a preprocessor.
      version, overwrite: N, and whether an existing N is replaced.
    Returns:
      the path written, OUTPUT/N: serve it, or `albert_tf.load_export(path).serving_default(text_a=...)`.
    """
    if not isinstance(model, AlbertClassifier):
        raise ValueError(f"export_task_model takes an AlbertClassifier, got {type(model).__name__} (SQuAD's and "
                         "RACE's raw-text exports come from `albert-tf finetune`)")
    preprocessor = model.preprocessor
    tokenizer = tokenizer or (preprocessor.tokenizer if preprocessor is not None else None)
    seq_length = seq_length or (preprocessor.seq_length if preprocessor is not None else None)
    if tokenizer is None or not seq_length:
        raise ValueError("export_task_model: the model has no AlbertPreprocessor; give tokenizer= and seq_length=")
    return export_classifier(model, tokenizer, int(seq_length), bool(pairs), model.num_classes == 1, output,
                             version=version, overwrite=overwrite)
