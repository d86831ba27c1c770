#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Deletes a TPU VM or pod slice (billing stops; the bucket and its checkpoints stay).
#
# Usage: tpu/delete_tpu.sh --name NAME --zone ZONE [--project P] [--dry-run]

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --name) NAME=$(value_of "$@"); shift 2 ;;
    --zone) ZONE=$(value_of "$@"); shift 2 ;;
    --project) PROJECT=$(value_of "$@"); shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
require --name "$NAME"
require --zone "$ZONE"
gcloud_cmd compute tpus tpu-vm delete "$NAME" "--zone=$ZONE" --quiet
