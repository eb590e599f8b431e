#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/pipeline-check.sh: the `wsnorm run` pipeline on a GPU node: H2D from the pinned ring, each stage alone vs end to end, every GPU.
#
# Usage: [DEVICE=cuda:0] bench/pipeline-check.sh WSNORM DATA_DIR OUT_DIR [MIB]
#
# Writes two datasets of about MIB MiB of x each (default 4096) under DATA_DIR (fast local
# storage), then logs under OUT_DIR, as JSON, and prints one line each:
#   h2d       wsnorm bench --h2d: pinned host -> GPU copies alone (goal >= 48 GB/s on PCIe Gen5 x16)
#   e2e fwd   run --standalone, rmsnorm-fwd: end to end over the slowest stage alone (goal >= 0.9)
#   e2e bwd   the same for layernorm-bwd (verification of every 16th batch)
#   all GPUs  run --devices all, 2 passes, kernel x4: per-GPU result and the summed rates
#   read      run --read-only: the storage alone
#   fio       bench/io-vs-fio.sh on the fwd dataset's first file, when fio is installed
# Exit status: 0 when every run passed (the goals are reported, not enforced), 1 otherwise.

set -u
w=${1:?usage: pipeline-check.sh WSNORM DATA_DIR OUT_DIR [MIB]}
data=${2:?usage: pipeline-check.sh WSNORM DATA_DIR OUT_DIR [MIB]}
out=${3:?usage: pipeline-check.sh WSNORM DATA_DIR OUT_DIR [MIB]}
mib=${4:-4096}
dev=${DEVICE:-cuda:0}
here=$(dirname "$0")
status=0
mkdir -p "$data" "$out" || exit 1

# the first number after "key": in a JSON file
key() {
	sed -n "s/.*\"$2\": *\"\{0,1\}\([^\",]*\).*/\1/p" "$1" | head -n 1
}

run() { # name, then the wsnorm arguments; JSON to OUT_DIR/name.json, stderr to name.err
	name=$1
	shift
	"$w" -q "$@" --json >"$out/$name.json" 2>"$out/$name.err"
	rc=$?
	[ $rc -eq 0 ] || { echo "$name: exit $rc: $(tail -n 3 "$out/$name.err")"; status=1; }
	return $rc
}

"$w" --version
"$w" devices >"$out/devices.txt" 2>&1
rows=$((mib * 1024 * 1024 / 8192)) # rows of 4096 bf16
for op in rmsnorm-fwd layernorm-bwd; do
	[ -d "$data/$op" ] || "$w" -q gen --op "$op" --dtype bf16 --rows "$rows" --hidden 4096 --shards 8 \
		--out "$data/$op" || { echo "gen $op failed"; exit 1; }
done

run h2d bench --h2d --device "$dev" && echo "h2d       $(key "$out/h2d.json" h2d_gbs) GB/s (d2h $(key "$out/h2d.json" d2h_gbs) GB/s; goal >= 48)"

if run e2e-fwd run --input "$data/rmsnorm-fwd" --device "$dev" --standalone; then
	echo "e2e fwd   $(key "$out/e2e-fwd.json" ratio) x the slowest stage alone ($(key "$out/e2e-fwd.json" slowest_stage)); $(key "$out/e2e-fwd.json" rows_per_s) rows/s; goal >= 0.9"
fi
if run e2e-bwd run --input "$data/layernorm-bwd" --device "$dev" --standalone --verify-every 16; then
	echo "e2e bwd   $(key "$out/e2e-bwd.json" ratio) x the slowest stage alone ($(key "$out/e2e-bwd.json" slowest_stage)); goal >= 0.9"
fi
run all run --input "$data/layernorm-bwd" --devices all --iterations 2 --kernel-loops 4 --verify-every 16
echo "all GPUs  $(key "$out/all.json" device): result $(key "$out/all.json" result), $(key "$out/all.json" rows) rows, $(key "$out/all.json" rows_per_s) rows/s"
run readonly run --input "$data/layernorm-bwd" --read-only --device "$dev" &&
	echo "read      $(awk '/"wall_seconds"/ && !w { gsub(/,/, ""); w = $2 } /"bytes"/ && !b { gsub(/,/, ""); b = $2 } END { if (w > 0) printf "%.2f", b / w / 1e9 }' "$out/readonly.json") GB/s from $data"
if command -v fio >/dev/null 2>&1; then
	sh "$here/io-vs-fio.sh" -w "$w" -n 3 -d "$data" -s 2048 >"$out/fio.txt" 2>&1 || status=1
	echo "fio       $(tail -n 2 "$out/fio.txt" | tr -s ' ' | tr '\n' ';') (2 GiB file in $data)"
else
	echo "fio       not installed: skipped"
fi
exit $status
