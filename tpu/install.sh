#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Installs albert_tf on every host of a TPU VM or pod slice (gcloud ... ssh --worker=all) and checks that each host
# imports it (it prints the albert_tf and TensorFlow versions of each host).
#
# Usage: tpu/install.sh --name NAME --zone ZONE [--project P] [--dry-run]
#   The install command is $INSTALL_CMD, by default: pip install "albert_tf @ $ALBERT_TF_SOURCE" and
#   tensorflow-text of the image's release with --no-deps (the image's TPU TensorFlow is kept)
#   (set ALBERT_TF_SOURCE to a git URL or a wheel, or INSTALL_CMD to a whole command).

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE=""
parse_flags "name zone" "$@"
require --name "$NAME"
require --zone "$ZONE"
if [[ $DRY_RUN == 0 && $INSTALL_CMD == *github.com/OWNER/* ]]; then
  die "set ALBERT_TF_SOURCE (a git URL or a wheel) or INSTALL_CMD: the default source is a placeholder"
fi

CHECK="python3 -c 'import albert_tf, tensorflow as tf; print(\"albert_tf\", albert_tf.__version__, \"tensorflow\", tf.__version__)'"
gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=all --command "$INSTALL_CMD && $CHECK"
