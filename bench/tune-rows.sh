#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/tune-rows.sh: rows for codegen/tables.c's ws shape table from the autotune cache.
#
# After `wsnorm bench --autotune` (or `run --autotune`) on a GPU, each cache entry holds the
# winning ws shape and the times per launch of the planner's own shape and of the winner. This
# prints one shape-table row for each backward entry whose winner beats the planner's shape by at
# least --min-gain percent, keyed to the GPU model in the entry's name (H100, H200; entries of
# other GPUs are skipped) and to its dtype, covering row bytes up to an eighth past the measured
# width, from the largest power of two at or below the measured rows per SM. Paste the rows at the
# top of wsn__ws_shape_table with the NOTES section that records the run.
#
# Usage: sh bench/tune-rows.sh [--note ID] [--min-gain PCT] [DIR or FILE]...
#   DIR: a tune cache directory (default $XDG_CACHE_HOME/wsnorm/tune, else ~/.cache/wsnorm/tune);
#   FILE: lines "KEY ENTRY" (a listing of such a directory: `for f in DIR/*; do echo "${f##*/}
#   $(cat "$f")"; done`). Default note "vNN", min gain 2.5.
# Exit status: 0, 1 when nothing was read, 2 on a usage error.

note=vNN
gain=2.5
while [ $# -gt 0 ]; do
	case $1 in
	--note) [ $# -ge 2 ] || { echo "tune-rows.sh: --note needs a value" >&2; exit 2; }; note=$2; shift 2 ;;
	--min-gain) [ $# -ge 2 ] || { echo "tune-rows.sh: --min-gain needs a value" >&2; exit 2; }; gain=$2; shift 2 ;;
	-h|--help) sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) echo "tune-rows.sh: unknown option '$1'" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $gain in
''|*[!0-9.]*) echo "tune-rows.sh: bad --min-gain '$gain' (a percentage)" >&2; exit 2 ;;
esac
if [ $# -eq 0 ]; then
	if [ -n "$XDG_CACHE_HOME" ]; then set -- "$XDG_CACHE_HOME/wsnorm/tune"; else set -- "$HOME/.cache/wsnorm/tune"; fi
fi

# every input as "KEY ENTRY" lines
list() {
	for src in "$@"; do
		if [ -d "$src" ]; then
			for f in "$src"/*; do
				[ -f "$f" ] && printf '%s %s\n' "${f##*/}" "$(cat "$f")"
			done
		elif [ -f "$src" ]; then
			cat "$src"
		else
			echo "tune-rows.sh: no such file or directory: $src" >&2
			return 1
		fi
	done
}

tmp=$(mktemp "${TMPDIR:-/tmp}/tune-rows.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT
list "$@" >"$tmp" || exit 1
awk -v note="$note" -v gain="$gain" '
function field(name,   i) {
	for (i = 2; i <= NF; i++)
		if (index($i, name "=") == 1)
			return substr($i, length(name) + 2)
	return ""
}
$2 != "wsnorm-tune" || $3 != 3 { next }
{
	read++
	# key: wsnorm<version>_<GPU name>_cc<NN>_<n>sm_drv<N>_<op>_<dtype>_h<hidden>_w<0|1>_b<0|1>_r<rows>
	n = split($1, k, "_")
	if (n < 10)
		next
	model = k[2] ~ /H200/ ? "H200" : k[2] ~ /H100/ ? "H100" : ""
	arch = substr(k[n - 8], 3) + 0
	sms = k[n - 7] + 0
	op = k[n - 5] == "layernorm-bwd" ? "LN_BWD" : k[n - 5] == "rmsnorm-bwd" ? "RMS_BWD" : ""
	dt = k[n - 4]
	hidden = substr(k[n - 3], 2) + 0
	size = dt == "f32" ? 4 : 2
	mask = dt == "f32" ? "F32" : dt == "f16" ? "F16" : dt == "bf16" ? "BF16" : ""
	if (model == "" || op == "" || mask == "" || sms < 1 || field("approach") != "ws")
		next
	split(field("shape"), s, ",")
	ws = field("ws_us") + 0
	best = field("shape_us") + 0
	rows = field("rows") + 0
	if (s[2] + 0 == 0 || ws <= 0 || best <= 0 || rows < sms || (ws - best) / ws * 100 < gain)
		next
	per_sm = int(rows / sms)
	floor2 = 1
	while (floor2 * 2 <= per_sm)
		floor2 *= 2
	bytes = hidden * size
	printf "%d %s %d\t\t{ \"%s\", %d, %-8s %s, %5d, %5d,  0, %d, %3d, %d, %d, %2d, 0, \"%s\", %d },\n",
	       op == "LN_BWD" ? 0 : 1, dt, bytes, note, arch, op ",", mask, bytes, bytes + int(bytes / 8) - 1,
	       s[1], s[2], s[3], s[4], s[5], model, floor2
}
END {
	if (!read) {
		print "tune-rows.sh: no autotune entries read" > "/dev/stderr"
		exit 1
	}
}' "$tmp" >"$tmp.rows" || { rm -f "$tmp.rows"; exit 1; }
sort -k1,1n -k2,2 -k3,3n "$tmp.rows" | cut -f2-
rm -f "$tmp.rows"
