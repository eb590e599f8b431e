/* SPDX-License-Identifier: MIT */
/* launcher/bench_options.c: `wsnorm bench`'s command line: its help, lists of ops, dtypes and sizes. */
#include "bench.h"
#include "pipeline.h" /* PL_DEFAULT_RING, in the help */

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s bench [OPTIONS]\n"
		"Time each op on device-resident inputs, rotated over enough input sets to exceed the L2\n"
		"cache, two ways after a warm-up: events around batches of back-to-back launches (on a GPU\n"
		"each batch queued behind a hold of the stream, so the host's launch rate is not what is\n"
		"timed), and events around single calls, each after a fill that flushes the L2; report the\n"
		"median time per launch, the throughput over the fewest bytes the op must move, and its\n"
		"fraction of the device-to-device copy bandwidth measured in the same run; then check each\n"
		"op's outputs once against the CPU reference (exit status 1 if any is out of tolerance).\n\n"
		"  --device SPEC    auto, cpu, cuda[:N] or amd[:N] (default auto)\n"
		"  --op LIST        ops, comma-separated (default %s)\n"
		"  --dtype LIST     dtypes, comma-separated (default bf16)\n"
		"  --hidden LIST    hidden sizes, comma-separated, K suffix allowed (default %s)\n"
		"                   (each of these three given again adds to its list)\n"
		"  --rows N         rows (default %d; %d on the CPU)\n"
		"  --iters N        timed batches, the median is reported (default %d; %d on the CPU)\n"
		"  --batch N        launches per timed batch (default: a multiple of the sets that runs\n"
		"                   at least %d ms on a GPU, so the host's time to submit the first\n"
		"                   launch is not counted; one launch per set on the CPU)\n"
		"  --warmup N       untimed launches first (default %d)\n"
		"  --timing T       batch (back to back), single (each call alone, L2 flushed before it)\n"
		"                   or both (default both)\n"
		"  --calls N        single calls timed, the median is reported (default %d; %d on the CPU)\n"
		"  --approach A     auto, multiwave or ws (default auto; the CPU ignores it)\n"
		"  --autotune       with approach auto: time multiwave and ws (the backward's ws in its\n"
		"                   shapes that fit) once per shape on the GPU and cache the winner, as\n"
		"                   for run (the approach column says tuned+)\n"
		"  --block-threads N, --groups N, --unroll N, --stages N, --cluster N\n"
		"                   force a plan parameter, as for plan (default: the planner's; GPU only:\n"
		"                   not with the CPU device)\n"
		"  --no-weight      no affine weight (and no dweight)\n"
		"  --no-bias        no affine bias (and no dbias; LayerNorm)\n"
		"  --no-verify      do not check the outputs (the check column says off)\n"
		"  --inject-mismatch corrupt one output element before the check (a self-test, exit status 1)\n"
		"  --copy-size SIZE bytes of the copy-bandwidth buffer (default 1G; 256M on the CPU), or\n"
		"                   with --h2d of each copy (default 256M; 64M on the CPU)\n"
		"  --h2d            instead of kernels, time host-to-device and device-to-host copies\n"
		"                   from a ring of %d pinned host buffers, --iters copies each way\n"
		"  --json           machine-readable output\n"
		"  -h, --help       show this help\n",
		cli_prog, CLI_DEFAULT_BENCH_OPS, CLI_DEFAULT_BENCH_HIDDEN, CLI_DEFAULT_BENCH_ROWS, CPU_DEFAULT_ROWS,
		CLI_DEFAULT_BENCH_ITERS, CPU_DEFAULT_ITERS, (int)CLI_BATCH_MS, CLI_DEFAULT_BENCH_WARMUP, SINGLE_CALLS,
		CPU_SINGLE_CALLS, PL_DEFAULT_RING);
}

static int parse_list(const char *s, int (*one)(const char *, int *), int *out, int max)
{
	char buf[512], *save = NULL, *tok;
	int n = 0;

	if (strlen(s) >= sizeof(buf) || cli_list_has_empty(s))
		return -1;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n >= max || one(tok, &out[n]))
			return -1;
		n++;
	}
	return n ? n : -1;
}

static int one_op(const char *s, int *v)
{
	enum wsn_op op;
	if (wsn_op_parse(s, &op) < 0)
		return -1;
	*v = (int)op;
	return 0;
}

static int one_dt(const char *s, int *v)
{
	enum wsn_dtype dt;
	if (wsn_dtype_parse(s, &dt) < 0)
		return -1;
	*v = (int)dt;
	return 0;
}

