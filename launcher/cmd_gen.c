/* SPDX-License-Identifier: MIT */
/* launcher/cmd_gen.c: `wsnorm gen`: seeded synthetic safetensors inputs for an op and shape. */
#include "cli.h"
#include "pipeline.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s gen --op OP --rows N --hidden H --out PATH [OPTIONS]\n"
		"Write seeded random inputs for OP as safetensors: x (and dy, mean, rstd for backward ops),\n"
		"weight and bias. The same seed gives the same bytes on every machine.\n\n"
		"  --op OP          layernorm-fwd, layernorm-bwd, rmsnorm-fwd or rmsnorm-bwd\n"
		"  --dtype DT       f32, f16 or bf16 (default bf16)\n"
		"  --rows N         rows (K/M suffixes allowed)\n"
		"  --hidden H       hidden size (elements per row)\n"
		"  --shards K       split the rows over K files in directory PATH (default 1: PATH is a file);\n"
		"                   if one fails or a signal stops gen, those written\n"
		"                   are removed\n"
		"  --seed S         random seed: decimal, or 0x and hex digits (default %d)\n"
		"  --eps E          epsilon used for the stats of backward inputs (default %g)\n"
		"  --no-weight      no affine weight\n"
		"  --no-bias        no affine bias (LayerNorm)\n"
		"  --out PATH       output file, or directory for --shards > 1\n"
		"  -h, --help       show this help\n",
		cli_prog, CLI_DEFAULT_SEED, (double)WSN_DEFAULT_EPS);
}

struct gen {
	enum wsn_op op;
	enum wsn_dtype dt;
	int64_t rows, hidden;
	int shards;
	uint64_t seed;
	float eps;
	int weight, bias;
	const char *out;
};

