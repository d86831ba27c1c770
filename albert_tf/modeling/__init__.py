"""ALBERT layers and models (keras.ops only).

    layers, fused, attention, feedforward, embedding   the building blocks
    encoder       AlbertEncoder (factorized embedding, shared groups of blocks, pooler)
    heads         the pretraining heads (masked LM tied to the word embeddings, sentence order)
    pretrainer    AlbertPretrainer = encoder + heads
    base          what every albert_tf Keras model shares (config serialization, from_pretrained)
    task_model    what the task models share; one task model per file:
    classifier    AlbertClassifier (GLUE)
    span_qa       AlbertSpanQA (SQuAD)
    multiple_choice  AlbertMultipleChoice (RACE)
"""
