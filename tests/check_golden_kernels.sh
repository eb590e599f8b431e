#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_golden_kernels.sh: the generated kernels and plans match tests/golden/kernels.sha256.
#
# Each line of the manifest is the SHA-256 of what `wsnorm emit` or `wsnorm plan --json` printed
# for one shape, its exit status, and the arguments. A refactor must leave every line as it is; a
# change to a kernel or a plan regenerates the manifest in a commit of its own that says why.
#
# Run by `make check` (which sets WSNORM_BIN and WSNORM_SRCDIR), or by hand:
#   WSNORM_BIN=build/wsnorm sh tests/check_golden_kernels.sh            # compare
#   WSNORM_BIN=build/wsnorm sh tests/check_golden_kernels.sh --update   # rewrite the manifest
# Exit status: 0 identical, 1 a line differs (the differing lines are printed), 77 skipped
# (no sha256sum).

srcdir=${WSNORM_SRCDIR:-$(dirname "$0")/..}
bin=${WSNORM_BIN:-./wsnorm}
manifest=$srcdir/tests/golden/kernels.sha256

command -v sha256sum >/dev/null 2>&1 || { echo "check_golden_kernels: no sha256sum; skipped"; exit 77; }
[ -x "$bin" ] || { echo "check_golden_kernels: $bin is not executable (set WSNORM_BIN)"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_golden.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# The shapes: both approaches and auto, both targets, the four ops, three dtypes, even and odd
# widths, affine on and off, and auto at few rows (where the row-count rules decide).
ops="layernorm-fwd layernorm-bwd rmsnorm-fwd rmsnorm-bwd"
dtypes="bf16 f16 f32"
hiddens="1000 1024 2048 3072 4096 4097 8192 12289 16384 32768 65536"
cases() {
	for arch in sm_90a sm_100a; do
		for op in $ops; do
			for dt in $dtypes; do
				for h in $hiddens; do
					for affine in "" "--no-weight --no-bias"; do
						for shape in "--approach multiwave" "--approach ws" "--approach auto" \
							"--approach auto --rows 1024"; do
							s="--op $op --dtype $dt --hidden $h --arch $arch $shape${affine:+ $affine}"
							echo "emit $s"
							echo "plan --json $s"
						done
					done
				done
			done
		done
	done
}

# One line of the manifest for one command (run by xargs, several at a time).
cat >"$tmp/one.sh" <<'EOF'
bin=$1; shift
out=$("$bin" "$@" 2>&1; echo "rc=$?")
printf '%s %s\n' "$(printf '%s' "$out" | sha256sum | cut -d' ' -f1)" "$*"
EOF
cases >"$tmp/cases"
jobs=$(nproc 2>/dev/null || echo 2)
# xargs splits each line into words: the arguments hold no quotes or spaces inside a word
xargs -P "$jobs" -L 1 sh "$tmp/one.sh" "$bin" <"$tmp/cases" | sort -k2 >"$tmp/now" || exit 1
n=$(wc -l <"$tmp/now")
[ "$n" -eq "$(wc -l <"$tmp/cases")" ] || { echo "check_golden_kernels: only $n results"; exit 1; }

if [ "${1:-}" = "--update" ]; then
	cp "$tmp/now" "$manifest" || exit 1
	echo "check_golden_kernels: wrote $n lines to $manifest"
	exit 0
fi
[ -f "$manifest" ] || { echo "check_golden_kernels: no $manifest (run with --update)"; exit 1; }
if ! diff "$manifest" "$tmp/now" >"$tmp/diff"; then
	echo "check_golden_kernels: the generated kernels or plans differ from $manifest:"
	grep '^[<>]' "$tmp/diff" | head -n 40
	echo "check_golden_kernels: $(grep -c '^>' "$tmp/diff") of $n lines differ; rerun one of them by hand"
	echo "  (wsnorm <args>) to see the change; if it is meant, --update in a commit that says why"
	exit 1
fi
echo "check_golden_kernels: $n kernels and plans identical"
