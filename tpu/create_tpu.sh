#!/usr/bin/env bash
# Creates a TPU VM or pod slice and installs albert_tf on every host.
# Usage: tpu/create_tpu.sh NAME ZONE ACCELERATOR_TYPE [extra gcloud flags, e.g. --spot]
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 NAME ZONE ACCELERATOR_TYPE [--spot ...]" >&2; exit 2
fi
NAME=$1 ZONE=$2 TYPE=$3; shift 3
# TPU VM images with TensorFlow's TPU runtime: tpu-vm-tf-2.x-pjrt (v4 and later: tpu-vm-tf-2.x-pod-pjrt for pods).
VERSION=${TPU_SOFTWARE_VERSION:-tpu-vm-tf-2.18.0-pjrt}
gcloud compute tpus tpu-vm create "$NAME" --zone "$ZONE" --accelerator-type "$TYPE" --version "$VERSION" "$@"
PACKAGE=${ALBERT_TF_PACKAGE:-albert_tf}     # a wheel on gs:// or a git URL works too
gcloud compute tpus tpu-vm ssh "$NAME" --zone "$ZONE" --worker=all --command \
  "pip install --upgrade '$PACKAGE'"
