#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Creates the Cloud Storage bucket for data, checkpoints and TensorBoard events in the TPU's region (a bucket in
# another region costs egress on every read and slows the input pipeline).
#
# Usage: tpu/create_bucket.sh --bucket gs://BUCKET --zone ZONE [--project P] [--dry-run]
#   --zone   the TPU's zone; the bucket's location is its region (europe-west4-a -> europe-west4)

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

BUCKET="" ZONE=""
parse_flags "bucket zone" "$@"
require --bucket "$BUCKET"
require --zone "$ZONE"
check_gs --bucket "$BUCKET"
[[ ${BUCKET#gs://} != */?* ]] || die "--bucket $BUCKET: expected a bucket (gs://NAME), not a path in one"
REGION=$(region_of "$ZONE")
gcloud_cmd storage buckets create "${BUCKET%/}" "--location=$REGION" --uniform-bucket-level-access
