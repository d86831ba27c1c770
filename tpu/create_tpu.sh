#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Creates a Cloud TPU v3 VM (v3-8, one host) or pod slice (v3-32 ... v3-2048, 8 cores per host) with TensorFlow's
# TPU runtime image, then installs albert_tf on worker 0 (tpu/install.sh).
#
# Usage: tpu/create_tpu.sh --name NAME --zone ZONE --type v3-8|v3-32|v3-64|v3-128|v3-256|v3-512|v3-1024|v3-2048
#                          [--spot | --preemptible | --reserved] [--image VERSION] [--project P] [--no-install]
#                          [--dry-run]
#   --image        the runtime image (default tpu-vm-tf-2.18.0-pjrt for v3-8, tpu-vm-tf-2.17.1-pod-pjrt for slices:
#                  albert_tf/cloud/images.py, each default with its Google source)
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

note "$TYPE: $(( ${TYPE#v3-} )) cores on $(hosts_of "$TYPE") host(s), image $IMAGE"
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
