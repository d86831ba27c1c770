# shellcheck shell=bash
# Shared by the tpu/*.sh scripts (sourced, not run): flag helpers, dry-run printing, the facts every script uses.
#
# With --dry-run a script prints each command it would run, one per line, quoted so that the line can be pasted
# into a shell (and split by shlex), and runs none of them; lines starting with '#' are comments.

set -euo pipefail

if (( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 404 )); then
  echo "$(basename "$0"): error: needs bash 4.4 or newer, this is $BASH_VERSION (macOS: brew install bash)" >&2
  exit 2
fi

PROG=$(basename "$0")
DRY_RUN=0
PROJECT=""

# TensorFlow's TPU VM runtime images are named tpu-vm-tf-X.Y.Z[-pod][-pjrt|-se] (Cloud TPU "TPU software versions"
# page): "-pod" for a multi-host slice, "-pjrt" for the PJRT device API. 2.18.0 is the newest TensorFlow image the
# issue found documented; `gcloud compute tpus versions list --zone=ZONE` lists what a zone offers.
TF_IMAGE_VERSION=${TF_IMAGE_VERSION:-2.18.0}
# How every host installs albert_tf. The install stack (extras, pins) is decided with issue 11 items 1-3; override
# with INSTALL_CMD, or point ALBERT_TF_SOURCE at a git URL or a wheel on gs://.
ALBERT_TF_SOURCE=${ALBERT_TF_SOURCE:-git+https://github.com/OWNER/albert_tf.git}
# No TensorFlow extra: the image's TPU TensorFlow stays; tensorflow-text of the same release, without its
# dependencies (they would pull the CPU tensorflow wheel over the image's).
DEFAULT_INSTALL_CMD="pip install \"albert_tf @ ${ALBERT_TF_SOURCE}\" && pip install --no-deps \"tensorflow-text==${TF_IMAGE_VERSION%.*}.*\""
INSTALL_CMD=${INSTALL_CMD:-$DEFAULT_INSTALL_CMD}
# The CLI as the TPU hosts call it: `python3 -m albert_tf` needs no console script on PATH (pip --user puts
# `albert-tf` in ~/.local/bin, which a non-interactive ssh shell may not have).
ALBERT_TF=${ALBERT_TF:-python3 -m albert_tf}
V3_TYPES="v3-8 v3-32 v3-64 v3-128 v3-256 v3-512"
# Where a run lives on worker 0 (relative to the ssh user's home): tpu/on_worker.sh, the log, the run's lock.
# shellcheck disable=SC2034  # read by the scripts that source this file
RUN_DIR=albert_tf_run
# shellcheck disable=SC2034
WORKER_SCRIPT=$RUN_DIR/on_worker.sh
# shellcheck disable=SC2034
WORKER_SCRIPT_COPY=albert_tf_on_worker.sh  # where `tpu-vm scp` puts it first

die() {
  echo "$PROG: error: $*" >&2
  exit 2
}

# Prints one word so that a shell (or shlex) reads it back unchanged.
quote() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}

# run CMD ARGS...: prints the command with --dry-run, runs it otherwise.
run() {
  if [[ $DRY_RUN == 1 ]]; then
    join_quoted "$@"
    printf '\n'
  else
    "$@"
  fi
}

# note TEXT: a comment line with --dry-run, a message on stderr otherwise.
note() {
  if [[ $DRY_RUN == 1 ]]; then echo "# $*"; else echo "$PROG: $*" >&2; fi
}

# gcloud with --project when one was given.
gcloud_cmd() {
  if [[ -n $PROJECT ]]; then run gcloud "$@" "--project=$PROJECT"; else run gcloud "$@"; fi
}

# require NAME VALUE: dies naming the flag when VALUE is empty.
require() {
  [[ -n $2 ]] || die "$1 is required (see --help)"
}

# The value of a flag: dies when it is missing.
value_of() {
  [[ $# -ge 2 && -n $2 && $2 != --* ]] || die "$1 needs a value"
  printf '%s' "$2"
}

check_type() {
  local type
  for type in $V3_TYPES; do [[ $1 == "$type" ]] && return 0; done
  die "--type $1: expected one of $V3_TYPES"
}

# A v3-N slice has N cores on N/8 hosts; one host (v3-8) is a "TPU VM", more is a pod slice.
hosts_of() {
  echo $(( ${1#v3-} / 8 ))
}

image_for() {
  if [[ $(hosts_of "$1") -gt 1 ]]; then
    echo "tpu-vm-tf-${TF_IMAGE_VERSION}-pod-pjrt"
  else
    echo "tpu-vm-tf-${TF_IMAGE_VERSION}-pjrt"
  fi
}

# europe-west4-a -> europe-west4
region_of() {
  [[ $1 =~ ^[a-z]+-[a-z]+[0-9]+-[a-z]$ ]] || die "--zone $1: expected a zone such as europe-west4-a"
  echo "${1%-*}"
}

check_gs() {
  [[ $2 == gs://* ]] || die "$1 $2: expected a gs:// path (TPU hosts read and write Cloud Storage only)"
}

# usage TEXT: prints the script's help (its header comment) for --help.
usage() {
  sed -n '2,/^$/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"
}

# check_config CONFIG: a preset name or a gs:// file/directory (the TPU hosts do not have this machine's files).
check_config() {
  [[ $1 != */* || $1 == gs://* ]] || die "--config $1: expected a preset name (albert_base, ...) or a gs:// path"
}

# join_quoted WORD...: the words as one shell command line.
join_quoted() {
  local word sep=""
  for word in "$@"; do
    printf '%s' "$sep"
    quote "$word"
    sep=" "
  done
}

# parse_flags "SPEC" "$@": reads the script's flags into variables. SPEC lists them without dashes: "name" takes
# a value (--name X sets NAME=X, --model-dir X sets MODEL_DIR=X), "spot!" is a switch (--spot sets SPOT=1), and
# "--" lets the words after `--` through into the array EXTRA. --project, --dry-run and --help are always known.
# shellcheck disable=SC2034  # EXTRA is read by the scripts that source this file
parse_flags() {
  local spec=" $1 project " flag var
  shift
  EXTRA=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --dry-run) DRY_RUN=1; shift ;;
      -h|--help) usage; exit 0 ;;
      --)
        [[ $spec == *" -- "* ]] || die "unknown argument -- (see --help)"
        shift; EXTRA=("$@"); break ;;
      --*)
        flag=${1#--}
        var=${flag//-/_}
        var=${var^^}
        if [[ $spec == *" $flag! "* ]]; then
          printf -v "$var" 1; shift
        elif [[ $spec == *" $flag "* ]]; then
          printf -v "$var" '%s' "$(value_of "$@")"; shift 2
        else
          die "unknown argument $1 (see --help)"
        fi ;;
      *) die "unknown argument $1 (see --help)" ;;
    esac
  done
}
