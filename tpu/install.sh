#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Installs albert_tf on worker 0 of a TPU VM or pod slice and prints the albert_tf and TensorFlow versions there.
# Worker 0 only: TensorFlow drives a pod slice from one client process on worker 0; the other hosts run the TPU
# runtime, which executes each host's input pipeline as graph ops, and import no albert_tf (tpu/README.md).
# tpu/launch_pretrain.sh also installs, when albert_tf is missing on worker 0; this script installs again (an upgrade).
#
# Usage: tpu/install.sh --name NAME --zone ZONE [--project P] [--dry-run]
#   The install command is $INSTALL_CMD, by default pip installing "albert_tf[cloud-tpu] @ $ALBERT_TF_SOURCE" (a git
#   URL, git+https://..., or an https:// wheel; a gs:// wheel is copied to worker 0 first, as pip cannot read
#   gs://) and tensorflow-text of the image's release with --no-deps (the image's TPU TensorFlow is kept).

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE=""
parse_flags "name zone" "$@"
require --name "$NAME"
require --zone "$ZONE"
if [[ $DRY_RUN == 0 && -z ${INSTALL_CMD:-} && $ALBERT_TF_SOURCE == *github.com/OWNER/* ]]; then
  die "set ALBERT_TF_SOURCE (a git URL or a wheel) or INSTALL_CMD: the default source is a placeholder"
fi
INSTALL=$(install_command "")  # no image known here: the single-host default's TensorFlow release
CHECK="TPU_LOAD_LIBRARY=0 $(join_quoted "$ALBERT_TF_PYTHON" -c \
  'import albert_tf, tensorflow as tf; print("albert_tf", albert_tf.__version__, "tensorflow", tf.__version__)')"
gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 --command "$INSTALL && $CHECK"
