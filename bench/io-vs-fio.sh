#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/io-vs-fio.sh: read throughput of `wsnorm run --read-only` against fio's io_uring engine on one file.
#
# Usage: bench/io-vs-fio.sh [-w WSNORM] [-d DIR] [-s MIB] [-q QD] [-b BS] [-n RUNS] [-m MODES] [FILE]
#
# Without FILE, writes a file of MIB MiB (default 2048) of bf16 rows of 4096 under DIR (default
# $TMPDIR or /tmp) and removes it at the end. For each mode (default "direct buffered"), runs fio
# (ioengine=io_uring, rw=read, fixedbufs, registerfiles, one job, iodepth QD, bs BS: the same queue
# depth and read size wsnorm gets) and `wsnorm run --read-only` over the whole file, RUNS times each
# (default 3), alternating, and prints the best GB/s of each and their ratio (goal: >= 0.95).
# wsnorm's rate is the bytes read over the run's wall time, the same measure as fio's bandwidth.
# "buffered" reads through the page cache after one warm-up read of the file (fio with
# invalidate=0), so it measures the page-cache copy path rather than the device. Needs fio; without it the script says so and exits 77.
# Exit status: 0 done, 1 a run failed, 2 usage, 77 fio not installed.

wsnorm=${WSNORM:-wsnorm}
dir=${TMPDIR:-/tmp}
mib=2048
qd=32
bs=1M
runs=3
modes="direct buffered"
hidden=4096

usage() {
	sed -n '4,16p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}

while getopts w:d:s:q:b:n:m:h opt; do
	case $opt in
	w) wsnorm=$OPTARG ;;
	d) dir=$OPTARG ;;
	s) mib=$OPTARG ;;
	q) qd=$OPTARG ;;
	b) bs=$OPTARG ;;
	n) runs=$OPTARG ;;
	m) modes=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -le 1 ] || usage

if ! command -v fio >/dev/null 2>&1; then
	echo "io-vs-fio: fio is not installed (e.g. apt-get install fio): nothing to compare with (skipped)"
	exit 77
fi
if ! "$wsnorm" --version >/dev/null 2>&1; then
	echo "io-vs-fio: cannot run wsnorm as '$wsnorm' (set -w or WSNORM)"
	exit 1
fi

row=$((hidden * 2))
made=
if [ $# -eq 1 ]; then
	file=$1
else
	file=$(mktemp "$dir/io-vs-fio.XXXXXX") || exit 1
	made=$file
	trap 'rm -f "$made"' EXIT
	trap 'exit 1' HUP INT TERM
	echo "io-vs-fio: writing $mib MiB to $file"
	# random bytes: never time on zeros (a file system may store them sparsely)
	head -c $((mib * 1024 * 1024)) /dev/urandom >"$file" || exit 1
	sync
fi
size=$(stat -c %s "$file") || exit 1
rows=$((size / row))
if [ $((rows * row)) -ne "$size" ] || [ "$rows" -lt 1 ]; then
	echo "io-vs-fio: $file: $size bytes is not a whole number of $row-byte rows"
	exit 1
fi

# best of a list of numbers
best() {
	awk 'BEGIN { b = 0 } { if ($1 > b) b = $1 } END { printf "%.3f\n", b }'
}

fio_gbs() { # $1: direct (1 or 0); buffered runs keep the page cache (fio drops it by default)
	fio --name=read --filename="$file" --rw=read --bs="$bs" --iodepth="$qd" --ioengine=io_uring \
		--direct="$1" --invalidate="$1" --fixedbufs --registerfiles --numjobs=1 --size="$size" \
		--output-format=json 2>/dev/null |
		sed -n 's/.*"bw_bytes" *: *\([0-9][0-9]*\).*/\1/p' | head -n 1 | awk '{ printf "%.3f\n", $1 / 1e9 }'
}

wsnorm_gbs() { # $1: on or off
	"$wsnorm" -q run --input "$file" --shape "${rows}x$hidden" --dtype bf16 --op rmsnorm-fwd --device cpu \
		--read-only --direct "$1" --qd "$qd" --bs "$bs" --json 2>/dev/null |
		awk '/"wall_seconds"/ && !w { gsub(/[",]/, ""); w = $2 }
		     /"read": \{/ && !r { r = 1 }
		     r == 1 && /"bytes"/ { gsub(/[",]/, ""); b = $2; r = 2 }
		     END { if (w > 0 && b > 0) printf "%.3f\n", b / w / 1e9 }'
}

echo "io-vs-fio: $file, $size bytes; queue depth $qd, reads of $bs; best of $runs"
printf '%-10s %10s %10s %8s\n' mode fio_GB/s wsnorm_GB/s ratio
status=0
for mode in $modes; do
	case $mode in
	direct) d=1 w=on ;;
	buffered) d=0 w=off; cat "$file" >/dev/null ;;
	*) echo "io-vs-fio: unknown mode '$mode' (direct or buffered)"; exit 2 ;;
	esac
	f_all=''
	w_all=''
	i=0
	while [ $i -lt "$runs" ]; do
		# alternate which goes first, so neither always finds the other's data in a cache
		if [ $((i % 2)) -eq 0 ]; then
			f=$(fio_gbs $d)
			x=$(wsnorm_gbs $w)
		else
			x=$(wsnorm_gbs $w)
			f=$(fio_gbs $d)
		fi
		if [ -z "$f" ] || [ -z "$x" ]; then
			echo "io-vs-fio: $mode: a run failed (fio '$f', wsnorm '$x')"
			status=1
			break
		fi
		f_all="$f_all $f"
		w_all="$w_all $x"
		i=$((i + 1))
	done
	[ -n "$f_all" ] || continue
	fb=$(echo "$f_all" | tr ' ' '\n' | best)
	wb=$(echo "$w_all" | tr ' ' '\n' | best)
	printf '%-10s %10s %10s %8s   (fio:%s; wsnorm:%s)\n' "$mode" "$fb" "$wb" \
		"$(awk -v a="$wb" -v b="$fb" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')" "$f_all" "$w_all"
done
exit $status
