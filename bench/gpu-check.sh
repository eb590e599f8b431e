#!/bin/sh
# bench/gpu-check.sh BUILD_DIR OUT_DIR [bench options...]: on a GPU node, run the GPU test
# binary, the demo and the benchmark from an already-built tree, logging each under OUT_DIR,
# and print a short table last.
set -u
build=${1:?usage: gpu-check.sh BUILD_DIR OUT_DIR [bench options]}
out=${2:?usage: gpu-check.sh BUILD_DIR OUT_DIR [bench options]}
shift 2
mkdir -p "$out"
w="$build/wsnorm"
status=0
"$w" --version
"$w" devices | tee "$out/devices.txt"
if [ -x "$build/tests/check_gpu" ]; then
	"$build/tests/check_gpu" >"$out/check_gpu.log" 2>&1
	rc=$?
	echo "check_gpu: exit $rc"; grep -E "^[0-9]+%: Checks|^.*:[EF]:" "$out/check_gpu.log" | head -40
	[ $rc -eq 0 ] || status=1
fi
"$w" run --demo >"$out/demo.txt" 2>&1 || status=1
tail -n 3 "$out/demo.txt"
"$w" bench "$@" >"$out/bench.txt" 2>&1 || status=1
cat "$out/bench.txt"
exit $status
