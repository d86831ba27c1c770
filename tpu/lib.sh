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

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# TensorFlow's TPU VM runtime images are named tpu-vm-tf-X.Y.Z[-pod][-pjrt|-se] (Cloud TPU "TPU software versions"
# page): "-pod" for a multi-host slice, "-pjrt" for the PJRT device API. The defaults come from one table, each name
# with its Google source (albert_tf/cloud/images.py); any other image is given with --image.
# `gcloud compute tpus versions list --zone=ZONE` lists what a zone offers.
# What worker 0 installs (tpu/install.sh, and tpu/launch_pretrain.sh when albert_tf is missing there): the package
# from ALBERT_TF_SOURCE, which pip installs from a git URL (git+https://...) or an https:// wheel; a gs:// wheel is
# copied to worker 0 first (`gcloud storage cp`: pip does not read gs://). Or a whole command in INSTALL_CMD.
ALBERT_TF_SOURCE=${ALBERT_TF_SOURCE:-git+https://github.com/OWNER/albert_tf.git}
# The Python of the TPU hosts, and the CLI as they call it: `python3 -m albert_tf` needs no console script on PATH
# (pip --user puts `albert-tf` in ~/.local/bin, which a non-interactive ssh shell may not have).
ALBERT_TF_PYTHON=${ALBERT_TF_PYTHON:-python3}
ALBERT_TF=${ALBERT_TF:-$ALBERT_TF_PYTHON -m albert_tf}
# Where a run lives on worker 0 (relative to the ssh user's home): tpu/on_worker.sh, the log, the run's lock.
# shellcheck disable=SC2034  # read by the scripts that source this file
RUN_DIR=albert_tf_run
# shellcheck disable=SC2034
WORKER_SCRIPT=$RUN_DIR/on_worker.sh
# shellcheck disable=SC2034
WORKER_SCRIPT_COPY=albert_tf_on_worker.sh  # where `tpu-vm scp` puts it first
WHEEL_DIR=albert_tf_wheel  # where a gs:// wheel is copied on worker 0 before pip installs it

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

# package_python ARGS: this checkout's Python package, asked for what it knows (topologies, images, file names), so
# that no script re-types them.
package_python() {
  PYTHONPATH="$LIB_DIR/..${PYTHONPATH:+:$PYTHONPATH}" "${ALBERT_TF_PYTHON_HERE:-python3}" "$@"
}

# check_type TYPE: a slice of the package's device table (albert_tf/runtime/devices.py), or the table's one line
# (the valid sizes, or why a generation is refused).
check_type() {
  local problem
  problem=$(package_python -m albert_tf.runtime.devices "$1" 2>&1 >/dev/null) || die "--type ${problem#error: }"
}

# slice_of TYPE: "DEVICES HOSTS" of a slice, from the device table (one host is a "TPU VM", more a pod slice).
slice_of() {
  package_python -m albert_tf.runtime.devices "$1" || die "--type $1: not a slice of the device table"
}

# hosts_of TYPE: the hosts of a slice, from the device table.
hosts_of() {
  local devices_hosts
  devices_hosts=$(slice_of "$1") || exit
  echo "${devices_hosts#* }"
}

# image_for TYPE: the default runtime image of TYPE, from albert_tf/cloud/images.py (run from this checkout).
image_for() {
  package_python -c 'import sys; from albert_tf.cloud import images; print(images.default_image_for(sys.argv[1]))' "$1"
}

# tensorflow_release IMAGE: "2.18" for tpu-vm-tf-2.18.0-pjrt; the single-host default's for another name.
tensorflow_release() {
  local image=$1
  [[ $image =~ ^tpu-vm-tf-([0-9]+)\.([0-9]+)\. ]] ||
    image=$(package_python -c 'from albert_tf.cloud import images; print(images.default_image(1))')
  [[ $image =~ ^tpu-vm-tf-([0-9]+)\.([0-9]+)\. ]]
  echo "${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
}

# install_command [IMAGE]: the command that installs albert_tf on worker 0: $INSTALL_CMD, or pip installing albert_tf from ALBERT_TF_SOURCE
# with the Cloud TPU API client that TPUClusterResolver(tpu=NAME) imports (the [cloud-tpu] extra), then
# tensorflow-text of the image's release without its dependencies (they would pull the CPU tensorflow wheel over
# the image's TPU TensorFlow). With the placeholder source a real run gets a command that fails saying so.
install_command() {
  if [[ -n ${INSTALL_CMD:-} ]]; then printf '%s' "$INSTALL_CMD"; return; fi
  local source=$ALBERT_TF_SOURCE fetch="" requirement pip
  if [[ $DRY_RUN == 0 && $source == *github.com/OWNER/* ]]; then
    printf 'echo %s >&2 && false' \
      "$(quote "albert_tf is not installed on worker 0; set ALBERT_TF_SOURCE (a git URL or a wheel) or INSTALL_CMD")"
    return
  fi
  # A credential in the URL (user:token@) would be on gcloud's command line, which gcloud's own logs keep
  # (~/.config/gcloud/logs): refused. The keeper copies its launch to worker 0 in a private file instead.
  if [[ $source =~ ^[A-Za-z+]+://[^/]*@ ]]; then
    die "ALBERT_TF_SOURCE ${source%%://*}://...@${source#*@}: a credential in the URL would be on gcloud's command" \
        "line and in gcloud's logs; expected a URL without one: a gs:// wheel (worker 0 reads it with its service" \
        "account), or albert-tf keep-alive, which copies the install to worker 0 in a private file"
  fi
  case $source in
    git+https://*|https://*.whl) requirement="albert_tf[cloud-tpu] @ $source" ;;
    gs://*.whl)
      fetch="$(join_quoted mkdir -p "$WHEEL_DIR") && $(join_quoted gcloud storage cp "$source" "$WHEEL_DIR/") && "
      requirement="./$WHEEL_DIR/${source##*/}[cloud-tpu]" ;;
    *) die "ALBERT_TF_SOURCE $source: expected a git URL (git+https://...), an https:// wheel or a gs:// wheel" \
         "(.whl)" ;;
  esac
  pip=$(join_quoted "$ALBERT_TF_PYTHON" -m pip install)
  printf '%s%s %s && %s --no-deps %s' "$fetch" "$pip" "$(quote "$requirement")" "$pip" \
    "$(quote "tensorflow-text==$(tensorflow_release "${1:-}").*")"
}

# Exits 0 when albert_tf imports on the host, without loading the TPU runtime (a running job holds the TPU).
install_check() {
  printf 'TPU_LOAD_LIBRARY=0 %s -c %s' "$(quote "$ALBERT_TF_PYTHON")" "$(quote 'import albert_tf')"
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
  local spec=" ${1//$'\n'/ } project " flag var
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
