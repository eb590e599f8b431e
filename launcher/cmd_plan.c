/* SPDX-License-Identifier: MIT */
/* launcher/cmd_plan.c: `wsnorm plan` and `wsnorm emit`: the plan and the generated PTX for a shape. */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

struct shape_opts {
	enum wsn_op op;
	int have_op;
	enum wsn_dtype dt;
	int64_t hidden, rows;
	struct wsn_plan_options po;
	int force[CLI_KP_COUNT]; /* forced GPU kernel parameters, 0: the planner's */
	const char *device; /* plan: a real device instead of the modelled one */
	int json;
};

static void usage(FILE *f, const char *cmd)
{
	int emit = !strcmp(cmd, "emit");

	fprintf(f,
		"Usage: %s %s --op OP --hidden H [OPTIONS]\n"
		"%s\n\n"
		"  --op OP            layernorm-fwd, layernorm-bwd, rmsnorm-fwd or rmsnorm-bwd\n"
		"  --dtype DT         f32, f16 or bf16 (default bf16)\n"
		"  --hidden H         hidden size\n"
		"  --rows N           rows the plan is for (default %d)\n"
		"  --approach A       auto, multiwave or ws (default auto%s)\n"
		"  --arch ARCH        sm_90a or sm_100a (default sm_90a%s)\n"
		"  --block-threads N  force threads per row (bdimx): a multiple of 32 up to 1024\n"
		"  --groups N         force rows per CTA (bdimy): 1..32\n"
		"  --unroll N         force rows per iteration (ws): 1..8\n"
		"  --stages N         force circular-buffer stages (ws): 1..32\n"
		"  --cluster N        force CTAs per row: 1, 2, 4 or 8 (ws backward)\n"
		"%s"
		"  --eps E            epsilon (default %g)\n"
		"  --no-weight        no affine weight\n"
		"  --no-bias          no affine bias\n"
		"%s"
		"  -h, --help         show this help\n",
		cli_prog, cmd,
		emit ? "Print the PTX that a GPU plan for this shape would JIT-compile. Needs no GPU: planning\n"
		       "assumes an H100 (sm_90a) or a B200-like device (sm_100a)."
		     : "Print the plan for this shape: the kernel family, every parameter, the shared-memory and\n"
		       "register budgets, and which rule decided. Without --device it plans for a modelled\n"
		       "H100 (or B200-like device with --arch sm_100a) and needs no GPU.",
		CLI_DEFAULT_BENCH_ROWS, emit ? "" : "; the CPU ignores it", emit ? "" : "; with --device: the GPU's own",
		emit ? "" : "                     (GPU only: with --device cpu, --arch and these five are errors)\n",
		(double)WSN_DEFAULT_EPS,
		emit ? "" : "  --device SPEC      plan on a real device: auto, cpu, cuda[:N] or amd[:N]\n"
			    "  --autotune         with --device: time multiwave and ws (the backward's ws in its shapes\n"
			    "                     that fit) on the GPU once and cache the winner (auto approach,\n"
			    "                     nothing forced; see FILES in wsnorm(1))\n"
			    "  --json             machine-readable output\n");
}

/* The options of emit; plan takes these and PLAN_OPTIONS. */
#define SHAPE_OPTIONS                                                                           \
	{ "op", required_argument, NULL, 'o' }, { "dtype", required_argument, NULL, 'd' },      \
	{ "hidden", required_argument, NULL, 'H' }, { "rows", required_argument, NULL, 'r' },   \
	{ "approach", required_argument, NULL, 'a' }, { "arch", required_argument, NULL, 'A' }, \
	CLI_KPARAM_OPTIONS, { "eps", required_argument, NULL, 'e' },                            \
	{ "no-weight", no_argument, NULL, 'W' }, { "no-bias", no_argument, NULL, 'B' },         \
	{ "help", no_argument, NULL, 'h' }