/* Does a list repeat a value? The index of its second naming, or -1; *first: the first's. */
static int repeated(const int64_t *v, int n, int *first)
{
	for (int i = 1; i < n; i++)
		for (int k = 0; k < i; k++)
			if (v[k] == v[i]) {
				*first = k;
				return i;
			}
	return -1;
}

static int repeated_int(const int *v, int n, int *first)
{
	int64_t w[MAX_LIST];

	for (int i = 0; i < n && i < MAX_LIST; i++)
		w[i] = v[i];
	return repeated(w, n < MAX_LIST ? n : MAX_LIST, first);
}

/*
 * A value named twice in a list option's values so far: first is the index of its first naming, base
 * the index where this option's own values start.
 */
static int list_repeat(const char *opt, const char *arg, const char *value, int first, int base)
{
	if (first < base)
		return cli_usage_error("bench", "%s '%s' names %s, which an earlier %s named", opt, arg, value, opt);
	return cli_usage_error("bench", "%s '%s' names %s twice", opt, arg, value);
}

int bench_parse_options(int argc, char **argv, struct bench_opts *o)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'D' },  { "op", required_argument, NULL, 'o' },
		{ "dtype", required_argument, NULL, 'd' },   { "hidden", required_argument, NULL, 'H' },
		{ "rows", required_argument, NULL, 'r' },    { "iters", required_argument, NULL, 'i' },
		{ "warmup", required_argument, NULL, 'w' },  { "approach", required_argument, NULL, 'a' },
		{ "copy-size", required_argument, NULL, 'c' }, { "json", no_argument, NULL, 'j' },
		{ "h2d", no_argument, NULL, 'T' },            { "autotune", no_argument, NULL, 'A' },
		CLI_KPARAM_OPTIONS,                          { "no-weight", no_argument, NULL, 'W' },
		{ "no-bias", no_argument, NULL, 'B' },       { "batch", required_argument, NULL, 'b' },
		{ "no-verify", no_argument, NULL, 'V' },     { "inject-mismatch", no_argument, NULL, 'I' },
		{ "timing", required_argument, NULL, 't' },  { "calls", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret, k, base, n, first;
	int given = 0; /* --op 1, --dtype 2, --hidden 4 (a later one adds to the list) */
	const char *kernel_opt = NULL; /* the last option that only the kernels' table uses */
	int64_t v;
	char sz[32];

	memset(o, 0, sizeof(*o));
	o->device = "auto";
	o->nops = parse_list(CLI_DEFAULT_BENCH_OPS, one_op, o->ops, WSN_OP_COUNT);
	o->ndts = 1;
	o->dts[0] = WSN_BF16;
	o->nhidden = cli_parse_i64_list(CLI_DEFAULT_BENCH_HIDDEN, 1, CLI_MAX_HIDDEN, o->hidden, MAX_LIST);
	o->rows = CLI_DEFAULT_BENCH_ROWS;
	o->iters = CLI_DEFAULT_BENCH_ITERS;
	o->warmup = CLI_DEFAULT_BENCH_WARMUP;
	o->timing = TIMING_BOTH;
	o->calls = SINGLE_CALLS;
	o->copy_bytes = 1ull << 30;
	o->weight = o->bias = 1;
	o->verify = 1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'D':
			if (wsn_device_spec_parse(optarg, NULL, NULL) < 0)
				return cli_usage_error("bench", "bad --device '%s' (expected auto, cpu, cuda[:N] or amd[:N])",
						       optarg);
			o->device = optarg;
			break;
		case 'o':
			/* a list option given again adds to the list, as a longer list would */
			base = given & 1 ? o->nops : 0;
			if ((n = parse_list(optarg, one_op, o->ops + base, MAX_LIST - base)) < 0)
				return cli_usage_error("bench", "bad --op '%s' (expected %s, comma-separated)", optarg,
						       "layernorm-fwd, layernorm-bwd, rmsnorm-fwd or rmsnorm-bwd");
			o->nops = base + n;
			if ((k = repeated_int(o->ops, o->nops, &first)) >= 0)
				return list_repeat("--op", optarg, wsn_op_name((enum wsn_op)o->ops[k]), first, base);
			given |= 1;
			kernel_opt = "--op";
			break;
		case 'd':
			base = given & 2 ? o->ndts : 0;
			if ((n = parse_list(optarg, one_dt, o->dts + base, MAX_LIST - base)) < 0)
				return cli_usage_error("bench", "bad --dtype '%s' (expected f32, f16 or bf16, comma-separated)",
						       optarg);
			o->ndts = base + n;
			if ((k = repeated_int(o->dts, o->ndts, &first)) >= 0)
				return list_repeat("--dtype", optarg, wsn_dtype_name((enum wsn_dtype)o->dts[k]), first, base);
			given |= 2;
			kernel_opt = "--dtype";
			break;
		case 'H':
			base = given & 4 ? o->nhidden : 0;
			if ((n = cli_parse_i64_list(optarg, 1, CLI_MAX_HIDDEN, o->hidden + base, MAX_LIST - base)) < 0)
				return cli_usage_error("bench", "bad --hidden '%s' (expected up to %d sizes 1..%d in all, "
						       "comma-separated)", optarg, MAX_LIST, CLI_MAX_HIDDEN);
			o->nhidden = base + n;
			if ((k = repeated(o->hidden, o->nhidden, &first)) >= 0) {
				snprintf(sz, sizeof(sz), "%lld", (long long)o->hidden[k]);
				return list_repeat("--hidden", optarg, sz, first, base);
			}
			given |= 4;
			kernel_opt = "--hidden";
			break;
		case 'r':
			if (cli_parse_i64(optarg, 1, 1LL << 31, &o->rows))
				return cli_usage_error("bench", "bad --rows '%s' (expected 1..2^31)", optarg);
			o->have_rows = 1;
			kernel_opt = "--rows";
			break;
		case 'i': case 'w':
			if (cli_parse_count(optarg, c == 'i' ? 1 : 0, 100000, &v))
				return cli_usage_error("bench", "bad %s '%s' (expected %d..100000)", c == 'i' ? "--iters" : "--warmup",
						       optarg, c == 'i' ? 1 : 0);
			if (c == 'i') {
				o->iters = (int)v, o->have_iters = 1;
			} else {
				o->warmup = (int)v;
				kernel_opt = "--warmup";
			}
			break;
		case 't':
			if (!strcmp(optarg, "batch"))
				o->timing = TIMING_BATCH;
			else if (!strcmp(optarg, "single"))
				o->timing = TIMING_SINGLE;
			else if (!strcmp(optarg, "both"))
				o->timing = TIMING_BOTH;
			else
				return cli_usage_error("bench", "bad --timing '%s' (expected batch, single or both)", optarg);
			kernel_opt = "--timing";
			break;
		case 'C':
			if (cli_parse_count(optarg, 1, MAX_CALLS, &v))
				return cli_usage_error("bench", "bad --calls '%s' (expected 1..%d)", optarg, MAX_CALLS);
			o->calls = (int)v, o->have_calls = 1;
			kernel_opt = "--calls";
			break;
		case 'b':
			if (cli_parse_count(optarg, 1, MAX_BATCH, &v))
				return cli_usage_error("bench", "bad --batch '%s' (expected 1..%d)", optarg, MAX_BATCH);
			o->batch = (int)v;
			kernel_opt = "--batch";
			break;
		case 'a':
			if (wsn_approach_parse(optarg, &o->approach) < 0)
				return cli_usage_error("bench", "%s", wsn_last_error());
			kernel_opt = "--approach";
			break;
		case 'c':
			if (cli_parse_size(optarg, &o->copy_bytes) || o->copy_bytes < 4096)
				return cli_usage_error("bench", "bad --copy-size '%s' (expected 4096 bytes or more, below 2^63)",
						       optarg);
			o->have_copy = 1;
			break;
		CLI_KPARAM_CASES:
			if ((ret = cli_parse_kparam("bench", c - CLI_OPT_KPARAM, optarg, o->force)))
				return ret;
			kernel_opt = cli_kparam_forced(o->force);
			break;
		case 'j': o->json = 1; break;
		case 'T': o->h2d = 1; break;
		case 'A': o->autotune = 1, kernel_opt = "--autotune"; break;
		case 'W': o->weight = 0, kernel_opt = "--no-weight"; break;
		case 'B': o->bias = 0, kernel_opt = "--no-bias"; break;
		case 'V': o->verify = 0, kernel_opt = "--no-verify"; break;
		case 'I': o->inject_mismatch = 1, kernel_opt = "--inject-mismatch"; break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':':
		default: return cli_option_error("bench", c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
	if (o->h2d && kernel_opt)
		return cli_usage_error("bench", "--h2d times copies, not kernels: drop %s", kernel_opt);
	if (o->have_calls && !(o->timing & TIMING_SINGLE))
		return cli_usage_error("bench", "--calls counts single calls, which --timing batch leaves out: drop one");
	if (o->batch && !(o->timing & TIMING_BATCH))
		return cli_usage_error("bench", "--batch sizes the batches, which --timing single leaves out: drop one");
	if (o->inject_mismatch && !o->verify)
		return cli_usage_error("bench", "--inject-mismatch tests the check that --no-verify turns off: drop one");
	return -1;
}
