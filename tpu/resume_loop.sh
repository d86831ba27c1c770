#!/usr/bin/env bash
# The keeper's former name: runs tpu/keep_alive.sh with the same flags (see its --help).
exec "$(dirname "$0")/keep_alive.sh" "$@"