#define PLAN_OPTIONS                                                                    \
	{ "device", required_argument, NULL, 'D' }, { "json", no_argument, NULL, 'j' }, \
	{ "autotune", no_argument, NULL, 'T' }

static int parse(int argc, char **argv, const char *cmd, struct shape_opts *o)
{
	static const struct option emit_opts[] = { SHAPE_OPTIONS, { NULL, 0, NULL, 0 } };
	static const struct option plan_opts[] = { SHAPE_OPTIONS, PLAN_OPTIONS, { NULL, 0, NULL, 0 } };
	const struct option *opts = strcmp(cmd, "emit") ? plan_opts : emit_opts;
	int c, nb = -1, have_eps = 0, r;
	float eps = WSN_DEFAULT_EPS;

	memset(o, 0, sizeof(*o));
	o->dt = WSN_BF16;
	o->rows = CLI_DEFAULT_BENCH_ROWS;
	wsn_plan_options_init(&o->po, WSN_LAYERNORM_FWD);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (wsn_op_parse(optarg, &o->op) < 0)
				return cli_usage_error(cmd, "%s", wsn_last_error());
			o->have_op = 1;
			break;
		case 'd':
			if (wsn_dtype_parse(optarg, &o->dt) < 0)
				return cli_usage_error(cmd, "%s", wsn_last_error());
			break;
		case 'H':
			if (cli_parse_i64(optarg, 1, CLI_MAX_HIDDEN, &o->hidden))
				return cli_usage_error(cmd, "bad --hidden '%s' (expected 1..%d)", optarg, CLI_MAX_HIDDEN);
			break;
		case 'r':
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &o->rows))
				return cli_usage_error(cmd, "bad --rows '%s' (expected 1..2^40)", optarg);
			break;
		case 'a':
			if (wsn_approach_parse(optarg, &o->po.approach) < 0)
				return cli_usage_error(cmd, "%s", wsn_last_error());
			break;
		case 'A':
			if ((o->po.arch = cli_parse_arch(optarg)) < 0)
				return cli_usage_error(cmd, "bad --arch '%s' (expected sm_90a or sm_100a)", optarg);
			break;
		CLI_KPARAM_CASES:
			if ((r = cli_parse_kparam(cmd, c - CLI_OPT_KPARAM, optarg, o->force)))
				return r;
			break;
		case 'e':
			if (cli_parse_eps(optarg, &eps))
				return cli_usage_error(cmd, "bad --eps '%s' (expected 0 < eps <= 1, from 1.4e-45, the least positive float)", optarg);
			have_eps = 1;
			break;
		case 'W': o->po.has_weight = 0; break;
		case 'B': nb = 0; break;
		case 'D':
			if (wsn_device_spec_parse(optarg, NULL, NULL) < 0)
				return cli_usage_error("plan", "bad --device '%s' (expected auto, cpu, cuda[:N] or amd[:N])",
						       optarg);
			o->device = optarg;
			break;
		case 'j': o->json = 1; break;
		case 'T': o->po.autotune = 1; break;
		case 'h': usage(stdout, cmd); return -1;
		case ':':
		default: return cli_option_error(cmd, c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	if (!o->have_op)
		return cli_usage_error(cmd, "--op is required");
	if (!o->hidden)
		return cli_usage_error(cmd, "--hidden is required");
	if (o->po.autotune && !o->device)
		return cli_usage_error(cmd, "--autotune times kernels on a real GPU: give --device (e.g. --device cuda:0)");
	cli_kparam_apply(o->force, &o->po);
	{
		struct wsn_plan_options d;
		wsn_plan_options_init(&d, o->op);
		o->po.has_bias = nb == 0 ? 0 : d.has_bias;
		o->po.eps = have_eps ? eps : d.eps;
	}
	return 0;
}