/* Write one shard of `rows` rows to path, named `shown` in the note. Returns 0 or EXIT_RUNTIME. */
static int write_shard(const struct gen *g, struct wsn_device *cpu, int shard, int64_t rows,
		       const char *path, const char *shown)
{
	struct cli_op_io io;
	size_t es = wsn_dtype_size(g->dt), n = (size_t)rows * (size_t)g->hidden;
	struct wsn_tensor x, dy, w, b, mean, rstd, y;
	struct wsn_named_tensor list[6];
	char meta_op[32], meta_eps[32], meta_seed[32], meta_shard[32];
	const char *meta[] = { "wsnorm.op", meta_op, "wsnorm.eps", meta_eps, "wsnorm.seed", meta_seed,
			       "wsnorm.shard", meta_shard, NULL };
	void *block = NULL, *bx, *bdy = NULL, *bw = NULL, *bb = NULL, *by = NULL;
	float *bmean = NULL, *brstd = NULL;
	int nt = 0, err, ret = EXIT_RUNTIME;
	struct wsn_plan *plan = NULL;
	size_t xbytes = n * es, stats = ((size_t)rows * 4 + 63) / 64 * 64, total = xbytes;

	cli_op_io(g->op, &io);
	/*
	 * The shard's tensors in one block from the device, counted against the memory available (the
	 * machine's, its memory cgroup's): a shard that does not fit is refused before anything is
	 * allocated, rather than ended by the out-of-memory killer while it is filled.
	 */
	if (io.dy && (__builtin_mul_overflow(xbytes, (size_t)3, &total) ||
		      __builtin_add_overflow(total, 2 * stats, &total)))
		total = SIZE_MAX;
	if ((err = wsn_host_alloc(cpu, total, &block)) < 0) {
		cli_fail(err, "gen: a shard of %lld x %lld %s takes %zu bytes in memory at once (--shards splits the rows "
			 "over more files)", (long long)rows, (long long)g->hidden, wsn_dtype_name(g->dt), total);
		return EXIT_RUNTIME;
	}
	bx = block;
	if (io.dy) {
		bdy = (char *)block + xbytes;
		by = (char *)block + 2 * xbytes;
		bmean = (float *)((char *)block + 3 * xbytes);
		brstd = (float *)((char *)block + 3 * xbytes + stats);
	}
	bw = malloc((size_t)g->hidden * es);
	bb = malloc((size_t)g->hidden * es);
	if (!bw || !bb)
		goto oom;
	wsn_tensor_2d(&x, bx, g->dt, WSN_MEM_HOST, rows, g->hidden);
	wsn_tensor_1d(&w, bw, g->dt, WSN_MEM_HOST, g->hidden);
	wsn_tensor_1d(&b, bb, g->dt, WSN_MEM_HOST, g->hidden);
	wsn_tensor_fill_random(&x, cli_tensor_seed(g->seed, shard, 'x'), 0.25f, 1.0f);
	/* weight and bias are the same in every shard */
	wsn_tensor_fill_random(&w, cli_tensor_seed(g->seed, 0, 'w'), 1.0f, 0.25f);
	wsn_tensor_fill_random(&b, cli_tensor_seed(g->seed, 0, 'b'), 0.0f, 0.1f);
	list[nt++] = (struct wsn_named_tensor){ "x", &x };
	if (io.dy) {
		struct wsn_plan_options po;
		struct wsn_args a;

		wsn_tensor_2d(&dy, bdy, g->dt, WSN_MEM_HOST, rows, g->hidden);
		wsn_tensor_fill_random(&dy, cli_tensor_seed(g->seed, shard, 'd'), 0.0f, 1.0f);
		list[nt++] = (struct wsn_named_tensor){ "dy", &dy };
		/* the saved stats of the forward pass, as training would hand them to backward */
		wsn_plan_options_init(&po, io.fwd);
		po.eps = g->eps;
		po.has_weight = g->weight;
		po.has_bias = g->bias;
		if ((err = wsn_plan_create(cpu, io.fwd, rows, g->hidden, g->dt, &po, &plan)) < 0) {
			cli_fail(err, "gen: planning the forward stats");
			goto out;
		}
		memset(&a, 0, sizeof(a));
		a.x = x;
		if (g->weight)
			a.weight = w;
		if (g->bias && io.mean)
			a.bias = b;
		wsn_tensor_2d(&y, by, g->dt, WSN_MEM_HOST, rows, g->hidden);
		a.y = y;
		wsn_tensor_1d(&rstd, brstd, WSN_F32, WSN_MEM_HOST, rows);
		a.rstd = rstd;
		if (io.mean) {
			wsn_tensor_1d(&mean, bmean, WSN_F32, WSN_MEM_HOST, rows);
			a.mean = mean;
		}
		if ((err = wsn_plan_execute(plan, &a, NULL)) < 0) {
			cli_fail(err, "gen: computing the forward stats");
			goto out;
		}
		if (io.mean)
			list[nt++] = (struct wsn_named_tensor){ "mean", &mean };
		list[nt++] = (struct wsn_named_tensor){ "rstd", &rstd };
	}
	if (g->weight)
		list[nt++] = (struct wsn_named_tensor){ "weight", &w };
	if (g->bias && io.mean)
		list[nt++] = (struct wsn_named_tensor){ "bias", &b };
	snprintf(meta_op, sizeof(meta_op), "%s", wsn_op_name(g->op));
	snprintf(meta_eps, sizeof(meta_eps), "%.9g", (double)g->eps);
	snprintf(meta_seed, sizeof(meta_seed), "%llu", (unsigned long long)g->seed);
	snprintf(meta_shard, sizeof(meta_shard), "%d/%d", shard, g->shards);
	if ((err = wsn_st_write(path, list, nt, meta)) < 0) {
		cli_fail(err, "gen: cannot write '%s'", path);
		goto out;
	}
	cli_note("wrote %s: %d tensors, %lld x %lld %s\n", shown, nt, (long long)rows, (long long)g->hidden,
		 wsn_dtype_name(g->dt));
	ret = EXIT_PASS;
	goto out;
oom:
	/* a shard is made in memory: its tensors must fit there at once */
	fprintf(stderr, "%s: gen: out of memory for a shard of %lld x %lld %s (about %.3g GiB in memory at once; "
		"--shards splits the rows over more files)\n", cli_prog, (long long)rows, (long long)g->hidden,
		wsn_dtype_name(g->dt), (double)n * (double)es * (io.dy ? 3 : 1) / (1 << 30));
out:
	wsn_plan_destroy(plan);
	wsn_host_free(cpu, block);
	free(bw), free(bb);
	return ret;
}

/*
 * --out of a single shard, checked before anything is generated: a regular file to replace, or a name
 * where a file can be made (cli_check_new_file). 0 or EXIT_RUNTIME with the error printed.
 */
