#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Creates a Cloud TPU VM (one host) or pod slice of a generation of the device table (albert_tf/runtime/devices.py:
# `python -m albert_tf.runtime.devices TYPE` prints its devices and hosts) with TensorFlow's TPU runtime image, then
# installs albert_tf on worker 0 (tpu/install.sh).
#
# Usage: tpu/create_tpu.sh --name NAME --zone ZONE --type TYPE (as Google names the accelerator: v3-8, v4-32, ...)
#                          [--spot | --preemptible | --reserved] [--image VERSION] [--project P] [--no-install]
#                          [--dry-run]
#   --image        the runtime image (default: albert_tf/cloud/images.py's fixed image for the generation and for
#                  one host or a pod, each with its public source; `gcloud compute tpus tpu-vm versions list
#                  --zone=ZONE` lists what the zone offers)
#   --spot         Spot capacity: cheaper, preemptible at any time; tpu/keep_alive.sh recreates it and resumes
#   --preemptible  the older preemptible capacity (at most 24 hours)
#   --reserved     capacity from the project's reservation
#   (none of the three: on-demand)
#   --dry-run      print the gcloud commands instead of running them

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" IMAGE="" SPOT=0 PREEMPTIBLE=0 RESERVED=0 NO_INSTALL=0
parse_flags "name zone type image spot! preemptible! reserved! no-install!" "$@"
require --name "$NAME"
require --zone "$ZONE"
require --type "$TYPE"
check_type "$TYPE"
region_of "$ZONE" >/dev/null
IMAGE=${IMAGE:-$(image_for "$TYPE")}
[[ $((SPOT + PREEMPTIBLE + RESERVED)) -le 1 ]] || die "--spot, --preemptible and --reserved: one at most"

read -r devices hosts <<<"$(slice_of "$TYPE")"
note "$TYPE: $devices TensorFlow devices on $hosts host(s), image $IMAGE"
args=(compute tpus tpu-vm create "$NAME" "--zone=$ZONE" "--accelerator-type=$TYPE" "--version=$IMAGE")
if [[ $SPOT == 1 ]]; then args+=(--spot); fi
if [[ $PREEMPTIBLE == 1 ]]; then args+=(--preemptible); fi
if [[ $RESERVED == 1 ]]; then args+=(--reserved); fi
gcloud_cmd "${args[@]}"

if [[ $NO_INSTALL == 0 ]]; then
  install_args=(--name "$NAME" --zone "$ZONE")
  if [[ -n $PROJECT ]]; then install_args+=(--project "$PROJECT"); fi
  if [[ $DRY_RUN == 1 ]]; then install_args+=(--dry-run); fi
  "$HERE/install.sh" "${install_args[@]}"
fi
