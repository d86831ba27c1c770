"""Weights on disk: the pretrained-model directory, loading any handle, and conversion in and out.

    pretrained    the pretrained-model directory (albert_config.json, TF checkpoints, spm.model): save, restore,
                  the checks a run makes before writing into one
    handles       what a handle is (a model directory, an export, a release's name, hf:OWNER/NAME, a Hugging Face
                  directory) and its weights read into a model: every `from_pretrained` and `--init`
    load          load_model / load_encoder / load_pretrained: the model a handle holds, in one call
    convert       `albert-tf convert`: Google's TF1 / TF-Hub checkpoints and Hugging Face directories → a
                  pretrained-model directory
    releases      Google's released weights by name, downloaded, checked and cached
    tensors       checkpoint tensors by name: Google's and Hugging Face's names → our variables
    export_to     `albert-tf convert --to hf|keras-hub`
    to_hf, to_keras_hub   the directories it writes for transformers and for keras-hub
    hf_tokenizer  Hugging Face tokenizer files of a SentencePiece vocabulary, and the vocabulary back from
                  tokenizer.json (no TensorFlow)
"""