int cmd_emit(int argc, char **argv)
{
	struct shape_opts o;
	char *ptx = NULL;
	int r = parse(argc, argv, "emit", &o), err;

	if (r)
		return r < 0 ? EXIT_PASS : r;
	if ((err = wsn_emit_ptx(o.op, o.dt, o.hidden, o.rows, &o.po, &ptx, NULL)) < 0)
		return cli_fail(err, "emit: %s %s hidden %lld", wsn_op_name(o.op), wsn_dtype_name(o.dt),
				(long long)o.hidden);
	fputs(ptx, stdout);
	free(ptx);
	return EXIT_PASS;
}

/* Print plan --json: the plan's JSON object with its text added as "text". */
static int print_json(const char *json, const char *text)
{
	json_error_t e;
	json_t *j = json_loads(json, 0, &e);

	if (!j || json_object_set_new(j, "text", cli_json_text(text))) {
		json_decref(j);
		return cli_fail(WSN_ENOMEM, "plan: JSON: %s", j ? "out of memory" : e.text);
	}
	cli_json_print(j);
	return EXIT_PASS;
}

int cmd_plan(int argc, char **argv)
{
	struct shape_opts o;
	char *text = NULL, *json = NULL;
	int r = parse(argc, argv, "plan", &o), err, ret = EXIT_PASS;

	if (r)
		return r < 0 ? EXIT_PASS : r;
	if (o.device) {
		struct wsn_device *dev = NULL;
		struct wsn_device_info di;
		struct wsn_plan *plan = NULL;
		int n;

		if ((ret = cli_open_device("plan", o.device, 0, &dev))) {
			/* the error's document below */
		} else if (wsn_device_info(dev, &di) == 0 &&
			   (ret = cli_kparam_gpu_only("plan", o.device, &di, o.force, o.po.arch))) {
			wsn_device_close(dev);
			return ret;
		} else if ((err = wsn_plan_create(dev, o.op, o.rows, o.hidden, o.dt, &o.po, &plan)) < 0)
			ret = cli_fail(err, "plan: %s %s hidden %lld on %s", wsn_op_name(o.op), wsn_dtype_name(o.dt),
				       (long long)o.hidden, o.device);
		else if ((n = wsn_plan_describe(plan, NULL, 0)) < 0 || !(text = malloc((size_t)n + 1)))
			ret = cli_fail(n < 0 ? n : WSN_ENOMEM, "plan: describe");
		else
			wsn_plan_describe(plan, text, (size_t)n + 1);
		if (!ret && o.json) {
			if ((n = wsn_plan_describe_json(plan, NULL, 0)) < 0 || !(json = malloc((size_t)n + 1)))
				ret = cli_fail(n < 0 ? n : WSN_ENOMEM, "plan: describe as JSON");
			else
				wsn_plan_describe_json(plan, json, (size_t)n + 1);
		}
		wsn_plan_destroy(plan);
		wsn_device_close(dev);
	} else if ((err = wsn_emit_plan(o.op, o.dt, o.hidden, o.rows, &o.po, &text, o.json ? &json : NULL)) < 0) {
		ret = cli_fail(err, "plan: %s %s hidden %lld", wsn_op_name(o.op), wsn_dtype_name(o.dt),
			       (long long)o.hidden);
	}
	if (!ret) {
		if (o.json)
			ret = print_json(json, text); /* prints nothing when it fails: the error's document below */
		else
			fputs(text, stdout);
	}
	if (ret == EXIT_RUNTIME && o.json) { /* the document still comes: the shape and the error */
		json_t *j = json_object();

		json_object_set_new(j, "op", json_string(wsn_op_name(o.op)));
		json_object_set_new(j, "dtype", json_string(wsn_dtype_name(o.dt)));
		json_object_set_new(j, "rows", json_integer(o.rows));
		json_object_set_new(j, "hidden", json_integer(o.hidden));
		json_object_set_new(j, "device", json_string(o.device ? o.device : o.po.arch == 100 ? "model:b200"
												  : "model:h100"));
		json_object_set_new(j, "error", json_string(cli_last_error()));
		cli_json_print(j);
	}
	free(text);
	free(json);
	return ret;
}
