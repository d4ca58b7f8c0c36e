# Sourced by .ci/run and tests/schemathesis.sh: how long each part of a run took.
#   timed <part> <command...>   runs the command, prints `timing: <part> <seconds>s` when it ends
#                               and returns the command's status
#   timings_summary             every part timed so far, and the time since this file was sourced
timings=""
timings_start=$SECONDS
timed() {
  local part=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  local took="${part} $((SECONDS - start))s"
  echo "timing: ${took}"
  timings+="  ${took}"$'\n'
  return "$status"
}
timings_summary() {
  echo "timings (whole run $((SECONDS - timings_start))s):"
  printf '%s' "$timings"
}
