#!/usr/bin/env bash
# Keeps the repository describing only itself: fails when a tracked file tells how the code
# was built (build sessions, device calls or device time, issue numbers, development branch
# names, co-workers called helpers) or points outside the repository (../shared, DESIGN.md,
# notes/). Products state the decision or the measurement instead.
#
#   scripts/lint-product-text.sh        (from anywhere inside the checkout; run by scripts/test.sh)
#
# Prints every hit as FILE:LINE:TEXT and exits 1 if there is any, 0 otherwise. A hit that is
# right (e.g. a quoted third-party text) is allowed by a line in scripts/lint-product-text.allow:
# the file's path, a tab, and a fixed string that the hit's line contains. Each entry allows
# that one line only, so keep entries exact.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "lint-product-text: not a git checkout (it checks the tracked files); skipped" >&2
  exit 0
fi
self=scripts/lint-product-text.sh
allow_file=scripts/lint-product-text.allow

patterns=(
  '\bsessions? [0-9]+'                          # build sessions ("session 12")
  '\bcalls? [0-9]+\b'                           # device calls ("call 3")
  '\bdevice (calls?|time)\b|\bH200 calls?\b'   # "device time", "H200 call"
  '\bnot yet run on a GPU\b'
  '\bissues? [0-9]+|\bissue-[0-9]+|\bthe issue'"'"'s\b'   # tracker items
  '\bwg(fwd|ctx|q|bwd[0-9]*)\b|\bwgfwd-'        # development branch names
  '\bbranch `[^`]+`'                            # "branch `mask`"
  "\\bhelper's|\\bhelpers'"                     # co-workers: "the helper's calls"
  '\bhelpers? `[^`]+`'                          # a named co-worker: "helper `flake8`"
  '\b(a|this|that|one|our|my) helpers?\b'       # "a helper measured ..."
  '\.\./shared|\bshared/(tools|notes|seeds)|\bDESIGN\.md\b|\bSTYLE\.md\b|(^|[^a-z_])notes/'
  '/work/|\.gpu/'                               # machine paths
)
args=()
for p in "${patterns[@]}"; do args+=(-e "$p"); done

hits=$(git grep -nIiE "${args[@]}" -- . ":!$self" ":!$allow_file" || true)
if [ -n "$hits" ] && [ -f "$allow_file" ]; then
  filtered=""
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    text=${rest#*:}
    allowed=0
    while IFS=$'\t' read -r afile atext; do
      case $afile in ''|'#'*) continue ;; esac
      if [ "$afile" = "$file" ] && [[ $text == *"$atext"* ]]; then allowed=1; break; fi
    done <"$allow_file"
    [ $allowed = 1 ] || filtered+="$hit"$'\n'
  done <<<"$hits"
  hits=${filtered%$'\n'}
fi
if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  echo "lint-product-text: $(printf '%s\n' "$hits" | wc -l) line(s) describe how the code was built or point outside the repository; state the decision or the measurement instead (allow-list: $allow_file)" >&2
  exit 1
fi
echo "lint-product-text: clean"
