#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_tune_rows.sh: bench/tune-rows.sh turns the autotune cache of the H200 run recorded in
# bench/NOTES.md v33/v34 (tests/golden/tune-h200.txt) into exactly the H200 rows of codegen/tables.c;
# it skips GPUs the tables do not know, foreign lines and winners below the gain; it reads a cache
# directory as it reads a listing; bad usage and a missing cache fail.
#
# Run by `make check` (which sets WSNORM_SRCDIR), or: WSNORM_SRCDIR=. sh tests/check_tune_rows.sh
# Exit status: 0 all good, 1 a check failed.

srcdir=${WSNORM_SRCDIR:-$(dirname "$0")/..}
srcdir=$(cd "$srcdir" && pwd) || exit 1
script=$srcdir/bench/tune-rows.sh
fixture=$srcdir/tests/golden/tune-h200.txt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_tune_rows.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

problem() {
	echo "check_tune_rows: $*"
	fail=1
}

# the table's H200 rows, regenerated from the run they came from
grep '"H200"' "$srcdir/codegen/tables.c" >"$tmp/want"
[ -s "$tmp/want" ] || problem "codegen/tables.c has no H200 rows"
sh "$script" --note v33 "$fixture" >"$tmp/got" || problem "tune-rows.sh failed on $fixture"
cmp -s "$tmp/want" "$tmp/got" || { problem "rows differ from codegen/tables.c:"; diff "$tmp/want" "$tmp/got"; }

# a cache directory reads as its listing; another GPU's entry, a foreign line and a forward are skipped
mkdir "$tmp/cache"
while read -r key entry; do
	printf '%s\n' "$entry" >"$tmp/cache/$key"
done <"$fixture"
sed -n 1p "$fixture" | sed 's/NVIDIA-H200/NVIDIA-B200/; s/cc90/cc100/' | {
	read -r key entry
	printf '%s\n' "$entry" >"$tmp/cache/$key"
}
printf 'not-a-tune-entry\n' >"$tmp/cache/junk"
printf 'wsnorm-tune 3 approach=multiwave shape=0,0,0,0,0 ws_us=10 shape_us=0 multiwave_us=5 shapes=0 rows=16384\n' \
	>"$tmp/cache/wsnorm0.1.0_NVIDIA-H200_cc90_132sm_drv13000_rmsnorm-bwd_bf16_h512_w1_b0_r16384"
XDG_CACHE_HOME=$tmp/xdg sh "$script" --note v33 "$tmp/cache" >"$tmp/got_dir" || problem "tune-rows.sh failed on a directory"
cmp -s "$tmp/want" "$tmp/got_dir" || { problem "rows from the directory differ:"; diff "$tmp/want" "$tmp/got_dir"; }
mkdir -p "$tmp/xdg/wsnorm" && mv "$tmp/cache" "$tmp/xdg/wsnorm/tune"
XDG_CACHE_HOME=$tmp/xdg sh "$script" --note v33 >"$tmp/got_xdg" || problem "tune-rows.sh failed on \$XDG_CACHE_HOME"
cmp -s "$tmp/want" "$tmp/got_xdg" || problem "rows from \$XDG_CACHE_HOME differ"

# the gain threshold: at 10 % only the largest gains remain, each of them a table row
sh "$script" --note v33 --min-gain 10 "$fixture" >"$tmp/big" || problem "--min-gain 10 failed"
n=$(wc -l <"$tmp/big")
if [ "$n" -eq 0 ] || [ "$n" -ge "$(wc -l <"$tmp/want")" ]; then
	problem "--min-gain 10 kept $n rows"
fi
while IFS= read -r row; do
	grep -qxF "$row" "$tmp/want" || problem "--min-gain 10 row not in the table: $row"
done <"$tmp/big"

# usage errors exit 2; a missing cache or one with no entries exits 1
for args in "--min-gain abc" "--min-gain" "--bogus"; do
	# shellcheck disable=SC2086
	sh "$script" $args "$fixture" >/dev/null 2>&1
	[ $? -eq 2 ] || problem "'$args' did not exit 2"
done
sh "$script" "$tmp/missing" >/dev/null 2>&1
[ $? -eq 1 ] || problem "a missing cache did not exit 1"
: >"$tmp/empty"
sh "$script" "$tmp/empty" >/dev/null 2>&1
[ $? -eq 1 ] || problem "an empty listing did not exit 1"

[ $fail -eq 0 ] && echo "check_tune_rows: $(wc -l <"$tmp/want") H200 rows regenerated from the autotune cache"
exit $fail
