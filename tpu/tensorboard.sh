#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# TensorBoard on this machine for a run's model dir on gs:// (train/ and eval/ scalars: masked_lm_accuracy,
# masked_lm_loss, sentence_order_accuracy, sentence_order_loss, learning_rate, examples_per_sec, mfu, ...).
# Needs `pip install tensorboard` (TensorFlow 2.21 no longer installs it) and gcloud credentials that read the bucket.
#
# Usage: tpu/tensorboard.sh (--model-dir gs://... | --root gs://BUCKET/PATH --config CONFIG) [--port 6006] [--dry-run]

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

ROOT="" CONFIG="" MODEL_DIR="" PORT=6006
parse_flags "root config model-dir port" "$@"
if [[ -z $MODEL_DIR ]]; then
  require --root "$ROOT"
  require --config "$CONFIG"
  MODEL_DIR=${ROOT%/}/models/$(basename "${CONFIG%.json}")
fi
check_gs --model-dir "$MODEL_DIR"
run tensorboard --logdir "$MODEL_DIR" --port "$PORT"
