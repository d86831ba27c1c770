#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Deletes a TPU VM or pod slice (billing stops; the bucket and its checkpoints stay).
#
# Usage: tpu/delete_tpu.sh --name NAME --zone ZONE [--project P] [--dry-run]

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE=""
parse_flags "name zone" "$@"
require --name "$NAME"
require --zone "$ZONE"
gcloud_cmd compute tpus tpu-vm delete "$NAME" "--zone=$ZONE" --quiet
