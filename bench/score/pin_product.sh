#!/bin/sh
# Runs a score bench against the product pinned at one commit, or just pins it.
#
# The tree at the commit is extracted with git archive (the working tree is being changed
# by others while these run), laid out as it installs (pyproject's package-dir mappings as
# symlinks). The bench then runs with that tree first on PYTHONPATH and the repository
# after it (for `bench`, which the pinned tree has not got); `python -P` leaves the current
# directory off the path, so the repository's own `vicar` never shadows the pinned one and
# relative paths still mean what they mean here. No bench edits sys.path.
#
#   sh bench/score/pin_product.sh 2be538f /tmp/score-product                 # pin only
#   sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.run_selector auroc --seeds 0 1 2 3 4
#
# Without pinning, a bench measures the working tree: python -m bench.score.<name> ...
set -eu
commit=${1:-2be538f}
dir=${2:-/tmp/score-product}
repo=$(cd "$(dirname "$0")/../.." && pwd)
case "$dir" in
/ | "$repo" | "$repo"/*) echo "pin_product.sh: $dir would replace the repository" >&2; exit 2 ;;
esac
rm -rf "$dir"
mkdir -p "$dir"
git -C "$repo" archive "$commit" vicar memory workflows activities | tar -x -C "$dir"
ln -s ../memory "$dir/vicar/memory"
ln -s ../workflows "$dir/vicar/workflows"
ln -s ../activities "$dir/vicar/activities"
echo "$dir: vicar at $commit" >&2
[ $# -gt 2 ] || exit 0
shift 2
PYTHONPATH="$dir:$repo" exec "${PYTHON:-python}" -P -m "$@"
