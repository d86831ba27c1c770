"""The defaults that several commands' settings share, each written once here (tests/test_defaults.py fails on a
default written a second time anywhere in albert_tf/). No TensorFlow.

    PAPER               the ALBERT paper's pretraining: `pretrain`'s defaults and its paper_v1 / paper_v2 recipes;
                        create-data's sequence length and masked positions, the keeper's last step follow it
    MASKED_LM_PROB      the fraction of a sequence's tokens masked (create-data; pretrain's --dynamic-masking)
    NGRAM               the longest masked n-gram, in whole words (create-data; dynamic masking)
    SEED                every command's default seed
    MFU                 the fraction of the peak FLOP/s a plan assumes
"""

#: Lan et al., 2020, §4.1, and the v2 release: global batch 4096, LAMB learning rate 0.00176, 125,000 steps with
#: 3,125 warm-up steps, sequences of 512 tokens with 20 masked positions.
PAPER = {"batch_size": 4096, "learning_rate": 0.00176, "num_train_steps": 125000, "num_warmup_steps": 3125,
         "max_seq_length": 512, "max_predictions": 20}
MASKED_LM_PROB = 0.15  # the original create_pretraining_data.py's masked_lm_prob
NGRAM = 3  # the original's ngram (paper §4.1: n-gram masking, n <= 3)
SEED = 12345  # the original tools' random_seed
MFU = 0.5  # plan's assumed fraction of the peak FLOP/s sustained (a large model on TPU; measured MFU replaces it)

__all__ = ["PAPER", "MASKED_LM_PROB", "NGRAM", "SEED", "MFU"]
