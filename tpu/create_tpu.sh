#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Creates a Cloud TPU v3 VM (v3-8, one host) or pod slice (v3-32 ... v3-512, 8 cores per host) with TensorFlow's
# TPU runtime image, then installs albert_tf on every host (tpu/install.sh).
#
# Usage: tpu/create_tpu.sh --name NAME --zone ZONE --type v3-8|v3-32|v3-64|v3-128|v3-256|v3-512
#                          [--spot] [--image VERSION] [--project P] [--no-install] [--dry-run]
#   --image     the runtime image (default tpu-vm-tf-2.18.0-pjrt for v3-8, tpu-vm-tf-2.18.0-pod-pjrt for slices;
#               TF_IMAGE_VERSION=2.x.y changes the TensorFlow version in both)
#   --spot      Spot capacity: cheaper, preemptible at any time; tpu/resume_loop.sh recreates it and resumes
#   --dry-run   print the gcloud commands instead of running them

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" IMAGE="" SPOT=0 NO_INSTALL=0
parse_flags "name zone type image spot! no-install!" "$@"
require --name "$NAME"
require --zone "$ZONE"
require --type "$TYPE"
check_type "$TYPE"
region_of "$ZONE" >/dev/null
IMAGE=${IMAGE:-$(image_for "$TYPE")}

note "$TYPE: $(( ${TYPE#v3-} )) cores on $(hosts_of "$TYPE") host(s), image $IMAGE"
args=(compute tpus tpu-vm create "$NAME" "--zone=$ZONE" "--accelerator-type=$TYPE" "--version=$IMAGE")
if [[ $SPOT == 1 ]]; then args+=(--spot); fi
gcloud_cmd "${args[@]}"

if [[ $NO_INSTALL == 0 ]]; then
  install_args=(--name "$NAME" --zone "$ZONE")
  if [[ -n $PROJECT ]]; then install_args+=(--project "$PROJECT"); fi
  if [[ $DRY_RUN == 1 ]]; then install_args+=(--dry-run); fi
  "$HERE/install.sh" "${install_args[@]}"
fi
