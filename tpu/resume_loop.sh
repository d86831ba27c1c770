#!/usr/bin/env bash
# Keeps a (spot) TPU run going: relaunches after a preemption, recreating the VM if it is gone, until the
# final checkpoint (ckpt-NUM_TRAIN_STEPS) is in the model dir.
# Usage: tpu/resume_loop.sh NAME ZONE ACCELERATOR_TYPE GS_ROOT CONFIG [NUM_TRAIN_STEPS]
set -uo pipefail
if [[ $# -lt 5 ]]; then
  echo "usage: $0 NAME ZONE ACCELERATOR_TYPE gs://BUCKET/PATH CONFIG [NUM_TRAIN_STEPS]" >&2; exit 2
fi
NAME=$1 ZONE=$2 TYPE=$3 ROOT=$4 CONFIG=$5 STEPS=${6:-125000}
HERE=$(cd "$(dirname "$0")" && pwd)
until gcloud storage ls "$ROOT/models/$CONFIG/ckpt-$STEPS.index" >/dev/null 2>&1; do
  state=$(gcloud compute tpus tpu-vm describe "$NAME" --zone "$ZONE" --format='value(state)' 2>/dev/null || echo MISSING)
  if [[ "$state" != "READY" ]]; then
    gcloud compute tpus tpu-vm delete "$NAME" --zone "$ZONE" --quiet >/dev/null 2>&1 || true
    "$HERE/create_tpu.sh" "$NAME" "$ZONE" "$TYPE" --spot || { sleep 300; continue; }
  fi
  "$HERE/launch_pretrain.sh" "$NAME" "$ZONE" "$ROOT" "$CONFIG" --num-train-steps "$STEPS" || sleep 60
done
echo "done: $ROOT/models/$CONFIG/ckpt-$STEPS"
