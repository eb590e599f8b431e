#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_mpi.sh: wsnorm-mpi under Open MPI's or MPICH's mpirun on this machine, the CPU backend:
# 4 ranks pass and report as one fleet; 2 x 2 ranks on two "nodes" (an rsh agent that runs each node
# in a UTS namespace of its own name, Open MPI only); a rank with an injected fault (exit 3, named);
# a rank made 8 x slower (named slowest, --max-spread 1.5 exits 1); SIGTERM to one rank (every rank
# stops, the report says which); SIGTERM to mpirun (the --node-report files survive); a launcher of
# another MPI (the guard's error); --devices local; srun --mpi=pmix where Slurm answers.
#
# Run by `make check` when configure built wsnorm-mpi (it sets WSNORM_MPI_BIN), or by hand:
#   WSNORM_BIN=build/wsnorm WSNORM_MPI_BIN=build/wsnorm-mpi sh tests/check_mpi.sh
# Exit status: 0 all good, 1 a check failed, 77 skipped (no wsnorm-mpi, mpirun or python3).

bin=${WSNORM_BIN:-./wsnorm}
mpibin=${WSNORM_MPI_BIN:-}
[ -n "$mpibin" ] && [ -x "$mpibin" ] || { echo "check_mpi: no wsnorm-mpi (configure --with-mpi); skipped"; exit 77; }
command -v mpirun >/dev/null 2>&1 || { echo "check_mpi: no mpirun; skipped"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "check_mpi: no python3 to read the JSON; skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_mpi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
problem() {
	echo "check_mpi: $*"
	fail=1
}

# Open MPI refuses root unless told; MPICH does not ask
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if mpirun --version 2>&1 | grep -q "Open MPI"; then
	ompi=1
	mpi() { timeout 120 mpirun --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo \
		--mca oob_tcp_if_include lo "$@"; }
else
	ompi=0
	mpi() { timeout 120 mpirun "$@"; }
fi
# json FILE EXPR: print a Python expression over the JSON document j
json() {
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"
}

# mpirun itself must be able to start processes here (a container without the room MPI needs is a
# skip, said loudly, not a failure of wsnorm-mpi)
if ! mpi -np 2 sh -c true >"$tmp/pre.out" 2>&1; then
	echo "check_mpi: mpirun cannot start 2 processes on this machine; skipped:"
	head -n 5 "$tmp/pre.out"
	exit 77
fi

"$bin" gen --op layernorm-fwd --rows 4096 --hidden 1024 --out "$tmp/ds.safetensors" >/dev/null ||
	{ echo "check_mpi: wsnorm gen failed"; exit 1; }
run="run --input $tmp/ds.safetensors --device cpu --threads 1"

# 4 ranks, one node: one fleet report on rank 0, every rank's report inside it
mpi -np 4 "$mpibin" $run --iterations 2 --json >"$tmp/four.json" 2>"$tmp/four.err" ||
	problem "4 ranks: exit status $? ($(tail -n 3 "$tmp/four.err"))"
[ "$(json "$tmp/four.json" "j['fleet']['ranks'], j['fleet']['nodes'], j['fleet']['ranks_per_node'], j['fleet']['result']")" = \
	"4 1 4 pass" ] || problem "4 ranks: fleet reads $(json "$tmp/four.json" "j['fleet']")"
[ "$(json "$tmp/four.json" "sorted(r['rank'] for r in j['ranks'] if r['report']['result'] == 'pass')")" = "[0, 1, 2, 3]" ] ||
	problem "4 ranks: not every rank's report passed"
[ "$(json "$tmp/four.json" "j['fleet']['stages']['end_to_end']['gpus']")" = 4 ] ||
	problem "4 ranks: end to end compares $(json "$tmp/four.json" "j['fleet']['stages']['end_to_end']['gpus']") GPUs"
mpi -np 2 "$mpibin" $run >"$tmp/text.out" 2>&1 || problem "2 ranks, text: exit status $?"
grep -q "^fleet: 2 ranks on 1 node" "$tmp/text.out" || problem "2 ranks, text: no fleet line ($(head -n 2 "$tmp/text.out"))"
grep -q "result   PASS" "$tmp/text.out" || problem "2 ranks, text: no PASS"

# 2 x 2 ranks on two nodes (Open MPI: the rsh agent starts each node's daemon here, named after the host)
if [ "$ompi" = 1 ]; then
	cat >"$tmp/agent.sh" <<'EOF'
#!/bin/sh
host=$1
shift
WSNORM_NODE_NAME=$host exec sh -c "$*"
EOF
	chmod +x "$tmp/agent.sh"
	# (routed direct: every daemon talks to mpirun itself; the default tree of daemons on one host
	# once crashed Open MPI 4.1.4's routing, which names this as the way round)
	mpi --mca routed direct --mca plm_rsh_agent "$tmp/agent.sh" --host nodea:2,nodeb:2 -np 4 "$mpibin" $run --json \
		--node-report "$tmp/nodes" --html "$tmp/two.html" >"$tmp/two.json" 2>"$tmp/two.err" ||
		problem "2 x 2: exit status $? ($(tail -n 3 "$tmp/two.err"))"
	# the page: per stage that ran a chart of 4 GPU bars and one of 2 node bars, one slowest marked in each
	cat >"$tmp/charts.py" <<'EOF'
# tests/check_mpi.sh's check of the --html page: argv[1] the page, argv[2] the stages that ran, argv[3] GPUs, argv[4] nodes
import sys
from html.parser import HTMLParser


class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts, self.cur = [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'svg' and a.get('class') == 'chart':
            self.cur = [a['data-stage'], a['data-level'], 0, 0]
            self.charts.append(self.cur)
        if tag == 'rect' and self.cur and 'bar' in a.get('class', '').split():
            self.cur[2] += 1
            self.cur[3] += 'straggler' in a['class'].split()


p = Charts()
p.feed(open(sys.argv[1]).read())
gpus, nodes = int(sys.argv[3]), int(sys.argv[4])
want = sorted((s, lv, gpus if lv == 'gpu' else nodes, 1) for s in sys.argv[2].split(',') for lv in ('gpu', 'node'))
got = sorted(tuple(c) for c in p.charts)
if got != want:
    print('charts', got, 'expected', want)
    sys.exit(1)
EOF
	python3 "$tmp/charts.py" "$tmp/two.html" "$(json "$tmp/two.json" "','.join(k for k, v in j['fleet']['stages'].items() if v)")" 4 2 ||
		problem "2 x 2: the HTML page's charts are not one bar per GPU and per node"
	[ "$(json "$tmp/two.json" "j['fleet']['nodes'], j['fleet']['ranks_per_node'], sorted(set(r['node'] for r in j['ranks']))")" = \
		"2 2 ['nodea', 'nodeb']" ] || problem "2 x 2: fleet reads $(json "$tmp/two.json" "j['fleet']")"
	[ "$(ls "$tmp/nodes" | sort | tr '\n' ' ')" = "nodea.rank-0.json nodea.rank-1.json nodeb.rank-2.json nodeb.rank-3.json " ] ||
		problem "2 x 2: --node-report wrote $(ls "$tmp/nodes" | tr '\n' ' ')"
else
	echo "check_mpi: 2 x 2 nodes skipped (needs Open MPI's rsh agent)"
fi

# under Slurm, where a controller answers: srun --mpi=pmix starts the ranks of one fleet
if command -v srun >/dev/null 2>&1 && timeout 10 sinfo -h >/dev/null 2>&1; then
	timeout 120 srun --mpi=pmix -n 2 "$mpibin" $run --json >"$tmp/srun.json" 2>"$tmp/srun.err" ||
		problem "srun --mpi=pmix: exit status $? ($(tail -n 3 "$tmp/srun.err"))"
	[ "$(json "$tmp/srun.json" "j['fleet']['ranks'], j['fleet']['result']")" = "2 pass" ] ||
		problem "srun --mpi=pmix: fleet reads $(json "$tmp/srun.json" "j['fleet']")"
else
	echo "check_mpi: no Slurm controller: srun not tested"
fi

# a rank with a fault: every rank exits 3, the rank is named and left out
mpi -np 3 "$mpibin" $run --inject-fault 0 --fault-rank 1 --json >"$tmp/fault.json" 2>"$tmp/fault.err"
st=$?
[ "$st" = 3 ] || problem "fault on rank 1: exit status $st, expected 3"
# (the others finish, or are stopped by rank 1's error and left out as interrupted)
[ "$(json "$tmp/fault.json" "[e['why'] for e in j['fleet']['excluded'] if e['rank'] == 1], all(e['why'] == 'interrupted' for e in j['fleet']['excluded'] if e['rank'] != 1), j['fleet']['result']")" = \
	"['error'] True error" ] || problem "fault on rank 1: fleet reads $(json "$tmp/fault.json" "j['fleet']")"
grep -q "wsnorm-mpi\[1\]: run: .*injected fault" "$tmp/fault.err" || problem "fault on rank 1: no error naming rank 1"

# a rank 8 x slower: named the slowest end to end (by far the widest spread), over --max-spread 1.5
mpi -np 2 "$mpibin" $run --duration 2s --inject-slow 8 --fault-rank 1 --max-spread 1.5 --json \
	>"$tmp/slow.json" 2>"$tmp/slow.err"
st=$?
[ "$st" = 1 ] || problem "slow rank 1: exit status $st, expected 1 ($(tail -n 3 "$tmp/slow.err"))"
[ "$(json "$tmp/slow.json" "j['fleet']['stages']['end_to_end']['slowest_gpu']['rank'], j['fleet']['stages']['end_to_end']['spread'] > 2")" = \
	"1 True" ] || problem "slow rank 1: end to end reads $(json "$tmp/slow.json" "j['fleet']['stages']['end_to_end']")"
grep -q "spread .* is over --max-spread 1.5: the slowest GPU is rank 1" "$tmp/slow.err" ||
	problem "slow rank 1: no straggler line on stderr ($(grep -v '^-' "$tmp/slow.err" | head -n 2))"

# a missed threshold fails the fleet at once: rank 0 ends its passes and misses --min-read-gbs while
# rank 1, 8 x slower, is still running; rank 1 stops and says why
mpi -np 2 "$mpibin" $run --iterations 20 --inject-slow 8 --fault-rank 1 --min-read-gbs 1000000 --json \
	>"$tmp/thr.json" 2>"$tmp/thr.err"
st=$?
[ "$st" = 1 ] || problem "missed threshold: exit status $st, expected 1"
[ "$(json "$tmp/thr.json" "[r['report'].get('signal') for r in j['ranks']], j['fleet']['result']")" = "[None, 'another rank'] fail" ] ||
	problem "missed threshold: reports read $(json "$tmp/thr.json" "[(r['rank'], r['report'].get('signal'), r['report']['result']) for r in j['ranks']]")"

# SIGTERM to one rank: every rank stops within seconds of it, the report says who
mpi -np 3 "$mpibin" $run --duration 60s --json >"$tmp/sig.json" 2>"$tmp/sig.err" &
mpirun_pid=$!
# the ranks' process ids, by program name (mpirun's own command line names wsnorm-mpi too)
# (a libtool wrapper runs as lt-wsnorm-mpi)
ranks() {
	for d in /proc/[0-9]*; do
		case "$(cat "$d/comm" 2>/dev/null)" in
		wsnorm-mpi | lt-wsnorm-mpi) echo "${d#/proc/}" ;;
		esac
	done
}
for _ in $(seq 100); do
	[ "$(ranks | wc -l)" -ge 3 ] && break
	sleep 0.1
done
sleep 2
victim=$(ranks | sort -n | tail -n 1)
t0=$(date +%s)
[ -n "$victim" ] || problem "SIGTERM: the 3 ranks did not start"
[ -n "$victim" ] && kill -TERM "$victim"
wait "$mpirun_pid"
t1=$(date +%s)
[ $((t1 - t0)) -le 15 ] || problem "SIGTERM: the fleet took $((t1 - t0)) s to stop"
[ "$(json "$tmp/sig.json" "j['fleet']['interrupted'], sorted(r['report']['signal'] for r in j['ranks'])")" = \
	"True ['SIGTERM', 'another rank', 'another rank']" ] ||
	problem "SIGTERM: reports read $(json "$tmp/sig.json" "[(r['rank'], r['report'].get('signal')) for r in j['ranks']]")"

# SIGTERM to mpirun: it forwards the signal and may cut rank 0's output short, but every rank's
# --node-report is written and says how the run ended
# (Open MPI kills the ranks still running odls_base_sigkill_timeout seconds after forwarding it: give
# them time to stop and write, as the man page tells operators to)
sigkill=
[ "$ompi" = 1 ] && sigkill="--mca odls_base_sigkill_timeout 30"
mpi $sigkill -np 3 "$mpibin" $run --duration 60s --node-report "$tmp/nr" --json >"$tmp/mr.json" 2>"$tmp/mr.err" &
mpirun_pid=$!
for _ in $(seq 100); do
	[ "$(ranks | wc -l)" -ge 3 ] && break
	sleep 0.1
done
sleep 2
launcher= # this test's mpirun: the one whose command line names its report directory
for d in /proc/[0-9]*; do
	case "$(cat "$d/comm" 2>/dev/null)" in
	mpirun* | mpiexec* | orterun) tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q "$tmp/nr" && launcher=${d#/proc/} ;;
	esac
done
[ -n "$launcher" ] || problem "SIGTERM to mpirun: no mpirun found"
[ -n "$launcher" ] && kill -TERM "$launcher"
wait "$mpirun_pid"
n=0
for f in "$tmp"/nr/*.json; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	[ "$(json "$f" "j['interrupted'], j.get('signal')")" = "True SIGTERM" ] || problem "SIGTERM to mpirun: $f reads $(json "$f" "j.get('interrupted'), j.get('signal')")"
done
[ "$n" = 3 ] || problem "SIGTERM to mpirun: $n node reports, expected 3"

# wsnorm-mpi's own options, garbage in: each a usage error naming the option (exit 2, before MPI starts)
for bad in "--max-spread 0.5" "--max-spread x" "--fault-rank x" "--fault-rank 1" "--node-report=" "--html="; do
	# shellcheck disable=SC2086 # word splitting of $bad into option and value is meant
	"$mpibin" $run $bad >"$tmp/bad.out" 2>&1
	st=$?
	opt=${bad%% *}
	opt=${opt%%=*}
	[ "$st" = 2 ] && grep -q -- "$opt" "$tmp/bad.out" || problem "$bad: exit status $st: $(head -n 1 "$tmp/bad.out")"
done

# a launcher of another MPI: N singletons each told of N tasks
OMPI_COMM_WORLD_SIZE=4 PMI_SIZE=4 "$mpibin" $run >"$tmp/guard.out" 2>&1
st=$?
[ "$st" = 3 ] || problem "launcher guard: exit status $st, expected 3"
grep -q "launcher started 4 tasks .* another MPI library" "$tmp/guard.out" || problem "launcher guard: $(cat "$tmp/guard.out")"

# the real thing where both libraries are installed: the other library's mpirun starts this build
other=
if [ "$ompi" = 1 ]; then other=$(command -v mpirun.mpich); else other=$(command -v mpirun.openmpi); fi
if [ -n "$other" ]; then
	timeout 120 "$other" -np 2 "$mpibin" $run >"$tmp/cross.out" 2>&1
	st=$?
	[ "$st" = 3 ] || problem "$other starting wsnorm-mpi: exit status $st, expected 3"
	grep -q "launcher started 2 tasks .* another MPI library" "$tmp/cross.out" ||
		problem "$other starting wsnorm-mpi: $(head -n 3 "$tmp/cross.out")"
else
	echo "check_mpi: the other MPI's mpirun is not installed: the launcher guard is tested by its variables alone"
fi

# --devices local: two ranks and one GPU of the fake CUDA driver is a usage error on every rank
if [ -n "$WSNORM_FAKE_CUDA_LIB" ] && [ -f "$WSNORM_FAKE_CUDA_LIB" ]; then
	mkdir "$tmp/fakecuda" && ln -s "$(cd "$(dirname "$WSNORM_FAKE_CUDA_LIB")" && pwd)/$(basename "$WSNORM_FAKE_CUDA_LIB")" \
		"$tmp/fakecuda/libcuda.so.1"
	LD_LIBRARY_PATH=$tmp/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} WSNORM_FAKE_CUDA_DEVICES=1 \
		mpi -np 2 "$mpibin" run --input "$tmp/ds.safetensors" --devices local >"$tmp/share.out" 2>&1
	st=$?
	[ "$st" = 2 ] || problem "--devices local, 2 ranks on 1 GPU: exit status $st, expected 2 ($(head -n 2 "$tmp/share.out"))"
	grep -q "2 ranks on node .* share 1 GPU" "$tmp/share.out" || problem "--devices local, 2 ranks on 1 GPU: $(head -n 2 "$tmp/share.out")"
else
	echo "check_mpi: no fake CUDA driver: --devices local with too few GPUs is not tested"
fi

# --devices local: with no GPU every rank takes the CPU; a usage error in one option stops all ranks
mpi -np 2 "$mpibin" run --input "$tmp/ds.safetensors" --devices local --threads 1 --json >"$tmp/local.json" 2>&1 ||
	problem "--devices local: exit status $?"
mpi -np 2 "$mpibin" $run --inject-fault 0 --fault-rank 5 >"$tmp/badrank.out" 2>&1
st=$?
[ "$st" = 2 ] || problem "--fault-rank 5 of 2: exit status $st, expected 2"
grep -q "fault-rank 5: the ranks are numbered 0..1" "$tmp/badrank.out" || problem "--fault-rank 5: $(head -n 2 "$tmp/badrank.out")"

exit $fail
