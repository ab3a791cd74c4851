# Sourced by the results scripts: run a shell function over items, $JOBS at a time.
# (Two runs side by side, one CPU thread each, keep the 2 cores of these machines busy without
# oversubscribing them.)

in_parallel() {  # FUNCTION ITEM...: call FUNCTION ITEM for every item, at most JOBS at once
  local f=$1 failed=0; shift
  for item in "$@"; do
    # A slot frees as soon as any item ends (wait -n), not when the whole group does.
    while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-1}" ]; do wait -n || failed=1; done
    "$f" "$item" &
  done
  while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done
  return "$failed"
}
