"""Weights on disk: the pretrained-model directory and the import of released checkpoints.

    pretrained    the pretrained-model directory (albert_config.json, TF checkpoints, spm.model): save, restore,
                  the checks a run makes before writing into one
    convert       `albert-tf convert`: Google's TF1 / TF-Hub checkpoints and Hugging Face directories → a
                  pretrained-model directory
"""
