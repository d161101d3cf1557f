#!/bin/sh
# The product the score benches import, pinned: the tree at one commit, extracted with
# git archive (the working tree is being renovated by others while these run), with the
# package-dir mappings of pyproject.toml as symlinks. Then run a bench with
# SCORE_PRODUCT=<dir> (bench/score/common.py puts it first on sys.path).
#   sh bench/score/pin_product.sh 2be538f /tmp/score-product
set -eu
commit=${1:-2be538f}
dir=${2:-/tmp/score-product}
rm -rf "$dir"
mkdir -p "$dir"
git -C "$(dirname "$0")/../.." archive "$commit" vicar memory workflows activities | tar -x -C "$dir"
ln -s ../memory "$dir/vicar/memory"
ln -s ../workflows "$dir/vicar/workflows"
ln -s ../activities "$dir/vicar/activities"
echo "$dir: vicar at $commit"
