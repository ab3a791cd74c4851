# Sourced by the results scripts: run a shell function over items, $JOBS at a time.
# (Two runs side by side, one CPU thread each, keep the 2 cores of these machines busy without
# oversubscribing them.)

in_parallel() {  # FUNCTION ITEM...: call FUNCTION ITEM for every item, JOBS at a time
  local f=$1; shift
  local pids=()
  for item in "$@"; do
    "$f" "$item" & pids+=($!)
    if [ "${#pids[@]}" -ge "${JOBS:-1}" ]; then wait "${pids[@]}"; pids=(); fi
  done
  [ "${#pids[@]}" -eq 0 ] || wait "${pids[@]}"
}