static int check_out_file(const char *path)
{
	char why[1024];
	struct stat st;

	if (stat(path, &st) < 0)
		return cli_check_new_file(path, errno, 0, why, sizeof(why)) ? cli_error("gen: %s", why) : 0;
	if (S_ISDIR(st.st_mode))
		return cli_error("gen: cannot write '%s': EISDIR: is a directory, not a file (--shards > 1 writes "
				 "a directory)", path);
	if (!S_ISREG(st.st_mode))
		return cli_error("gen: cannot write '%s': EEXIST: it exists and is not a regular file (the shard is "
				 "written to a temporary file and renamed over it)", path);
	return cli_check_replace(path, &st, why, sizeof(why)) ? cli_error("gen: %s", why) : 0;
}

/* Path of shard s of g in directory g->out. 0, or -1 when it does not fit. */
static int shard_path(const struct gen *g, int s, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/shard-%05d-of-%05d.safetensors", g->out, s, g->shards);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Where shard s is written first: a hidden name of this process in the same directory, renamed over
 * the shard's name once every shard is written. 0, or -1 when it does not fit. */
static int staged_path(const struct gen *g, int s, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/.shard-%05d-of-%05d.safetensors.gen-%ld", g->out, s, g->shards,
			 (long)getpid());

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/*
 * SIGINT, SIGTERM and SIGHUP during gen --shards: a thread takes them, removes the staged shards this
 * run finished and the directory it made, and ends the process by the same signal. The shard being
 * written has no name yet (see wsn_st_write(3)) and goes with the process. Once the staged shards
 * are being renamed into place the set is this run's: a signal then waits for the renames and
 * removes nothing.
 */
struct gen_stop {
	const struct gen *g;
	pthread_mutex_t lock;
	/* under lock: */
	int made;        /* this run created g->out */
	int done;        /* staged shards 0 .. done-1 are written */
	int over;        /* stop_end: the thread is to return */
	sigset_t set;    /* SIGINT, SIGTERM, SIGHUP; and SIGUSR1, which wakes the thread to end it */
	pthread_t thread;
	int running;
};

static void *stop_main(void *arg)
{
	struct gen_stop *st = arg;
	char path[4096];
	sigset_t one;
	int sig, removed = 0;

	for (;;) {
		if (sigwait(&st->set, &sig))
			return NULL;
		pthread_mutex_lock(&st->lock); /* kept until the process ends: no shard is counted after this */
		if (sig != SIGUSR1)
			break;
		if (st->over) { /* stop_end's wake-up (not a cancellation: that unwinds, and sanitizers object) */
			pthread_mutex_unlock(&st->lock);
			return NULL;
		}
		pthread_mutex_unlock(&st->lock); /* a SIGUSR1 from elsewhere: gen has no use for it */
	}
	/* the shard being written may have been given its staged name already */
	for (int k = 0; k <= st->done && k < st->g->shards; k++)
		if (!staged_path(st->g, k, path, sizeof(path)) && unlink(path) == 0)
			removed++;
	if (st->made)
		rmdir(st->g->out);
	fprintf(stderr, "%s: gen: stopped by %s; removed the %d shard%s it had written\n", cli_prog,
		sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP", removed, removed == 1 ? "" : "s");
	signal(sig, SIG_DFL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	raise(sig);
	_exit(128 + sig); /* not reached: the default action of sig ends the process */
}

static void stop_count(struct gen_stop *st, int made, int done);

/* Block the signals in this thread and every thread it starts, and start the thread that takes them. */
static void stop_start(struct gen_stop *st, const struct gen *g)
{
	st->g = g;
	st->done = st->made = st->running = st->over = 0;
	pthread_mutex_init(&st->lock, NULL);
	sigemptyset(&st->set);
	sigaddset(&st->set, SIGINT);
	sigaddset(&st->set, SIGTERM);
	sigaddset(&st->set, SIGHUP);
	sigaddset(&st->set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &st->set, NULL);
	stop_count(st, 0, 0);
	st->running = !pthread_create(&st->thread, NULL, stop_main, st);
}

/* What a signal would remove now: the directory if made, and staged shards 0 .. done. */
static void stop_count(struct gen_stop *st, int made, int done)
{
	pthread_mutex_lock(&st->lock);
	st->made = made;
	st->done = done;
	pthread_mutex_unlock(&st->lock);
}

/* The work is over (or failed and cleaned up): stop taking the signals. */
static void stop_end(struct gen_stop *st)
{
	if (st->running) {
		pthread_mutex_lock(&st->lock);
		st->over = 1;
		pthread_mutex_unlock(&st->lock);
		pthread_kill(st->thread, SIGUSR1);
		pthread_join(st->thread, NULL); /* or, if a signal came first, the process ends by it */
	}
	pthread_mutex_destroy(&st->lock);
	pthread_sigmask(SIG_UNBLOCK, &st->set, NULL);
}

/* Remove staged shards 0 .. n-1 (and staged shard n, which a failed write leaves no name of). */
static void unstage(const struct gen *g, int n)
{
	char path[4096];

	for (int k = 0; k <= n && k < g->shards; k++)
		if (!staged_path(g, k, path, sizeof(path)) && unlink(path) < 0 && errno != ENOENT)
			fprintf(stderr, "%s: gen: cannot remove '%s': %s\n", cli_prog, path, strerror(errno));
}

/*
 * --shards > 1: the shards in directory g->out, created if it does not exist. Every shard is
 * written under a hidden staged name first and renamed into place only when all are written, so
 * a set already there stays whole until the new one replaces it. On failure the staged shards are
 * removed again (and the directory, if this call made it and it is empty): a failed gen leaves no
 * part of a dataset behind. Returns 0 or EXIT_RUNTIME.
 */
static int write_dir(const struct gen *g, struct wsn_device *cpu, struct gen_stop *stop)
{
	char path[4096], final[4096];
	int made = 0, s, ret = EXIT_PASS;

	if (mkdir(g->out, 0777) == 0) {
		made = 1;
	} else if (errno != EEXIST) {
		fprintf(stderr, "%s: gen: cannot create directory '%s': %s\n", cli_prog, g->out, strerror(errno));
		return EXIT_RUNTIME;
	} else if (pl_shard_stale(g->out, "shard", g->shards, path, sizeof(path))) {
		/* run would read both sets as one dataset */
		return cli_error("gen: directory '%s' already holds '%s', a shard of another set: remove that set "
				 "or give another --out", g->out, path);
	}
	/* a name taken by something that is not a file would stop the renames half way: refuse it now */
	for (s = 0; s < g->shards; s++) {
		struct stat st;

		if (shard_path(g, s, final, sizeof(final)) || staged_path(g, s, path, sizeof(path))) {
			fprintf(stderr, "%s: gen: path too long: %s\n", cli_prog, g->out);
			return EXIT_RUNTIME;
		}
		if (!lstat(final, &st) && !S_ISREG(st.st_mode))
			return cli_error("gen: '%s' is in the way: it is not a regular file", final);
	}
	stop_count(stop, made, 0);
	for (s = 0; s < g->shards; s++) {
		int64_t r0 = g->rows * s / g->shards, r1 = g->rows * (s + 1) / g->shards;

		staged_path(g, s, path, sizeof(path));
		shard_path(g, s, final, sizeof(final));
		if ((ret = write_shard(g, cpu, s, r1 - r0, path, final)))
			break;
		stop_count(stop, made, s + 1);
	}
	if (!ret) {
		/* every shard is written: the renames, with the signal thread held off (it then removes nothing) */
		pthread_mutex_lock(&stop->lock);
		for (s = 0; s < g->shards && !ret; s++)
			if (!staged_path(g, s, path, sizeof(path)) && !shard_path(g, s, final, sizeof(final)) &&
			    rename(path, final) < 0)
				ret = cli_error("gen: cannot rename '%s' to '%s': %s (shards 0 to %d of the new set are in "
						"place, the rest are staged under hidden names)", path, final,
						strerror(errno), s - 1);
		stop->done = -1; /* nothing of this run's is staged any more */
		pthread_mutex_unlock(&stop->lock);
		return ret;
	}
	unstage(g, s);
	if (made && rmdir(g->out) < 0 && errno != ENOTEMPTY && errno != EEXIST)
		fprintf(stderr, "%s: gen: cannot remove directory '%s': %s\n", cli_prog, g->out, strerror(errno));
	if (s > 0)
		cli_note("removed the %d shard%s written before the error\n", s, s > 1 ? "s" : "");
	return ret;
}

int cmd_gen(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "op", required_argument, NULL, 'o' },     { "dtype", required_argument, NULL, 'd' },
		{ "rows", required_argument, NULL, 'r' },   { "hidden", required_argument, NULL, 'H' },
		{ "shards", required_argument, NULL, 'k' }, { "seed", required_argument, NULL, 's' },
		{ "eps", required_argument, NULL, 'e' },    { "no-weight", no_argument, NULL, 'W' },
		{ "no-bias", no_argument, NULL, 'B' },      { "out", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	struct gen g = { .dt = WSN_BF16, .shards = 1, .seed = CLI_DEFAULT_SEED, .eps = WSN_DEFAULT_EPS,
			 .weight = 1, .bias = 1 };
	struct wsn_device *cpu = NULL;
	int have_op = 0, c, ret = EXIT_PASS;
	int64_t v;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (wsn_op_parse(optarg, &g.op) < 0)
				return cli_usage_error("gen", "%s", wsn_last_error());
			have_op = 1;
			break;
		case 'd':
			if (wsn_dtype_parse(optarg, &g.dt) < 0)
				return cli_usage_error("gen", "%s", wsn_last_error());
			break;
		case 'r':
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &g.rows))
				return cli_usage_error("gen", "bad --rows '%s' (expected 1..2^40)", optarg);
			break;
		case 'H':
			if (cli_parse_i64(optarg, 1, CLI_MAX_HIDDEN, &g.hidden))
				return cli_usage_error("gen", "bad --hidden '%s' (expected 1..%d)", optarg, CLI_MAX_HIDDEN);
			break;
		case 'k':
			if (cli_parse_count(optarg, 1, CLI_MAX_SHARDS, &v))
				return cli_usage_error("gen", "bad --shards '%s' (expected 1..%d)", optarg, CLI_MAX_SHARDS);
			g.shards = (int)v;
			break;
		case 's':
			if (cli_parse_u64(optarg, &g.seed))
				return cli_usage_error("gen", "bad --seed '%s' (expected 0..2^64-1, decimal or 0x and hex digits)",
						       optarg);
			break;
		case 'e':
			if (cli_parse_eps(optarg, &g.eps))
				return cli_usage_error("gen", "bad --eps '%s' (expected 0 < eps <= 1, from 1.4e-45, the least positive float)", optarg);
			break;
		case 'W': g.weight = 0; break;
		case 'B': g.bias = 0; break;
		case 'O':
			if (!*optarg)
				return cli_usage_error("gen", "--out needs a path (got an empty one)");
			g.out = optarg;
			break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':':
		default: return cli_option_error("gen", c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error("gen", "unexpected argument '%s'", argv[optind]);
	if (!have_op)
		return cli_usage_error("gen", "--op is required");
	if (!g.rows || !g.hidden)
		return cli_usage_error("gen", "--rows and --hidden are required");
	if (!g.out)
		return cli_usage_error("gen", "--out is required");
	if (g.shards > g.rows)
		return cli_usage_error("gen", "--shards %d is more than --rows %lld", g.shards, (long long)g.rows);
	if (g.rows > (int64_t)(SIZE_MAX / 4) / g.hidden) { /* each value in range, the two together too many */
		cli_error("gen: %lld rows x %lld elements is more than this machine can address", (long long)g.rows,
			  (long long)g.hidden);
		return EXIT_RUNTIME;
	}
	if (g.shards == 1) {
		if (!(ret = check_out_file(g.out)) && !(ret = cli_open_device("gen", "cpu", 0, &cpu)))
			ret = write_shard(&g, cpu, 0, g.rows, g.out, g.out);
	} else {
		struct gen_stop stop;

		/*
		 * The signals are blocked before the device is opened: opening it starts the backends, and
		 * a GPU driver's threads started then would take a SIGINT with its default action, ending
		 * the process before the shards are removed.
		 */
		stop_start(&stop, &g);
		if (!(ret = cli_open_device("gen", "cpu", 0, &cpu)))
			ret = write_dir(&g, cpu, &stop);
		stop_end(&stop);
	}
	wsn_device_close(cpu);
	return ret;
}

int cli_gen_file(enum wsn_op op, enum wsn_dtype dt, int64_t rows, int64_t hidden, uint64_t seed,
		 const char *path)
{
	struct gen g = { .op = op, .dt = dt, .rows = rows, .hidden = hidden, .shards = 1, .seed = seed,
			 .eps = WSN_DEFAULT_EPS, .weight = 1, .bias = 1, .out = path };
	struct wsn_device *cpu = NULL;
	int ret = cli_open_device("gen", "cpu", 0, &cpu);

	if (!ret)
		ret = write_shard(&g, cpu, 0, rows, path, path);
	wsn_device_close(cpu);
	return ret;
}
