"""Fine-tuning tasks' data: the official files, featurization and the official metrics.

  glue    GLUE's TSVs (cola sst2 mrpc stsb qqp mnli qnli rte wnli) and their metrics
  squad   SQuAD v1.1 / v2.0 JSON, sliding windows with character offsets, answer extraction, exact / F1
  race    RACE's JSON files, the option pairing, accuracy per level
  metrics accuracy, F1, MCC, Pearson, Spearman in numpy

Pure Python + numpy (+ sentencepiece through AlbertTokenizer); no TensorFlow import.
"""
