"""ALBERT layers and models: keras.ops, with TensorFlow where Keras has no op (layers.py, the in-graph preprocessor)
and in the fused training kernels (tf_kernels, imported on the first fused call).

    layers, primitives, attention, feedforward, embedding   the building blocks
    fused, tf_kernels   fused elementwise chains of a block for training speed (custom gradients, XLA where it runs)
    preprocessor  AlbertPreprocessor: raw text → the model inputs, in the graph (the exports' tokenizer)
    encoder       AlbertEncoder (factorized embedding, shared groups of blocks, pooler)
    heads         the pretraining heads (masked LM tied to the word embeddings, sentence order)
    pretrainer    AlbertPretrainer = encoder + heads
    base          what every albert_tf Keras model shares (config serialization, from_pretrained)
    task_model    what the task models share; one task model per file:
    classifier    AlbertClassifier (GLUE)
    span_qa       AlbertSpanQA (SQuAD)
    multiple_choice  AlbertMultipleChoice (RACE)
"""
