#!/usr/bin/env bash
# Runs `albert-tf pretrain` on a TPU VM (one host: `--tpu local`) or a pod slice (POD=1: TensorFlow's single-client
# model, the script runs on worker 0 with `--tpu NAME` and drives every host through the TPU runtime).
# Usage: [POD=1] tpu/launch_pretrain.sh NAME ZONE GS_ROOT CONFIG [extra pretrain flags]
#   GS_ROOT holds records/train-*, records/eval-*, spm.model; the model dir is GS_ROOT/models/CONFIG.
# Re-running the same command resumes from the latest checkpoint (same learning rate, same data order).
set -euo pipefail
if [[ $# -lt 4 ]]; then
  echo "usage: $0 NAME ZONE gs://BUCKET/PATH CONFIG [extra albert-tf pretrain flags]" >&2; exit 2
fi
NAME=$1 ZONE=$2 ROOT=$3 CONFIG=$4; shift 4
case "$ROOT" in gs://*) ;; *) echo "$0: $ROOT: TPU hosts read gs:// only" >&2; exit 2;; esac
MODEL_DIR="$ROOT/models/$CONFIG"
EXTRA=$(printf " %q" "$@")
TPU_FLAG="--tpu local"
if [[ "${POD:-0}" == 1 ]]; then TPU_FLAG="--tpu $NAME"; fi
CMD="albert-tf pretrain $TPU_FLAG --config $CONFIG \
  --train-data '$ROOT/records/train-*' --eval-data '$ROOT/records/eval-*' \
  --model-dir $MODEL_DIR --spm-model $ROOT/spm.model \
  --max-seq-length 512 --max-predictions 20 --train-batch-size 4096 \
  --learning-rate 0.00176 --num-train-steps 125000 --num-warmup-steps 3125 \
  --steps-per-loop 1000 --save-checkpoints-steps 5000 --keep-checkpoint-max 5 $EXTRA \
  2>&1 | tee -a ~/pretrain.log"
gcloud compute tpus tpu-vm ssh "$NAME" --zone "$ZONE" --worker=0 --command "$CMD"
