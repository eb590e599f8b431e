/* SPDX-License-Identifier: MIT */
/* launcher/pipeline.c: the `wsnorm run` pipeline: read -> H2D -> kernel -> D2H -> verify -> write, per device. */
#include "pipeline.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLACK 4096u  /* room before each input so a read can land aligned like its file offset */
#define DEV_ALIGN 256u
#define ALONE_SECONDS 0.2 /* how long a stage measured alone is repeated, at least */
#define ALONE_MIN_REPS 3
#define ALONE_MAX_REPS 1000000

const char *const pl_in_names[PL_NIN] = { "x", "dy", "weight", "bias", "mean", "rstd" };
const char *const pl_out_names[PL_NOUT] = { "y", "dx", "dweight", "dbias", "mean", "rstd" };
const char *const pl_stage_names[ST_N] = { "read", "h2d", "compute", "d2h", "verify", "write" };

/* ---- shapes ---- */

void pl_shape_init(struct pl_shape *sh, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int has_weight,
		   int has_bias, float eps)
{
	size_t es = wsn_dtype_size(dt), vec = (size_t)hidden * es;
	int bwd = wsn_op_is_backward(op), ln = wsn_op_is_layernorm(op);

	memset(sh, 0, sizeof(*sh));
	sh->op = op;
	sh->dt = dt;
	sh->hidden = hidden;
	sh->has_weight = has_weight;
	sh->has_bias = has_bias && ln;
	sh->eps = eps;
	sh->in[PL_IN_X] = true;
	sh->in[PL_IN_DY] = bwd;
	sh->in[PL_IN_W] = has_weight;
	sh->in[PL_IN_B] = sh->has_bias;
	sh->in[PL_IN_MEAN] = bwd && ln;
	sh->in[PL_IN_RSTD] = bwd;
	sh->out[PL_OUT_Y] = !bwd;
	sh->out[PL_OUT_DX] = bwd;
	sh->out[PL_OUT_DW] = bwd && has_weight;
	sh->out[PL_OUT_DB] = bwd && sh->has_bias;
	sh->out[PL_OUT_MEAN] = !bwd && ln;
	sh->out[PL_OUT_RSTD] = !bwd;
	for (int i = 0; i < PL_NIN; i++) {
		sh->in_row[i] = i != PL_IN_W && i != PL_IN_B;
		sh->in_unit[i] = i == PL_IN_MEAN || i == PL_IN_RSTD ? 4 : vec;
	}
	for (int i = 0; i < PL_NOUT; i++) {
		sh->out_row[i] = i != PL_OUT_DW && i != PL_OUT_DB;
		sh->out_unit[i] = i == PL_OUT_MEAN || i == PL_OUT_RSTD ? 4 : vec;
	}
}

size_t pl_in_bytes(const struct pl_shape *sh, int i, int64_t rows)
{
	return !sh->in[i] ? 0 : sh->in_row[i] ? (size_t)rows * sh->in_unit[i] : sh->in_unit[i];
}

size_t pl_out_bytes(const struct pl_shape *sh, int i, int64_t rows)
{
	return !sh->out[i] ? 0 : sh->out_row[i] ? (size_t)rows * sh->out_unit[i] : sh->out_unit[i];
}

/* ---- latency histograms ---- */

void pl_hist_add_n(struct pl_hist *h, double s, uint64_t n)
{
	int b = !(s > 0) ? 0 : !(s < 1e4) ? PL_HIST_BUCKETS - 1 :
		(int)floor((log10(s) - PL_HIST_MIN_LOG10) * PL_HIST_PER_DECADE);

	if (b < 0)
		b = 0;
	if (b >= PL_HIST_BUCKETS)
		b = PL_HIST_BUCKETS - 1;
	h->b[b] += n;
	h->n += n;
}

void pl_hist_add(struct pl_hist *h, double s)
{
	pl_hist_add_n(h, s, 1);
}

void pl_hist_merge(struct pl_hist *into, const struct pl_hist *h)
{
	for (int i = 0; i < PL_HIST_BUCKETS; i++)
		into->b[i] += h->b[i];
	into->n += h->n;
}

double pl_hist_quantile(const struct pl_hist *h, double q)
{
	uint64_t want, seen = 0;

	if (!h->n)
		return 0;
	want = (uint64_t)ceil(q * (double)h->n);
	if (want < 1)
		want = 1;
	for (int i = 0; i < PL_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want) /* the bucket's geometric middle: within 1.2 % of any value in it */
			return pow(10.0, PL_HIST_MIN_LOG10 + (i + 0.5) / PL_HIST_PER_DECADE);
	}
	return 0;
}

/* ---- messages ---- */

/* "what: ENAME: detail" with the library's last error of this thread, into buf. */
static void errf(char *buf, size_t len, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void errf(char *buf, size_t len, int err, const char *fmt, ...)
{
	const char *detail = wsn_last_error();
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	n = strlen(buf);
	if (n < len)
		snprintf(buf + n, len - n, ": %s: %s", wsn_err_name(err),
			 detail && detail[0] ? detail : wsn_strerror(err));
}

/* "path: message" for a shard that does not fit the dataset. */
static int bad_shard(char *buf, size_t len, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad_shard(char *buf, size_t len, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "run: %s: ", path);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < len)
		vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return WSN_EFORMAT;
}

/* ---- the dataset ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static int add_name(char ***names, int *count, char *name)
{
	char **nn;

	if (!name)
		return -1;
	if (*count == CLI_MAX_SHARDS || !(nn = realloc(*names, sizeof(**names) * (size_t)(*count + 1)))) {
		free(name);
		return -1;
	}
	*names = nn;
	nn[(*count)++] = name;
	return 0;
}

/* A shard's name PREFIX-I-of-K.safetensors (I and K decimal) in parts: 0, or -1 for another name. */
struct shard_name {
	size_t prefix;  /* PREFIX is base[0, prefix) */
	long i, k;
	int width;      /* digits of I */
	const char *of; /* "-of-K.safetensors" */
};

static int shard_name(const char *base, struct shard_name *sn)
{
	const char *p, *end = base + strlen(base) - strlen(".safetensors");
	char *e;

	sn->of = NULL;
	for (p = base; (p = strstr(p, "-of-")) && p < end; p++)
		sn->of = p;
	if (!sn->of || !isdigit((unsigned char)sn->of[4]))
		return -1;
	errno = 0;
	sn->k = strtol(sn->of + 4, &e, 10);
	if (e != end || (errno && errno != ERANGE))
		return -1; /* a count past a long stays a set's name: LONG_MAX, more than any directory holds */
	for (p = sn->of; p > base && isdigit((unsigned char)p[-1]); p--)
		;
	if (p == sn->of || p == base || p[-1] != '-' || sn->of - p > 9)
		return -1;
	sn->i = strtol(p, NULL, 10);
	sn->width = (int)(sn->of - p);
	sn->prefix = (size_t)(p - 1 - base);
	return 0;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* Whether b (named bn) is a shard named as a (named an) is: the same PREFIX, whatever K. */
static int same_name(const char *an, const struct shard_name *a, const char *bn, const struct shard_name *b)
{
	return b->of && b->prefix == a->prefix && !strncmp(an, bn, a->prefix);
}

/* Whether a and b name shards of one set: the same PREFIX and K. */
static int same_set(const char *an, const struct shard_name *a, const char *bn, const struct shard_name *b)
{
	return same_name(an, a, bn, b) && b->k == a->k;
}

/*
 * Shards named PREFIX-I-of-K.safetensors (as `wsnorm gen --shards` and other writers name them) say how
 * many there are: every one of a set must be present, numbered from 0 or from 1, so that a copy cut
 * short is not taken for the whole dataset. Each name is parsed once; a set is checked from its first
 * name, with a mark per index.
 */
static int check_shard_set(const char *dir, char **names, int n)
{
	struct shard_name *sn = calloc((size_t)n, sizeof(*sn));
	unsigned char *seen = NULL;
	int ret = 0;

	if (!sn) {
		cli_error("run: out of memory");
		return EXIT_RUNTIME;
	}
	for (int a = 0; a < n; a++)
		if (shard_name(base_name(names[a]), &sn[a]))
			sn[a].of = NULL; /* not a set's name */
	/* one name, two counts: a set written over another of a different size (gen into a used directory) */
	for (int a = 0; a < n && !ret; a++)
		for (int b = a + 1; b < n && sn[a].of && !ret; b++)
			if (same_name(base_name(names[a]), &sn[a], base_name(names[b]), &sn[b]) && sn[b].k != sn[a].k) {
				cli_error("run: directory '%s' holds two sets of shards named %.*s-*: '%s' and '%s' (one "
					  "left from an earlier gen?): remove the stale set", dir, (int)sn[a].prefix,
					  base_name(names[a]), base_name(names[a]), base_name(names[b]));
				ret = EXIT_RUNTIME;
			}
	for (int a = 0; a < n && !ret; a++) {
		const char *ba = base_name(names[a]);
		long first = 1, members = 0, want, dup = -1;

		if (!sn[a].of)
			continue;
		for (int b = 0; b < a && sn[a].of; b++)
			if (same_set(ba, &sn[a], base_name(names[b]), &sn[b]))
				sn[a].of = NULL; /* checked with the set's first name */
		if (!sn[a].of)
			continue;
		/* a set of more shards than the directory holds is missing some: marks only for the ones there */
		free(seen);
		if (!(seen = calloc((size_t)n + 2, 1))) {
			cli_error("run: out of memory");
			ret = EXIT_RUNTIME;
			break;
		}
		for (int b = a; b < n; b++)
			if (same_set(ba, &sn[a], base_name(names[b]), &sn[b])) {
				members++;
				if (sn[b].i >= 0 && sn[b].i <= n + 1) {
					if (seen[sn[b].i] && dup < 0)
						dup = sn[b].i;
					seen[sn[b].i] = 1;
				}
			}
		if (seen[0])
			first = 0;
		for (want = first; want - first < sn[a].k && want <= n + 1 && seen[want]; want++)
			;
		if (dup >= 0) {
			cli_error("run: directory '%s': two shards named %.*s-*%s have the number %ld (written with "
				  "different zero padding?)", dir, (int)sn[a].prefix, ba, sn[a].of, dup);
			ret = EXIT_RUNTIME;
		} else if (sn[a].k < 1) {
			cli_error("run: directory '%s': shards named %.*s-*%s say the set has %ld shards", dir,
				  (int)sn[a].prefix, ba, sn[a].of, sn[a].k);
			ret = EXIT_RUNTIME;
		} else if (sn[a].k == LONG_MAX) {
			cli_error("run: directory '%s': shards named %.*s-*%s say the set has more shards than wsnorm can "
				  "count (the count overflows)", dir, (int)sn[a].prefix, ba, sn[a].of);
			ret = EXIT_RUNTIME;
		} else if (want - first < sn[a].k) {
			cli_error("run: directory '%s': shard %.*s-%0*ld%s of %ld is missing (%ld found)",
				dir, (int)sn[a].prefix, ba, sn[a].width, want, sn[a].of, sn[a].k, members);
			ret = EXIT_RUNTIME;
		} else if (members != sn[a].k) {
			cli_error("run: directory '%s': %ld shards named %.*s-*%s, numbered outside %ld..%ld",
				dir, members, (int)sn[a].prefix, ba, sn[a].of, first, first + sn[a].k - 1);
			ret = EXIT_RUNTIME;
		}
	}
	free(seen);
	free(sn);
	return ret;
}

int pl_shard_stale(const char *dir, const char *prefix, long k, char *found, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct shard_name sn, want = { .prefix = strlen(prefix), .k = k };
	int stale = 0;

	if (!d)
		return 0;
	while (!stale && (e = readdir(d))) {
		char mine[NAME_MAX + 1];

		if (e->d_name[0] == '.' || !ends_with(e->d_name, ".safetensors") || shard_name(e->d_name, &sn) ||
		    !same_name(prefix, &want, e->d_name, &sn))
			continue;
		/* another count, or this count under a name this set's shards do not have (other zero padding,
		 * numbered from 1): run would read it with the set */
		snprintf(mine, sizeof(mine), "%s-%05ld-of-%05ld.safetensors", prefix, sn.i, k);
		if (sn.k != k || sn.i < 0 || sn.i >= k || strcmp(mine, e->d_name)) {
			snprintf(found, len, "%s", e->d_name);
			stale = 1;
		}
	}
	closedir(d);
	return stale;
}

/* The *.safetensors files of a directory, sorted. */
static int list_dir(const char *path, char ***names, int *count)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int first = *count;

	if (!d) {
		cli_error("run: cannot read directory '%s': %s", path, strerror(errno));
		return EXIT_RUNTIME;
	}
	while ((e = readdir(d))) {
		char *p;
		if (e->d_name[0] == '.' || !ends_with(e->d_name, ".safetensors"))
			continue; /* hidden files: another tool's (._name from macOS copies), or a gen in progress */
		if (*count - first == CLI_MAX_SHARDS) {
			cli_error("run: directory '%s' has more than %d shards", path,
				CLI_MAX_SHARDS);
			closedir(d);
			return EXIT_RUNTIME;
		}
		if (asprintf(&p, "%s/%s", path, e->d_name) < 0 || add_name(names, count, p)) {
			closedir(d);
			cli_error("run: out of memory");
			return EXIT_RUNTIME;
		}
	}
	closedir(d);
	if (*count == first) {
		cli_error("run: directory '%s' holds no *.safetensors files", path);
		return EXIT_RUNTIME;
	}
	qsort(*names + first, (size_t)(*count - first), sizeof(**names), cmp_str);
	return check_shard_set(path, *names + first, *count - first);
}

int pl_dataset_list(struct pl_dataset *ds, const char *input, int raw)
{
	char **names = NULL, *copy = NULL, *save = NULL, *tok;
	int count = 0, ret = EXIT_RUNTIME;
	struct stat st;

	/* an existing path is taken whole (a name may hold a comma); else a comma-separated list */
	if (stat(input, &st) == 0 || !strchr(input, ',')) {
		if (stat(input, &st) < 0) {
			cli_error("run: cannot open input '%s': %s", input, strerror(errno));
			return EXIT_RUNTIME;
		}
		if (S_ISDIR(st.st_mode) && raw) {
			cli_error("run: input '%s' is a directory: --shape reads raw files (give a file or a "
				"comma-separated list of files)", input);
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			ds->from_dir = 1;
			if ((ret = list_dir(input, &names, &count)))
				goto out;
		} else if (add_name(&names, &count, strdup(input))) {
			goto oom;
		}
	} else {
		if (cli_list_has_empty(input)) {
			cli_error("run: --input '%s' has an empty entry (and no file of that name exists)", input);
			goto out;
		}
		if (!(copy = strdup(input)))
			goto oom;
		for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (stat(tok, &st) < 0) {
				cli_error("run: cannot open input '%s': %s", tok, strerror(errno));
				goto out;
			}
			if (S_ISDIR(st.st_mode)) {
				cli_error("run: input '%s' is a directory: a list names files", tok);
				goto out;
			}
			if (add_name(&names, &count, strdup(tok))) {
				if (count == CLI_MAX_SHARDS)
					cli_error("run: more than %d input files", CLI_MAX_SHARDS);
				else
					goto oom;
				goto out;
			}
		}
		if (!count) {
			cli_error("run: input '%s' names no file", input);
			goto out;
		}
	}
	if (!(ds->shards = calloc((size_t)count, sizeof(*ds->shards))))
		goto oom;
	for (int i = 0; i < count; i++) {
		ds->shards[i].path = names[i];
		if (stat(names[i], &st) == 0) {
			ds->shards[i].dev = st.st_dev;
			ds->shards[i].ino = st.st_ino;
		}
	}
	ds->n = count;
	count = 0;
	ds->raw = raw;
	ret = 0;
	goto out;
oom:
	cli_error("run: out of memory");
	ret = EXIT_RUNTIME;
out:
	for (int i = 0; i < count; i++)
		free(names[i]);
	free(names);
	free(copy);
	return ret;
}

int64_t pl_entry_rows(const struct wsn_st_entry *e)
{
	int64_t r = 1;

	for (int d = 0; d + 1 < e->ndim; d++)
		if (!e->shape[d])
			return 0;
	for (int d = 0; d + 1 < e->ndim; d++) {
		if (e->shape[d] < 0 || r > INT64_MAX / e->shape[d])
			return -1;
		r *= e->shape[d];
	}
	return r;
}

/* Is e a per-row statistic of x ([rows] values): shaped [rows], or as x without its last dimension,
 * or that with a last dimension of 1 ([rows, 1], a tensor that enters without its broadcast)? */
static int stat_shape_ok(const struct wsn_st_entry *x, const struct wsn_st_entry *e, int64_t rows)
{
	if (e->ndim == 1 && e->shape[0] == rows)
		return 1;
	if (e->ndim != x->ndim - 1 && !(e->ndim == x->ndim && e->shape[e->ndim - 1] == 1))
		return 0;
	for (int d = 0; d + 1 < x->ndim; d++)
		if (e->shape[d] != x->shape[d])
			return 0;
	return 1;
}

/* Check one safetensors shard's tensors against the op; the first fixes the dataset's shape. */
/*
 * The op and epsilon of a run come from its first file: a later file whose metadata names another
 * (a forward file listed with a backward one, shards made with another --eps) runs as the first
 * says, and gets a warning, for it is more likely a mixed-up dataset than meant.
 */
static int metadata_agrees(const struct pl_dataset *ds, const struct pl_shard *sh, char *msg, size_t len)
{
	const struct wsn_st_file *f0 = ds->shards[0].st;
	const char *op0 = f0 ? wsn_st_metadata(f0, "wsnorm.op") : NULL, *op = wsn_st_metadata(sh->st, "wsnorm.op");
	const char *eps0 = f0 ? wsn_st_metadata(f0, "wsnorm.eps") : NULL, *eps = wsn_st_metadata(sh->st, "wsnorm.eps");
	float e;

	if (!ds->op_given && op0 && op && strcmp(op0, op))
		cli_warn("run: warning: '%s' says it is for %s, the first file for %s: it runs as %s", sh->path, op, op0,
			 wsn_op_name(ds->shape.op));
	if (ds->eps_given || !eps)
		return 0;
	/* the same rule as for the first file, whose eps the run takes */
	if (cli_parse_eps(eps, &e))
		return bad_shard(msg, len, sh->path, "metadata 'wsnorm.eps' is '%s', not a number with 0 < eps <= 1 "
				 "(--eps overrides it)", eps);
	/* against the eps the run takes: the first file's, or the default where it names none */
	if (e != ds->shape.eps)
		cli_warn("run: warning: '%s' says eps %s, the first file %s%s: it runs with %g", sh->path, eps,
			 eps0 ? "" : "names none", eps0 ? eps0 : "", (double)ds->shape.eps);
	return 0;
}

/* "[d0, d1, ...] dtype" of entry e, for messages. */
static const char *entry_text(const struct wsn_st_entry *e, char *buf, size_t len)
{
	size_t off = 0;
	int n;

	n = snprintf(buf, len, "[");
	for (int i = 0; n >= 0 && i < e->ndim && (off += (size_t)n) < len; i++)
		n = snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", (long long)e->shape[i]);
	if (n >= 0 && (off += (size_t)n) < len)
		snprintf(buf + off, len - off, "] %s", e->st_dtype);
	return buf;
}

/*
 * Tensors run does not read are ignored, as wsnorm(1) says; a name one letter off ('weights' for
 * 'weight') would silently make the run non-affine, so they are named in a warning.
 */
static void unknown_tensors(const struct pl_shard *sh)
{
	static const char *const known[] = { "x", "dy", "weight", "bias", "mean", "rstd" };
	const int nknown = (int)(sizeof(known) / sizeof(known[0])), nshow = 8;
	int n = wsn_st_count(sh->st), unknown = 0;
	char names[1024];
	size_t off = 0;

	names[0] = '\0';
	for (int i = 0; i < n; i++) {
		const struct wsn_st_entry *e = wsn_st_entry_at(sh->st, i);
		int k = 0, w;

		while (k < nknown && strcmp(e->name, known[k]))
			k++;
		if (k < nknown || unknown++ >= nshow)
			continue;
		/* every name, up to nshow of them (a file of thousands would bury the run's report) */
		w = snprintf(names + off, sizeof(names) - off, "%s'%s'", off ? ", " : "", e->name);
		if (w > 0 && (size_t)w < sizeof(names) - off)
			off += (size_t)w;
	}
	if (!unknown)
		return;
	if (unknown == 1)
		cli_warn("run: warning: '%s': tensor %s is not one that run reads (x, dy, weight, bias, mean, rstd) "
			 "and is ignored", sh->path, names);
	else if (unknown <= nshow)
		cli_warn("run: warning: '%s': tensors %s are not ones that run reads (x, dy, weight, bias, mean, rstd) "
			 "and are ignored", sh->path, names);
	else
		cli_warn("run: warning: '%s': tensors %s and %d more are not ones that run reads (x, dy, weight, bias, "
			 "mean, rstd) and are ignored", sh->path, names, unknown - nshow);
}

/* Whether entry e of the file at path, a tensor run reads, is of a dtype wsnorm computes with (the others
 * may be of any): 0, or WSN_EDTYPE with msg naming the file, the tensor and its dtype. */
static int entry_dtype_check(const char *path, const struct wsn_st_entry *e, char *msg, size_t len)
{
	if (wsn_dtype_size(e->dtype))
		return 0;
	bad_shard(msg, len, path, "tensor '%s' is %s; wsnorm computes with F32, F16 and BF16", e->name, e->st_dtype);
	return WSN_EDTYPE;
}

static int check_shard(struct pl_dataset *ds, struct pl_shard *sh, int first, char *msg, size_t len)
{
	const struct wsn_st_entry *x = wsn_st_find(sh->st, "x"), *e;
	struct pl_shape *s = &ds->shape;
	int bwd = wsn_op_is_backward(s->op), ln = wsn_op_is_layernorm(s->op);
	char t1[160], t2[160];
	int64_t hidden;
	int err;

	if (!x)
		return bad_shard(msg, len, sh->path, "no tensor named 'x'");
	unknown_tensors(sh);
	if ((err = entry_dtype_check(sh->path, x, msg, len)))
		return err;
	if (x->ndim < 1)
		return bad_shard(msg, len, sh->path, "tensor 'x' is a scalar");
	hidden = x->shape[x->ndim - 1];
	sh->rows = pl_entry_rows(x);
	if (sh->rows < 0)
		return bad_shard(msg, len, sh->path, "tensor 'x' has more rows than a 64-bit count holds");
	if (hidden < 1 || sh->rows < 1)
		return bad_shard(msg, len, sh->path, "tensor 'x' is empty");
	if (first) {
		if (hidden > CLI_MAX_HIDDEN)
			return bad_shard(msg, len, sh->path, "tensor 'x' is %lld wide, more than %d", (long long)hidden,
					 CLI_MAX_HIDDEN);
		pl_shape_init(s, s->op, x->dtype, hidden, wsn_st_find(sh->st, "weight") != NULL,
			      wsn_st_find(sh->st, "bias") != NULL, s->eps);
	} else if (hidden != s->hidden || x->dtype != s->dt) {
		return bad_shard(msg, len, sh->path, "tensor 'x' is %lld wide %s, the first shard's is %lld wide %s",
				 (long long)hidden, wsn_dtype_name(x->dtype), (long long)s->hidden,
				 wsn_dtype_name(s->dt));
	} else if ((err = metadata_agrees(ds, sh, msg, len))) {
		return err;
	}
	sh->off[PL_IN_X] = x->offset;
	if (bwd) {
		if (!(e = wsn_st_find(sh->st, "dy")))
			return bad_shard(msg, len, sh->path, "%s needs a tensor named 'dy'", wsn_op_name(s->op));
		if ((err = entry_dtype_check(sh->path, e, msg, len)))
			return err;
		if (e->dtype != s->dt || e->ndim < 1 || e->shape[e->ndim - 1] != hidden || pl_entry_rows(e) != sh->rows)
			return bad_shard(msg, len, sh->path, "tensor 'dy' is %s, but 'x' is %s: they must match in shape "
					 "and dtype", entry_text(e, t1, sizeof(t1)), entry_text(x, t2, sizeof(t2)));
		sh->off[PL_IN_DY] = e->offset;
	}
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "rstd" : "mean";
		if (!bwd || (!k && !ln))
			continue;
		if (!(e = wsn_st_find(sh->st, name)))
			return bad_shard(msg, len, sh->path, "%s needs a tensor named '%s'", wsn_op_name(s->op), name);
		if ((err = entry_dtype_check(sh->path, e, msg, len)))
			return err;
		if (e->dtype != WSN_F32 || e->ndim < 1 || !stat_shape_ok(x, e, sh->rows))
			return bad_shard(msg, len, sh->path,
					 "tensor '%s' is %s; it must be f32 with one value per row of 'x' (%lld), shaped "
					 "[%lld] or as 'x' with a last dimension of 1", name, entry_text(e, t1, sizeof(t1)),
					 (long long)sh->rows, (long long)sh->rows);
		sh->off[k ? PL_IN_RSTD : PL_IN_MEAN] = e->offset;
	}
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "bias" : "weight";
		int want = k ? wsn_st_find(ds->shards[0].st, "bias") != NULL : s->has_weight;

		if (k && !ln)
			break; /* RMSNorm reads no bias: one in the file is ignored, whatever it holds */
		e = wsn_st_find(sh->st, name);
		if (!!e != want)
			return bad_shard(msg, len, sh->path, "tensor '%s' is %s here but %s in the first shard", name,
					 e ? "present" : "absent", want ? "present" : "absent");
		if (e && (err = entry_dtype_check(sh->path, e, msg, len)))
			return err;
		if (e && (e->dtype != s->dt || e->ndim != 1 || e->shape[0] != hidden))
			return bad_shard(msg, len, sh->path, "tensor '%s' is %s; it must be %lld %s values, shaped [%lld]",
					 name, entry_text(e, t1, sizeof(t1)), (long long)hidden, wsn_dtype_name(s->dt),
					 (long long)hidden);
		if (e)
			sh->off[k ? PL_IN_B : PL_IN_W] = e->offset;
	}
	return 0;
}

/* The bytes of the block device at path. */
static int block_size(const char *path, uint64_t *size, char *msg, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), e;

	if (fd < 0 || ioctl(fd, BLKGETSIZE64, size) < 0) {
		e = errno;
		snprintf(msg, len, "run: cannot read the size of block device '%s': %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return e == EACCES || e == EPERM ? -e : WSN_EIO;
	}
	close(fd);
	return 0;
}

int pl_shard_open(struct pl_dataset *ds, int i, struct wsn_reader *r, int first, char *msg, size_t len)
{
	struct pl_shard *sh = &ds->shards[i];
	int err;

	if (sh->opened)
		return 0;
	if (ds->raw) {
		struct stat st;
		uint64_t unit = ds->shape.in_unit[PL_IN_X], want = (uint64_t)sh->rows * unit, size;

		if (pl_shard_identify(sh, msg, len)) /* its identity, and the size checked below */
			return WSN_ENOENT;
		st = sh->id;
		if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
			return bad_shard(msg, len, sh->path, "a raw input must be a regular file (its size is the "
					 "shape's) or a block device");
		if (unit && (uint64_t)sh->rows > UINT64_MAX / unit)
			return bad_shard(msg, len, sh->path, "--shape %lldx%lld of %s is more bytes than a file can hold",
					 (long long)sh->rows, (long long)ds->shape.hidden, wsn_dtype_name(ds->shape.dt));
		if (S_ISBLK(st.st_mode)) {
			/* a device holds the tensor in its first bytes; what follows is not read */
			if ((err = block_size(sh->path, &size, msg, len)))
				return err;
			if (size < want)
				return bad_shard(msg, len, sh->path, "block device has %llu bytes, --shape %lldx%lld of %s "
						 "needs %llu", (unsigned long long)size, (long long)sh->rows,
						 (long long)ds->shape.hidden, wsn_dtype_name(ds->shape.dt),
						 (unsigned long long)want);
		} else if ((uint64_t)st.st_size != want) {
			return bad_shard(msg, len, sh->path, "raw file has %lld bytes, --shape %lldx%lld of %s needs %llu",
					 (long long)st.st_size, (long long)sh->rows, (long long)ds->shape.hidden,
					 wsn_dtype_name(ds->shape.dt), (unsigned long long)want);
		}
		sh->off[PL_IN_X] = 0;
	} else {
		/* the identity before the header: a file replaced after it fails the first batch's check */
		if (!sh->have_id && pl_shard_identify(sh, msg, len))
			return WSN_ENOENT;
		if (!sh->st && (err = wsn_st_open(sh->path, r, &sh->st)) < 0) {
			errf(msg, len, err, "run: cannot read '%s'", sh->path);
			return err;
		}
		if ((err = check_shard(ds, sh, first, msg, len)))
			return err;
	}
	sh->nbatches = (sh->rows + ds->cfg->batch_rows - 1) / ds->cfg->batch_rows;
	sh->opened = 1;
	err = ds->cfg->output ? pl_out_create(ds, i, msg, len) : 0;
	/*
	 * Its header is no longer needed (the reads take sh->off): only the first shard's stays, for the
	 * later ones' checks, so a set of shards holds at most two headers at a time, however many there are.
	 */
	if (i) {
		wsn_st_close(sh->st);
		sh->st = NULL;
	}
	return err;
}

void pl_dataset_free(struct pl_dataset *ds)
{
	for (int i = 0; i < ds->n; i++) {
		wsn_st_close(ds->shards[i].st);
		free(ds->shards[i].path);
	}
	free(ds->shards);
	ds->shards = NULL;
	ds->n = 0;
}

/* Record the dataset's first error and stop every device. */
static void dataset_fail(struct pl_dataset *ds, int err, const char *msg)
{
	if (!ds->err) {
		ds->err = err < 0 ? err : WSN_EIO;
		wsn_text_escape(ds->errmsg, sizeof(ds->errmsg), msg); /* file names and contents: no raw control bytes */
	}
	atomic_store(&ds->stop, 1);
}

/*
 * The next batch, opening its shard when the cursor first reaches it (with the caller's reader).
 * Returns 1 with *b, 0 when there are no more (the passes or the time are up, or a stop), or a
 * WSN_E* code when the shard cannot be opened (the dataset error is recorded).
 */
static int next_batch(struct pl_dataset *ds, struct wsn_reader *r, struct pl_batch *b)
{
	const struct pl_config *cfg = ds->cfg;
	char msg[PL_ERRLEN];
	int ret = 0, err;

	pthread_mutex_lock(&ds->lock);
	for (;;) {
		struct pl_shard *sh;

		if (atomic_load(&ds->stop) || ds->exhausted)
			break;
		if (ds->cur == ds->n) {
			ds->pass++;
			ds->cur = 0;
			ds->cur_row = 0;
		}
		/* the first batch is always taken: a --duration shorter than it still runs and verifies one */
		if ((cfg->iterations && ds->pass >= cfg->iterations) ||
		    (ds->deadline > 0 && ds->seq > 0 && cli_now() >= ds->deadline)) {
			ds->exhausted = 1;
			break;
		}
		sh = &ds->shards[ds->cur];
		if (!sh->opened && (err = pl_shard_open(ds, ds->cur, r, 0, msg, sizeof(msg)))) {
			dataset_fail(ds, err, msg);
			ret = err;
			break;
		}
		b->shard = ds->cur;
		b->row0 = ds->cur_row;
		b->rows = sh->rows - ds->cur_row < cfg->batch_rows ? sh->rows - ds->cur_row : cfg->batch_rows;
		b->pass = ds->pass;
		b->seq = ds->seq++;
		ds->cur_row += b->rows;
		if (ds->cur_row >= sh->rows) {
			ds->cur++;
			ds->cur_row = 0;
		}
		ret = 1;
		break;
	}
	pthread_mutex_unlock(&ds->lock);
	return ret;
}

/* The first n batches of the first pass (opening shards as needed), for stages measured alone. */
static int first_batches(struct pl_dataset *ds, struct wsn_reader *r, struct pl_batch *out, int n)
{
	char msg[PL_ERRLEN];
	int got = 0, err = 0;

	pthread_mutex_lock(&ds->lock);
	for (int s = 0; s < ds->n && got < n && !err; s++) {
		struct pl_shard *sh = &ds->shards[s];
		if (!sh->opened && (err = pl_shard_open(ds, s, r, 0, msg, sizeof(msg)))) {
			dataset_fail(ds, err, msg);
			break;
		}
		for (int64_t row = 0; row < sh->rows && got < n; row += ds->cfg->batch_rows, got++) {
			out[got].shard = s;
			out[got].row0 = row;
			out[got].rows = sh->rows - row < ds->cfg->batch_rows ? sh->rows - row : ds->cfg->batch_rows;
			out[got].pass = 0;
			out[got].seq = (uint64_t)got;
		}
	}
	pthread_mutex_unlock(&ds->lock);
	return err ? err : got;
}

/* ---- devices ---- */

/* The backend "auto" picks: "cuda", "amd" or "cpu", and its device count. */
static int auto_backend(char *name, size_t len, int *count)
{
	struct wsn_device *dev = NULL;
	struct wsn_device_info di;
	int err;

	if ((err = wsn_device_open("auto", &dev)) < 0) {
		cli_fail(err, "run: cannot open a device");
		return -1;
	}
	wsn_device_info(dev, &di);
	wsn_device_close(dev);
	snprintf(name, len, "%s", di.backend);
	*count = 1;
	for (int b = 0; b < wsn_backend_count(); b++) {
		struct wsn_backend_info bi;
		if (wsn_backend_info(b, &bi) == 0 && !strcmp(bi.name, di.backend))
			*count = bi.device_count > 0 ? bi.device_count : 1;
	}
	return 0;
}

int pl_devices_parse(const char *list, char specs[][32], int max)
{
	char buf[1024], be[16] = "", *save = NULL, *tok;
	int n = 0, count = 0;

	if (!strcmp(list, "all")) {
		if (auto_backend(be, sizeof(be), &count))
			return -EXIT_RUNTIME;
		if (!strcmp(be, "cpu")) {
			snprintf(specs[0], 32, "cpu");
			return 1;
		}
		for (int i = 0; i < count && i < max; i++)
			snprintf(specs[n++], 32, "%s:%d", be, i);
		return n;
	}
	if (strlen(list) >= sizeof(buf)) {
		cli_usage_error("run", "--devices list too long");
		return -EXIT_USAGE;
	}
	if (cli_list_has_empty(list)) {
		cli_usage_error("run", "--devices '%s' has an empty entry", list);
		return -EXIT_USAGE;
	}
	strcpy(buf, list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int64_t idx;

		if (n == max) {
			cli_usage_error("run", "--devices names more than %d devices", max);
			return -EXIT_USAGE;
		}
		if (!cli_parse_count(tok, 0, 4095, &idx)) {
			/* a bare number: that GPU of the backend "auto" picks */
			if (!be[0] && auto_backend(be, sizeof(be), &count))
				return -EXIT_RUNTIME;
			if (!strcmp(be, "cpu")) {
				cli_error("run: --devices %s: there is no GPU to number", list);
				return -EXIT_RUNTIME;
			}
			snprintf(specs[n++], 32, "%s:%lld", be, (long long)idx);
		} else if (!wsn_device_spec_parse(tok, NULL, NULL)) {
			snprintf(specs[n++], 32, "%s", tok);
		} else {
			cli_usage_error("run", "bad device '%s' in --devices (expected a GPU number, cpu, cuda[:N] or amd[:N])",
					tok);
			return -EXIT_USAGE;
		}
	}
	if (!n) {
		cli_usage_error("run", "--devices names no device");
		return -EXIT_USAGE;
	}
	return n;
}

/* ---- one device's pipeline ---- */

enum slot_state { SLOT_FREE, SLOT_READ, SLOT_SUBMITTED, SLOT_DONE, SLOT_VERIFIED };
enum { E_H2D0, E_H2D1, E_K0, E_K1, E_D2H0, E_D2H1, E_N };

struct pl_slot {
	int state;
	int64_t k;                  /* local sequence number of the batch it holds */
	struct pl_batch b;
	unsigned char *hin, *hout;  /* pinned host regions */
	unsigned char *din, *dout;  /* device regions (NULL on a host-memory device) */
	size_t shift[PL_NIN];       /* where each input lands in its host region for this batch */
	struct wsn_event *ev[E_N];
	int verify, copy_out, write;
	double read_s;
	float ms[3];                /* h2d, kernel (all loops), d2h */
};

struct pl_dev {
	struct pl_run *run;
	struct pl_devres *res;
	pthread_t thread;
	int started;
	struct wsn_device *dev;
	struct wsn_device_info di;
	int host;                   /* the device executes on host memory */
	struct wsn_plan *plan;
	struct wsn_stream *cs, *ks, *os; /* copies in, kernels, copies out */
	struct pl_slot *slots;
	int ring;
	size_t in_off[PL_NIN], out_off[PL_NOUT], din_off[PL_NIN]; /* region layouts */
	size_t hin_len, hout_len, din_len, dout_len;
	/* the ring's state, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int64_t nread;              /* batches the reader put into slots */
	int reader_done, abort;
	int reader_ready, reader_go;
	int reader_unusable;        /* a read stalled: the kernel may still write the host regions */
	int fault_armed;
};

/* Record this device's first failure and stop its pipeline. */
static void dev_fail(struct pl_dev *d, const char *msg)
{
	pthread_mutex_lock(&d->mu);
	if (d->res->status != EXIT_RUNTIME) {
		d->res->status = EXIT_RUNTIME;
		wsn_text_escape(d->res->errmsg, sizeof(d->res->errmsg), msg);
	}
	d->abort = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static void set_state(struct pl_dev *d, struct pl_slot *sl, int state)
{
	pthread_mutex_lock(&d->mu);
	sl->state = state;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Wait until slot k%ring holds batch k in state `want`; false when the stage should end. */
static bool wait_slot(struct pl_dev *d, int64_t k, int want)
{
	struct pl_slot *sl = &d->slots[k % d->ring];
	bool ok = false;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		if (d->abort)
			break;
		if (sl->state == want && (want == SLOT_FREE || sl->k == k)) {
			ok = true;
			break;
		}
		if (want != SLOT_FREE && d->reader_done && k >= d->nread)
			break;
		pthread_cond_wait(&d->cv, &d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return ok;
}

static unsigned char *host_in(const struct pl_dev *d, const struct pl_slot *sl, int i)
{
	return sl->hin + d->in_off[i] + sl->shift[i];
}

/* The input and output pointers the kernel uses. */
static void *dev_in(const struct pl_dev *d, const struct pl_slot *sl, int i)
{
	return d->host ? host_in(d, sl, i) : sl->din + d->din_off[i];
}

static void *dev_out(const struct pl_dev *d, const struct pl_slot *sl, int i)
{
	return (d->host ? sl->hout : sl->dout) + d->out_off[i];
}

/* The op's arguments over the given pointers. */
static void make_args(const struct pl_shape *sh, void *const in[PL_NIN], void *const out[PL_NOUT], int64_t rows,
		      enum wsn_mem mem, struct wsn_args *a)
{
	memset(a, 0, sizeof(*a));
	wsn_tensor_2d(&a->x, in[PL_IN_X], sh->dt, mem, rows, sh->hidden);
	if (sh->in[PL_IN_W])
		wsn_tensor_1d(&a->weight, in[PL_IN_W], sh->dt, mem, sh->hidden);
	if (sh->in[PL_IN_B])
		wsn_tensor_1d(&a->bias, in[PL_IN_B], sh->dt, mem, sh->hidden);
	if (wsn_op_is_backward(sh->op)) {
		wsn_tensor_2d(&a->dy, in[PL_IN_DY], sh->dt, mem, rows, sh->hidden);
		if (sh->in[PL_IN_MEAN])
			wsn_tensor_1d(&a->mean, in[PL_IN_MEAN], WSN_F32, mem, rows);
		wsn_tensor_1d(&a->rstd, in[PL_IN_RSTD], WSN_F32, mem, rows);
		wsn_tensor_2d(&a->dx, out[PL_OUT_DX], sh->dt, mem, rows, sh->hidden);
		if (sh->out[PL_OUT_DW])
			wsn_tensor_1d(&a->dweight, out[PL_OUT_DW], sh->dt, mem, sh->hidden);
		if (sh->out[PL_OUT_DB])
			wsn_tensor_1d(&a->dbias, out[PL_OUT_DB], sh->dt, mem, sh->hidden);
	} else {
		wsn_tensor_2d(&a->y, out[PL_OUT_Y], sh->dt, mem, rows, sh->hidden);
		if (sh->out[PL_OUT_MEAN])
			wsn_tensor_1d(&a->mean, out[PL_OUT_MEAN], WSN_F32, mem, rows);
		wsn_tensor_1d(&a->rstd, out[PL_OUT_RSTD], WSN_F32, mem, rows);
	}
}

static void slot_args(const struct pl_dev *d, const struct pl_slot *sl, struct wsn_args *a)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	void *in[PL_NIN] = { 0 }, *out[PL_NOUT] = { 0 };

	for (int i = 0; i < PL_NIN; i++)
		if (sh->in[i])
			in[i] = dev_in(d, sl, i);
	for (int i = 0; i < PL_NOUT; i++)
		if (sh->out[i])
			out[i] = dev_out(d, sl, i);
	make_args(sh, in, out, sl->b.rows, d->di.exec_mem, a);
}

static void stage_add(struct pl_stage *st, double bytes, double seconds, int64_t rows)
{
	st->bytes += bytes;
	st->busy += seconds;
	st->batches++;
	st->rows += rows;
	pl_hist_add(&st->lat, seconds);
}

/* ---- stage: read ---- */

#define READ_AHEAD 2 /* batches whose reads are queued at once: the ring stays full between them */

/* A batch being read into its slot: the reads queued for it. */
struct pending {
	int64_t k;
	struct pl_slot *sl;
	struct pl_batch b;
	uint64_t ids[PL_NIN];
	int tensor[PL_NIN];         /* which input each read is */
	int nids;
	double t0, bytes;
	int err;
	char msg[PL_ERRLEN];
};

/*
 * Queue the reads of p's batch into its slot, each tensor landing aligned like its file offset
 * (straight into the registered slot). On failure p->err and p->msg are set; the reads queued so
 * far stay queued, to be waited for.
 */
static void batch_submit(struct pl_dev *d, struct wsn_reader *rd, struct pending *p)
{
	struct pl_dataset *ds = d->run->ds;
	const struct pl_shape *sh = &ds->shape;
	const struct pl_shard *shard = &ds->shards[p->b.shard];
	int err;

	for (int i = 0; i < PL_NIN; i++) {
		uint64_t off, n = pl_in_bytes(sh, i, p->b.rows);
		size_t es = i == PL_IN_MEAN || i == PL_IN_RSTD ? 4 : wsn_dtype_size(sh->dt);

		if (!sh->in[i])
			continue;
		off = shard->off[i] + (sh->in_row[i] ? (uint64_t)p->b.row0 * sh->in_unit[i] : 0);
		/* same offset modulo 4096 as the file: O_DIRECT blocks land aligned, straight in the slot */
		p->sl->shift[i] = off % es == 0 ? (size_t)(off % SLACK) : 0;
		if ((err = wsn_reader_submit(rd, shard->path, off, n, host_in(d, p->sl, i), &p->ids[p->nids])) < 0) {
			errf(p->msg, sizeof(p->msg), err, "run: cannot read tensor '%s' of '%s'", pl_in_names[i], shard->path);
			p->err = err;
			return;
		}
		p->tensor[p->nids++] = i;
		p->bytes += (double)n;
	}
}

int pl_shard_identify(struct pl_shard *sh, char *msg, size_t len)
{
	if (stat(sh->path, &sh->id) < 0) {
		snprintf(msg, len, "run: cannot open input '%s': %s", sh->path, strerror(errno));
		return -1;
	}
	sh->have_id = 1;
	return 0;
}

/*
 * Is the file at sh->path still the one its header was read from (the same inode, size and
 * modification time)? Every batch opens the file again by its name, so a file replaced (renamed
 * over, as gen writes) or rewritten during a run would otherwise be read at the old header's
 * offsets and mixed into the results unnoticed: verification reads the same bytes.
 */
static int shard_unchanged(const struct pl_shard *sh, char *msg, size_t len)
{
	struct stat st;
	const char *what;

	if (stat(sh->path, &st) < 0)
		what = "it is gone";
	else if (st.st_dev != sh->id.st_dev || st.st_ino != sh->id.st_ino)
		what = "another file now has its name";
	else if (st.st_size != sh->id.st_size || st.st_mtim.tv_sec != sh->id.st_mtim.tv_sec ||
		 st.st_mtim.tv_nsec != sh->id.st_mtim.tv_nsec)
		what = "it was written to";
	else
		return 0;
	snprintf(msg, len, "run: input '%s' changed during the run (%s): the run stops rather than mix two files' "
		 "bytes in its results", sh->path, what);
	return WSN_EIO;
}

/* Wait for every read of p's batch; the first failure goes to p->err and p->msg. A batch read from a
 * file that is no longer the one opened fails too. */
static void batch_wait(struct pl_dev *d, struct wsn_reader *rd, struct pending *p)
{
	const struct pl_shard *shard = &d->run->ds->shards[p->b.shard];
	const char *path = shard->path;

	for (int i = 0; i < p->nids; i++) {
		int err = wsn_reader_wait(rd, p->ids[i]);

		if (err < 0 && !p->err) {
			errf(p->msg, sizeof(p->msg), err, "run: cannot read tensor '%s' of '%s'", pl_in_names[p->tensor[i]],
			     path);
			p->err = err;
		}
	}
	if (p->nids && !p->err)
		p->err = shard_unchanged(shard, p->msg, sizeof(p->msg));
	p->nids = 0;
}

/*
 * The stage read alone: the first ring batches into the slots, queued at once as far as the reader
 * takes them (a batch is up to PL_NIN reads, the reader holds WSN_READER_MAX_QUEUED): past that, each
 * batch waits for the oldest to be in.
 */
static int read_alone(struct pl_dev *d, struct wsn_reader *rd)
{
	struct pl_batch b[PL_MAX_RING];
	struct pending *p = calloc(PL_MAX_RING, sizeof(*p));
	double t0, bytes = 0;
	int64_t rows = 0;
	int n = first_batches(d->run->ds, rd, b, d->ring), err = 0, queued = 0, waited = 0, reads = 0;

	if (!p || n < 0) {
		free(p);
		return n < 0 ? n : WSN_ENOMEM;
	}
	t0 = cli_now();
	while (waited < queued || (queued < n && !err)) {
		if (queued < n && !err && reads + PL_NIN <= WSN_READER_MAX_QUEUED) {
			struct pending *q = &p[queued];

			q->sl = &d->slots[queued];
			q->b = d->slots[queued].b = b[queued];
			batch_submit(d, rd, q);
			reads += q->nids;
			err = q->err;
			queued++;
			continue;
		}
		reads -= p[waited].nids; /* before the wait, which clears them */
		batch_wait(d, rd, &p[waited]);
		if (p[waited].err && !err)
			err = p[waited].err;
		bytes += p[waited].bytes;
		rows += b[waited].rows;
		waited++;
	}
	t0 = cli_now() - t0;
	for (int i = 0; i < queued; i++)
		if (p[i].err) {
			dataset_fail(d->run->ds, p[i].err, p[i].msg);
			break;
		}
	if (!err && t0 > 0) {
		d->res->st[ST_READ].alone_gbs = bytes / t0 / 1e9;
		d->res->st[ST_READ].alone_rows_s = (double)rows / t0;
	}
	free(p);
	return err;
}

static bool slot_free_now(struct pl_dev *d, int64_t k)
{
	bool free_;

	pthread_mutex_lock(&d->mu);
	free_ = !d->abort && d->slots[k % d->ring].state == SLOT_FREE;
	pthread_mutex_unlock(&d->mu);
	return free_;
}

/* A batch's reads are in: hand the slot to the device stages. */
static void batch_ready(struct pl_dev *d, struct pending *p)
{
	const struct pl_config *cfg = d->run->cfg;
	struct pl_devres *res = d->res;
	struct pl_slot *sl = p->sl;
	struct pl_stage *st = &res->st[ST_READ];
	double lat = cli_now() - p->t0;

	sl->b = p->b;
	sl->read_s = lat;
	sl->verify = pl_verifies(cfg) && p->b.seq % (uint64_t)cfg->verify_every == 0;
	sl->write = cfg->output && !cfg->read_only && p->b.pass == 0;
	sl->copy_out = !d->host && (sl->verify || sl->write);
	st->bytes += p->bytes;
	st->batches++;
	st->rows += p->b.rows;
	pl_hist_add(&st->lat, lat);
	atomic_fetch_add(&res->live_read_bytes, (long long)p->bytes);
	pthread_mutex_lock(&d->mu);
	sl->k = p->k;
	sl->state = SLOT_READ;
	d->nread = p->k + 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/*
 * The reader: takes the next batch for the next slot, queues its reads, and keeps the next
 * batch's reads queued behind them when its slot is free too, so the io_uring queue stays full
 * from one batch into the next. Its busy time is the time spent queueing and waiting for reads
 * (not waiting for a free slot).
 */
static void *reader_main(void *arg)
{
	struct pl_dev *d = arg;
	struct pl_dataset *ds = d->run->ds;
	const struct pl_config *cfg = d->run->cfg;
	struct pl_devres *res = d->res;
	struct wsn_reader *rd = NULL;
	struct pending pend[READ_AHEAD];
	int ahead = d->ring < READ_AHEAD ? d->ring : READ_AHEAD, np = 0, more = 1, err;
	char msg[PL_ERRLEN];
	int64_t k_next = 0;
	double busy = 0;

	if ((err = wsn_reader_create(&cfg->rd, &rd)) < 0) {
		errf(msg, sizeof(msg), err, "run: cannot set up the io_uring reader for %s", d->res->spec);
		dev_fail(d, msg);
		more = 0;
	}
	for (int i = 0; more && i < d->ring; i++)
		wsn_reader_register(rd, d->slots[i].hin, d->hin_len); /* refused: reads bounce, still correct */
	if (more && cfg->standalone && read_alone(d, rd) < 0)
		more = 0;
	pthread_mutex_lock(&d->mu);
	d->reader_ready = 1;
	pthread_cond_broadcast(&d->cv);
	while (!d->reader_go && !d->abort)
		pthread_cond_wait(&d->cv, &d->mu);
	if (d->abort)
		more = 0;
	pthread_mutex_unlock(&d->mu);

	for (;;) {
		struct pending *p;
		double t;

		/* queue the next batches while their slots are free (wait for one only when idle) */
		while (more && np < ahead) {
			struct pl_batch b;
			int r;

			if (np == 0 && !wait_slot(d, k_next, SLOT_FREE)) {
				more = 0; /* aborted */
				break;
			}
			if (np > 0 && !slot_free_now(d, k_next))
				break; /* busy: try again after the oldest batch is in */
			t = cli_now();
			if ((r = next_batch(ds, rd, &b)) <= 0) {
				more = 0;
				break;
			}
			p = &pend[np++];
			memset(p, 0, sizeof(*p));
			p->k = k_next++;
			p->sl = &d->slots[p->k % d->ring];
			p->b = b;
			p->t0 = t;
			batch_submit(d, rd, p);
			busy += cli_now() - t;
			if (p->err)
				more = 0;
		}
		if (np == 0)
			break;
		p = &pend[0];
		t = cli_now();
		batch_wait(d, rd, p);
		busy += cli_now() - t;
		if (p->err) {
			dataset_fail(ds, p->err, p->msg);
			for (int i = 1; i < np; i++) /* nothing may still be reading into a slot */
				batch_wait(d, rd, &pend[i]);
			break;
		}
		batch_ready(d, p);
		memmove(&pend[0], &pend[1], sizeof(pend[0]) * (size_t)(np - 1));
		np--;
		if (d->abort) {
			for (int i = 0; i < np; i++)
				batch_wait(d, rd, &pend[i]);
			break;
		}
	}
	res->st[ST_READ].busy += busy;
	pthread_mutex_lock(&d->mu);
	d->reader_done = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	if (rd) {
		wsn_reader_stats(rd, &res->rs);
		wsn_reader_buffer_stats(rd, &res->bs);
		snprintf(res->ring_mode, sizeof(res->ring_mode), "%s", wsn_reader_ring_mode(rd));
		d->reader_unusable = res->bs.unusable;
		wsn_reader_destroy(rd);
	}
	return NULL;
}

/* ---- stage: copies in, kernel, copies out (queued on the device's streams) ---- */

static int submit(struct pl_dev *d, struct pl_slot *sl, char *msg, size_t len)
{
	const struct pl_config *cfg = d->run->cfg;
	const struct pl_shape *sh = &d->run->ds->shape;
	const char *what = "host-to-device copy";
	int64_t rows = sl->b.rows;
	struct wsn_args a;
	int err = 0;

	if (!d->host) {
		if ((err = wsn_event_record(sl->ev[E_H2D0], d->cs)) < 0)
			goto fail;
		for (int i = 0; i < PL_NIN; i++)
			if (sh->in[i] && (err = wsn_memcpy(d->dev, dev_in(d, sl, i), host_in(d, sl, i),
							   pl_in_bytes(sh, i, rows), WSN_COPY_H2D, d->cs)) < 0)
				goto fail;
		if ((err = wsn_event_record(sl->ev[E_H2D1], d->cs)) < 0 ||
		    (err = wsn_stream_wait_event(d->ks, sl->ev[E_H2D1])) < 0)
			goto fail;
	}
	what = "poisoning the outputs";
	if (sl->verify) /* all-ones bits: NaN in f32, f16 and bf16, so an unwritten element fails */
		for (int i = 0; i < PL_NOUT; i++) {
			if (!sh->out[i])
				continue;
			if (d->host)
				memset(dev_out(d, sl, i), 0xff, pl_out_bytes(sh, i, rows));
			else if ((err = wsn_mem_set(d->dev, dev_out(d, sl, i), 0xff, pl_out_bytes(sh, i, rows), d->ks)) < 0)
				goto fail;
		}
	what = wsn_op_name(sh->op);
	slot_args(d, sl, &a);
	if ((err = wsn_event_record(sl->ev[E_K0], d->ks)) < 0)
		goto fail;
	for (int l = 0; l < cfg->kernel_loops; l++) {
		if (d->fault_armed) {
			d->fault_armed = 0;
			snprintf(msg, len, "run: %s on %s (%s), shard '%s': EDRIVER: injected fault (--inject-fault)",
				 what, d->res->spec, d->res->name, d->run->ds->shards[sl->b.shard].path);
			return WSN_EDRIVER;
		}
		if ((err = wsn_plan_execute(d->plan, &a, d->ks)) < 0)
			goto fail;
	}
	if ((err = wsn_event_record(sl->ev[E_K1], d->ks)) < 0)
		goto fail;
	what = "device-to-host copy";
	if (sl->copy_out) {
		if ((err = wsn_stream_wait_event(d->os, sl->ev[E_K1])) < 0 ||
		    (err = wsn_event_record(sl->ev[E_D2H0], d->os)) < 0)
			goto fail;
		for (int i = 0; i < PL_NOUT; i++)
			if (sh->out[i] && (err = wsn_memcpy(d->dev, sl->hout + d->out_off[i], dev_out(d, sl, i),
							    pl_out_bytes(sh, i, rows), WSN_COPY_D2H, d->os)) < 0)
				goto fail;
		if ((err = wsn_event_record(sl->ev[E_D2H1], d->os)) < 0)
			goto fail;
	}
	return 0;
fail:
	errf(msg, len, err, "run: %s on %s (%s), shard '%s' rows %lld..%lld", what, d->res->spec, d->res->name,
	     d->run->ds->shards[sl->b.shard].path, (long long)sl->b.row0, (long long)(sl->b.row0 + rows - 1));
	return err;
}

static void *submit_main(void *arg)
{
	struct pl_dev *d = arg;
	char msg[PL_ERRLEN];

	for (int64_t k = 0;; k++) {
		struct pl_slot *sl = &d->slots[k % d->ring];

		if (!wait_slot(d, k, SLOT_READ))
			break;
		if (!d->run->cfg->read_only && submit(d, sl, msg, sizeof(msg)) < 0) {
			dev_fail(d, msg);
			break;
		}
		set_state(d, sl, SLOT_SUBMITTED);
	}
	return NULL;
}

/* Wait for the batch's device work and take its event times. */
static int complete(struct pl_dev *d, struct pl_slot *sl, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_devres *res = d->res;
	int loops = d->run->cfg->kernel_loops, err;
	int64_t rows = sl->b.rows;

	if ((err = wsn_event_sync(sl->ev[sl->copy_out ? E_D2H1 : E_K1])) < 0)
		goto fail;
	memset(sl->ms, 0, sizeof(sl->ms));
	if ((!d->host && (err = wsn_event_elapsed(sl->ev[E_H2D0], sl->ev[E_H2D1], &sl->ms[0])) < 0) ||
	    (err = wsn_event_elapsed(sl->ev[E_K0], sl->ev[E_K1], &sl->ms[1])) < 0 ||
	    (sl->copy_out && (err = wsn_event_elapsed(sl->ev[E_D2H0], sl->ev[E_D2H1], &sl->ms[2])) < 0))
		goto fail;
	if (!d->host) {
		double b = 0;
		for (int i = 0; i < PL_NIN; i++)
			b += (double)pl_in_bytes(sh, i, rows);
		stage_add(&res->st[ST_H2D], b, sl->ms[0] * 1e-3, rows);
	}
	{
		struct pl_stage *st = &res->st[ST_KERNEL];
		double per = (double)wsn_op_min_bytes(sh->op, rows, sh->hidden, sh->dt, sh->has_weight, sh->has_bias);
		double s = sl->ms[1] * 1e-3;

		st->bytes += per * loops;
		st->busy += s;
		st->batches++;
		st->rows += rows * loops;
		pl_hist_add_n(&st->lat, s / loops, (uint64_t)loops);
	}
	if (sl->copy_out) {
		double b = 0;
		for (int i = 0; i < PL_NOUT; i++)
			b += (double)pl_out_bytes(sh, i, rows);
		stage_add(&res->st[ST_D2H], b, sl->ms[2] * 1e-3, rows);
	}
	if (d->run->cfg->inject_mismatch && sl->verify) {
		/* the first row is always sampled: make its first output element wrong */
		float bad = 1000.0f;
		wsn_dtype_convert(sl->hout + d->out_off[sh->out[PL_OUT_Y] ? PL_OUT_Y : PL_OUT_DX], sh->dt, &bad,
				  WSN_F32, 1);
	}
	return 0;
fail:
	errf(msg, len, err, "run: waiting for %s on %s (%s)", wsn_op_name(sh->op), d->res->spec, d->res->name);
	return err;
}

static void *complete_main(void *arg)
{
	struct pl_dev *d = arg;
	char msg[PL_ERRLEN];

	for (int64_t k = 0;; k++) {
		struct pl_slot *sl = &d->slots[k % d->ring];

		if (!wait_slot(d, k, SLOT_SUBMITTED))
			break;
		if (!d->run->cfg->read_only && complete(d, sl, msg, sizeof(msg)) < 0) {
			dev_fail(d, msg);
			break;
		}
		set_state(d, sl, SLOT_DONE);
	}
	return NULL;
}

/* ---- stage: verification against the CPU reference ---- */

double pl_tolerance(enum wsn_dtype dt)
{
	return dt == WSN_F32 ? 1e-5 : dt == WSN_F16 ? 5e-3 : 1e-2;
}

/* Fold one comparison into the device's worst verdicts; returns whether it passed. */
static int add_verdict(struct pl_devres *res, const char *name, const struct wsn_compare *c, double tol,
		       char *why, size_t len)
{
	struct pl_verdict *v = NULL;
	int pass = c->nonfinite == 0 && c->rel_l2 <= tol;

	for (int i = 0; i < res->nv; i++)
		if (!strcmp(res->v[i].name, name))
			v = &res->v[i];
	if (!v && res->nv < (int)(sizeof(res->v) / sizeof(res->v[0]))) {
		v = &res->v[res->nv++];
		memset(v, 0, sizeof(*v));
		v->name = name;
		v->pass = 1;
		v->tol = tol;
	}
	if (v) {
		if (c->rel_l2 > v->rel || isnan(c->rel_l2))
			v->rel = c->rel_l2;
		if (c->max_abs > v->max_abs || isnan(c->max_abs))
			v->max_abs = c->max_abs;
		v->nonfinite += c->nonfinite;
		v->pass = v->pass && pass;
	}
	if (!pass && !why[0])
		snprintf(why, len, "%s rel_l2 %.3g (tolerance %.0e), %lld finite/non-finite disagreements", name,
			 c->rel_l2, tol, (long long)c->nonfinite);
	return pass;
}

void pl_sample_rows(int64_t rows, int n, int64_t *idx)
{
	for (int i = 0; i < n; i++)
		idx[i] = n == 1 ? 0 : (int64_t)((double)i * (double)(rows - 1) / (double)(n - 1) + 0.5);
}

void pl_gather(void *dst, const void *src, const int64_t *idx, int n, size_t row_bytes)
{
	for (int i = 0; i < n; i++)
		memcpy((char *)dst + (size_t)i * row_bytes, (const char *)src + (size_t)idx[i] * row_bytes, row_bytes);
}

/*
 * Verify a batch: sampled rows of y/dx (and the stats) against the CPU reference computed on those
 * rows alone; dweight/dbias, which depend on every row of the batch, against the CPU reference over
 * all of them. Returns 0 (mismatches are counted, not errors) or a WSN_E* code with msg set.
 */
static int verify_batch(struct pl_dev *d, struct wsn_device *cpu, struct pl_slot *sl, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_devres *res = d->res;
	int64_t rows = sl->b.rows, vr = d->run->cfg->verify_rows;
	int n = (int)(vr < rows ? vr : rows), err = 0, pass = 1;
	struct wsn_plan *plan = NULL, *full = NULL;
	struct wsn_plan_options po;
	void *rin[PL_NIN] = { 0 }, *rout[PL_NOUT] = { 0 }, *got[PL_NOUT] = { 0 };
	void *fin[PL_NIN] = { 0 }, *fout[PL_NOUT] = { 0 };
	int64_t *idx = malloc(sizeof(*idx) * (size_t)n);
	char why[256] = "";
	struct wsn_args a;

	wsn_plan_options_init(&po, sh->op);
	po.eps = sh->eps;
	po.has_weight = sh->has_weight;
	po.has_bias = sh->has_bias;
	po.threads = d->run->cfg->threads;
	if (!idx)
		goto oom;
	pl_sample_rows(rows, n, idx);
	/* sampled rows: gather inputs, run the reference, gather the device's outputs */
	for (int i = 0; i < PL_NIN; i++) {
		if (!sh->in[i])
			continue;
		if (!sh->in_row[i]) {
			rin[i] = host_in(d, sl, i);
			continue;
		}
		if (!(rin[i] = malloc(pl_in_bytes(sh, i, n))))
			goto oom;
		pl_gather(rin[i], host_in(d, sl, i), idx, n, sh->in_unit[i]);
	}
	for (int i = 0; i < PL_NOUT; i++) {
		if (!sh->out[i] || !sh->out_row[i])
			continue;
		if (!(rout[i] = malloc(pl_out_bytes(sh, i, n))) || !(got[i] = malloc(pl_out_bytes(sh, i, n))))
			goto oom;
		pl_gather(got[i], sl->hout + d->out_off[i], idx, n, sh->out_unit[i]);
	}
	if ((err = wsn_plan_create(cpu, sh->op, n, sh->hidden, sh->dt, &po, &plan)) < 0) {
		errf(msg, len, err, "run: verification plan");
		goto out;
	}
	make_args(sh, rin, rout, n, WSN_MEM_HOST, &a);
	a.dweight.data = a.dbias.data = NULL; /* over sampled rows they mean nothing */
	if ((err = wsn_plan_execute(plan, &a, NULL)) < 0) {
		errf(msg, len, err, "run: CPU reference");
		goto out;
	}
	for (int i = 0; i < PL_NOUT; i++) {
		struct wsn_tensor tg, tr;
		struct wsn_compare c;
		enum wsn_dtype dt = i == PL_OUT_MEAN || i == PL_OUT_RSTD ? WSN_F32 : sh->dt;

		if (!rout[i])
			continue;
		wsn_tensor_1d(&tg, got[i], dt, WSN_MEM_HOST, (int64_t)(pl_out_bytes(sh, i, n) / wsn_dtype_size(dt)));
		wsn_tensor_1d(&tr, rout[i], dt, WSN_MEM_HOST, (int64_t)(pl_out_bytes(sh, i, n) / wsn_dtype_size(dt)));
		wsn_tensor_compare(&tg, &tr, &c);
		pass &= add_verdict(res, pl_out_names[i], &c, pl_tolerance(dt), why, sizeof(why));
	}
	res->verified_rows += n;

	/* parameter gradients over every row of the batch */
	if (sh->out[PL_OUT_DW] || sh->out[PL_OUT_DB]) {
		if ((err = wsn_plan_create(cpu, sh->op, rows, sh->hidden, sh->dt, &po, &full)) < 0) {
			errf(msg, len, err, "run: verification plan");
			goto out;
		}
		for (int i = 0; i < PL_NIN; i++)
			if (sh->in[i])
				fin[i] = host_in(d, sl, i);
		for (int i = 0; i < PL_NOUT; i++)
			if (sh->out[i] && !(fout[i] = malloc(pl_out_bytes(sh, i, rows))))
				goto oom;
		make_args(sh, fin, fout, rows, WSN_MEM_HOST, &a);
		if ((err = wsn_plan_execute(full, &a, NULL)) < 0) {
			errf(msg, len, err, "run: CPU reference");
			goto out;
		}
		for (int i = PL_OUT_DW; i <= PL_OUT_DB; i++) {
			struct wsn_tensor tg, tr;
			struct wsn_compare c;

			if (!sh->out[i])
				continue;
			wsn_tensor_1d(&tg, sl->hout + d->out_off[i], sh->dt, WSN_MEM_HOST, sh->hidden);
			wsn_tensor_1d(&tr, fout[i], sh->dt, WSN_MEM_HOST, sh->hidden);
			wsn_tensor_compare(&tg, &tr, &c);
			pass &= add_verdict(res, pl_out_names[i], &c, pl_tolerance(sh->dt), why, sizeof(why));
		}
	}
	res->verified_batches++;
	if (!pass) {
		res->mismatched_batches++;
		if (!res->first_mismatch[0])
			snprintf(res->first_mismatch, sizeof(res->first_mismatch), "batch %llu (shard '%.300s' rows %lld..%lld): %s",
				 (unsigned long long)sl->b.seq, d->run->ds->shards[sl->b.shard].path,
				 (long long)sl->b.row0, (long long)(sl->b.row0 + rows - 1), why);
	}
	goto out;
oom:
	err = WSN_ENOMEM;
	snprintf(msg, len, "run: verification on %s: ENOMEM: out of memory", d->res->spec);
out:
	for (int i = 0; i < PL_NIN; i++)
		if (sh->in_row[i])
			free(rin[i]);
	for (int i = 0; i < PL_NOUT; i++) {
		free(rout[i]);
		free(got[i]);
		free(fout[i]);
	}
	free(idx);
	wsn_plan_destroy(plan);
	wsn_plan_destroy(full);
	return err;
}

/* The CPU device the reference runs on, opened on first use. */
static int verify_cpu(struct pl_dev *d, struct wsn_device **cpu, char *msg, size_t len)
{
	int err;

	if (*cpu)
		return 0;
	if ((err = wsn_device_open("cpu", cpu)) < 0 ||
	    (d->run->cfg->threads > 0 && (err = wsn_device_set_threads(*cpu, d->run->cfg->threads)) < 0)) {
		errf(msg, len, err, "run: cannot open the CPU for verification");
		wsn_device_close(*cpu);
		*cpu = NULL;
		return err;
	}
	return 0;
}

static void *verify_main(void *arg)
{
	struct pl_dev *d = arg;
	struct wsn_device *cpu = NULL;
	char msg[PL_ERRLEN];

	for (int64_t k = 0;; k++) {
		struct pl_slot *sl = &d->slots[k % d->ring];

		if (!wait_slot(d, k, SLOT_DONE))
			break;
		if (sl->verify && !atomic_load(&d->run->ds->stop)) {
			double t0 = cli_now();
			if (verify_cpu(d, &cpu, msg, sizeof(msg)) < 0 || verify_batch(d, cpu, sl, msg, sizeof(msg)) < 0) {
				dev_fail(d, msg);
				break;
			}
			stage_add(&d->res->st[ST_VERIFY], 0, cli_now() - t0, sl->b.rows);
		}
		set_state(d, sl, SLOT_VERIFIED);
	}
	wsn_device_close(cpu);
	return NULL;
}

/* ---- stage: output writes ---- */

static void *write_main(void *arg)
{
	struct pl_dev *d = arg;
	struct pl_dataset *ds = d->run->ds;
	const struct pl_shape *sh = &ds->shape;
	struct pl_devres *res = d->res;
	struct pl_writer *w = NULL;
	char msg[PL_ERRLEN];

	for (int64_t k = 0;; k++) {
		struct pl_slot *sl = &d->slots[k % d->ring];

		if (!wait_slot(d, k, SLOT_VERIFIED))
			break;
		if (sl->write && !atomic_load(&ds->stop)) {
			void *host[PL_NOUT] = { 0 };
			double t0 = cli_now(), bytes = 0;

			for (int i = 0; i < PL_NOUT; i++)
				if (sh->out[i]) {
					host[i] = sl->hout + d->out_off[i];
					bytes += (double)pl_out_bytes(sh, i, sl->b.rows);
				}
			if ((!w && pl_writer_create(&w, msg, sizeof(msg)) < 0) ||
			    pl_out_write_batch(ds, w, &sl->b, host, msg, sizeof(msg)) < 0) {
				dataset_fail(ds, WSN_EIO, msg);
			} else {
				stage_add(&res->st[ST_WRITE], bytes, cli_now() - t0, sl->b.rows);
			}
		}
		res->rows += sl->b.rows;
		res->batches++;
		if (!d->run->cfg->read_only)
			res->kernel_rows += sl->b.rows * d->run->cfg->kernel_loops;
		atomic_fetch_add(&res->live_rows, (long long)sl->b.rows);
		set_state(d, sl, SLOT_FREE);
	}
	pl_writer_destroy(w);
	return NULL;
}

/* ---- setup, stages measured alone, teardown ---- */

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static int setup_slots(struct pl_dev *d, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	int64_t br = d->run->cfg->batch_rows;
	int err = 0;

	d->hin_len = d->hout_len = d->din_len = 0;
	for (int i = 0; i < PL_NIN; i++) {
		if (!sh->in[i])
			continue;
		d->in_off[i] = d->hin_len;
		d->hin_len += round_up(pl_in_bytes(sh, i, br) + SLACK, SLACK);
		d->din_off[i] = d->din_len;
		d->din_len += round_up(pl_in_bytes(sh, i, br), DEV_ALIGN);
	}
	for (int i = 0; i < PL_NOUT; i++) {
		if (!sh->out[i])
			continue;
		d->out_off[i] = d->hout_len;
		d->hout_len += round_up(pl_out_bytes(sh, i, br), DEV_ALIGN);
	}
	d->dout_len = d->hout_len;
	if (!(d->slots = calloc((size_t)d->ring, sizeof(*d->slots)))) {
		snprintf(msg, len, "run: %s: ENOMEM: out of memory", d->res->spec);
		return WSN_ENOMEM;
	}
	for (int s = 0; s < d->ring; s++) {
		struct pl_slot *sl = &d->slots[s];
		const char *what = "pinned host memory";
		size_t bytes = d->hin_len;

		sl->k = -1;
		if ((err = wsn_host_alloc(d->dev, d->hin_len, (void **)&sl->hin)) < 0)
			goto fail;
		bytes = d->hout_len;
		if ((err = wsn_host_alloc(d->dev, d->hout_len, (void **)&sl->hout)) < 0)
			goto fail;
		what = "device memory";
		if (!d->host) {
			bytes = d->din_len;
			if ((err = wsn_mem_alloc(d->dev, d->din_len, (void **)&sl->din)) < 0)
				goto fail;
			bytes = d->dout_len;
			if ((err = wsn_mem_alloc(d->dev, d->dout_len, (void **)&sl->dout)) < 0)
				goto fail;
		}
		what = "events";
		for (int e = 0; e < E_N; e++)
			if ((err = wsn_event_create(d->dev, &sl->ev[e])) < 0)
				goto fail;
		continue;
fail:
		errf(msg, len, err, "run: cannot allocate %zu bytes of %s for ring slot %d of %d on %s", bytes, what,
		     s, d->ring, d->res->spec);
		return err;
	}
	return 0;
}

static void free_slots(struct pl_dev *d)
{
	for (int s = 0; d->slots && s < d->ring; s++) {
		struct pl_slot *sl = &d->slots[s];

		for (int e = 0; e < E_N; e++)
			wsn_event_destroy(sl->ev[e]);
		wsn_mem_free(d->dev, sl->din);
		wsn_mem_free(d->dev, sl->dout);
		/* after a stalled read the kernel may still write into the host regions: keep them */
		if (!d->reader_unusable) {
			if (sl->hin)
				wsn_host_free(d->dev, sl->hin);
			if (sl->hout)
				wsn_host_free(d->dev, sl->hout);
		}
	}
	free(d->slots);
	d->slots = NULL;
}

/* Repetitions for a step that took t seconds once, to last ALONE_SECONDS. */
static int reps_for(double t)
{
	double r = t > 0 ? ALONE_SECONDS / t : 1000; /* a step too short for the clock: many */
	return r < ALONE_MIN_REPS ? ALONE_MIN_REPS : r > ALONE_MAX_REPS ? ALONE_MAX_REPS : (int)r;
}

/* One step of a stage measured alone on slot 0, on stream s, timed with the slot's events. */
static int alone_step(struct pl_dev *d, int stage, int reps, double *seconds)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_slot *sl = &d->slots[0];
	int64_t rows = sl->b.rows;
	struct wsn_stream *s = stage == ST_H2D ? d->cs : stage == ST_D2H ? d->os : d->ks;
	struct wsn_args a;
	float ms = 0;
	int err;

	slot_args(d, sl, &a);
	if ((err = wsn_event_record(sl->ev[E_K0], s)) < 0)
		return err;
	for (int r = 0; r < reps; r++) {
		if (stage == ST_H2D) {
			for (int i = 0; i < PL_NIN && !err; i++)
				if (sh->in[i])
					err = wsn_memcpy(d->dev, dev_in(d, sl, i), host_in(d, sl, i), pl_in_bytes(sh, i, rows),
							 WSN_COPY_H2D, s);
		} else if (stage == ST_D2H) {
			for (int i = 0; i < PL_NOUT && !err; i++)
				if (sh->out[i])
					err = wsn_memcpy(d->dev, sl->hout + d->out_off[i], dev_out(d, sl, i),
							 pl_out_bytes(sh, i, rows), WSN_COPY_D2H, s);
		} else {
			for (int l = 0; l < d->run->cfg->kernel_loops && !err; l++)
				err = wsn_plan_execute(d->plan, &a, s);
		}
		if (err < 0)
			return err;
	}
	if ((err = wsn_event_record(sl->ev[E_K1], s)) < 0 || (err = wsn_event_sync(sl->ev[E_K1])) < 0 ||
	    (err = wsn_event_elapsed(sl->ev[E_K0], sl->ev[E_K1], &ms)) < 0)
		return err;
	*seconds = ms * 1e-3 / reps;
	return 0;
}

/* reps verifications of slot 0's batch on the CPU device cpu; *seconds per verification. */
static int verify_alone(struct pl_dev *d, struct wsn_device *cpu, int reps, double *seconds, char *msg, size_t len)
{
	double t0 = cli_now();
	int err = 0;

	for (int i = 0; i < reps && err >= 0; i++)
		err = verify_batch(d, cpu, &d->slots[0], msg, len);
	*seconds = (cli_now() - t0) / reps;
	return err;
}

/*
 * Each device stage alone on the first batch (read into slot 0 by the reader): copies in, the
 * kernel (all its loops), copies out, and one verification; rates in rows/s of that batch.
 */
static int measure_alone(struct pl_dev *d, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_devres *res = d->res;
	struct pl_slot *sl = &d->slots[0];
	double rows = (double)sl->b.rows, in_b = 0, out_b = 0, t = 0;
	static const int stages[] = { ST_H2D, ST_KERNEL, ST_D2H };
	struct wsn_device *cpu = NULL;
	int err;

	if (sl->b.rows <= 0)
		return 0; /* nothing was read */
	for (int i = 0; i < PL_NIN; i++)
		in_b += (double)pl_in_bytes(sh, i, sl->b.rows);
	for (int i = 0; i < PL_NOUT; i++)
		out_b += (double)pl_out_bytes(sh, i, sl->b.rows);
	for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
		int st = stages[k];
		double bytes = st == ST_H2D ? in_b : st == ST_D2H ? out_b :
			       (double)wsn_op_min_bytes(sh->op, sl->b.rows, sh->hidden, sh->dt, sh->has_weight,
							sh->has_bias) * d->run->cfg->kernel_loops;

		if (d->host && st != ST_KERNEL)
			continue;
		if ((err = alone_step(d, st, 1, &t)) < 0 || (err = alone_step(d, st, reps_for(t), &t)) < 0) {
			errf(msg, len, err, "run: %s alone on %s", pl_stage_names[st], res->spec);
			return err;
		}
		if (t > 0) {
			res->st[st].alone_rows_s = rows / t;
			res->st[st].alone_gbs = bytes / t / 1e9;
		}
	}
	sl->verify = 1;
	if (d->run->cfg->verify_rows > 0 && !d->run->cfg->inject_mismatch) {
		struct pl_devres save = *res; /* the pipeline's counts must not include these checks */

		/* once, then repeated for ALONE_SECONDS, as alone_step does for the other stages */
		if ((err = verify_cpu(d, &cpu, msg, len)) < 0 || (err = verify_alone(d, cpu, 1, &t, msg, len)) < 0 ||
		    (err = verify_alone(d, cpu, reps_for(t), &t, msg, len)) < 0) {
			wsn_device_close(cpu);
			return err;
		}
		memcpy(res->v, save.v, sizeof(res->v));
		res->nv = save.nv;
		res->verified_batches = save.verified_batches;
		res->mismatched_batches = save.mismatched_batches;
		res->verified_rows = save.verified_rows;
		memcpy(res->first_mismatch, save.first_mismatch, sizeof(res->first_mismatch));
		if (t > 0)
			res->st[ST_VERIFY].alone_rows_s = rows * (double)d->run->cfg->verify_every / t;
		wsn_device_close(cpu);
	}
	return 0;
}

/* Whether WSNORM_RUN_COPIES asks a host-memory device to run the pipeline as a GPU would. */
static int emulate_copies(void)
{
	const char *e = getenv("WSNORM_RUN_COPIES");
	return e && *e && strcmp(e, "0");
}

/* The run starts: its clock and its deadline (under run->mu). */
static void start_run(struct pl_run *run)
{
	run->go = 1;
	run->t_start = cli_now();
	pthread_mutex_lock(&run->ds->lock);
	if (run->cfg->duration > 0)
		run->ds->deadline = run->t_start + run->cfg->duration;
	pthread_mutex_unlock(&run->ds->lock);
	pthread_cond_broadcast(&run->cv);
}

/*
 * Every device arrives once, set up or failed: when the last one has, the run starts (and its
 * deadline with it). A device still setting up SETUP_WAIT_S after the first arrived is not waited
 * for, so one stuck in its driver does not hold the others.
 */
#define SETUP_WAIT_S 60
static void arrive(struct pl_run *run, int wait)
{
	struct timespec ts;

	pthread_mutex_lock(&run->mu);
	if (++run->ready == 1) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		run->setup_deadline = ts;
		run->setup_deadline.tv_sec += SETUP_WAIT_S;
	}
	if (run->ready == run->ndev && !run->go)
		start_run(run);
	while (wait && !run->go)
		if (pthread_cond_timedwait(&run->cv, &run->mu, &run->setup_deadline) == ETIMEDOUT && !run->go)
			start_run(run);
	pthread_mutex_unlock(&run->mu);
}

static void *device_main(void *arg)
{
	struct pl_dev *d = arg;
	struct pl_run *run = d->run;
	const struct pl_config *cfg = run->cfg;
	const struct pl_shape *sh = &run->ds->shape;
	struct pl_devres *res = d->res;
	void *(*const mains[])(void *) = { submit_main, complete_main, verify_main, write_main };
	pthread_t reader, stages[4];
	int have_reader = 0, nstages = 0, arrived = 0, err;
	char msg[PL_ERRLEN];
	uint64_t one = 1;
	double t0;

	if ((err = wsn_device_open(res->spec, &d->dev)) < 0 ||
	    (cfg->threads > 0 && (err = wsn_device_set_threads(d->dev, cfg->threads)) < 0)) {
		char index[16] = ""; /* named by its index in --devices, when there is a list */

		if (d->run->ndev > 1)
			snprintf(index, sizeof(index), "%d ", res->index);
		errf(msg, sizeof(msg), err, "run: cannot open device %s'%s'", index, res->spec);
		dev_fail(d, msg);
		goto out;
	}
	wsn_device_info(d->dev, &d->di);
	snprintf(res->spec, sizeof(res->spec), "%s", d->di.spec);
	snprintf(res->name, sizeof(res->name), "%s", d->di.name);
	/* WSNORM_RUN_COPIES=1: a host-memory device runs the GPU path (own buffers, copies, events) */
	d->host = res->host_mem = d->di.exec_mem == WSN_MEM_HOST && !emulate_copies();
	d->fault_armed = cfg->inject_fault == res->index;
	if (!cfg->read_only) {
		struct wsn_plan_options po;

		wsn_plan_options_init(&po, sh->op);
		po.eps = sh->eps;
		po.has_weight = sh->has_weight;
		po.has_bias = sh->has_bias;
		po.approach = cfg->approach;
		po.autotune = cfg->autotune;
		po.threads = cfg->threads;
		if ((err = wsn_plan_create(d->dev, sh->op, cfg->batch_rows, sh->hidden, sh->dt, &po, &d->plan)) < 0) {
			errf(msg, sizeof(msg), err, "run: cannot plan %s %s hidden %lld, %lld rows on %s (%s)",
			     wsn_op_name(sh->op), wsn_dtype_name(sh->dt), (long long)sh->hidden,
			     (long long)cfg->batch_rows, res->spec, res->name);
			dev_fail(d, msg);
			goto out;
		}
		wsn_plan_describe(d->plan, res->plan, sizeof(res->plan));
	}
	if ((err = wsn_stream_create(d->dev, &d->cs)) < 0 || (err = wsn_stream_create(d->dev, &d->ks)) < 0 ||
	    (err = wsn_stream_create(d->dev, &d->os)) < 0) {
		errf(msg, sizeof(msg), err, "run: streams on %s (%s)", res->spec, res->name);
		dev_fail(d, msg);
		goto out;
	}
	if (!cfg->read_only) {
		/* the CPU's default also when WSNORM_RUN_COPIES makes it copy like a GPU */
		uint64_t cb = cfg->copy_bytes ? cfg->copy_bytes :
			      d->di.exec_mem == WSN_MEM_HOST ? PL_DEFAULT_COPY_CPU : PL_DEFAULT_COPY_GPU;
		if ((err = cli_copy_bandwidth(d->dev, d->ks, cb, PL_COPY_ITERS, &res->copy_bps)) < 0) {
			errf(msg, sizeof(msg), err, "run: copy bandwidth of %s (%s)", res->spec, res->name);
			dev_fail(d, msg);
			goto out;
		}
	}
	if ((err = setup_slots(d, msg, sizeof(msg))) < 0) {
		dev_fail(d, msg);
		goto out;
	}
	if (pthread_create(&reader, NULL, reader_main, d)) {
		snprintf(msg, sizeof(msg), "run: %s: cannot start the reader thread", res->spec);
		dev_fail(d, msg);
		goto out;
	}
	have_reader = 1;
	pthread_mutex_lock(&d->mu);
	while (!d->reader_ready && !d->abort)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	if (cfg->standalone && !cfg->read_only && !d->abort && !atomic_load(&run->ds->stop) &&
	    measure_alone(d, msg, sizeof(msg)) < 0) {
		dev_fail(d, msg);
		goto out;
	}
	for (int s = 0; s < d->ring; s++) /* what the stages measured alone left is not a batch */
		d->slots[s].k = -1;
	arrive(run, 1);
	arrived = 1;
	t0 = cli_now();
	for (size_t i = 0; i < sizeof(mains) / sizeof(mains[0]) && !d->abort; i++) {
		if (pthread_create(&stages[i], NULL, mains[i], d)) {
			snprintf(msg, sizeof(msg), "run: %s: cannot start a pipeline thread", res->spec);
			dev_fail(d, msg);
			break;
		}
		nstages++;
	}
	pthread_mutex_lock(&d->mu);
	d->reader_go = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	for (int i = 0; i < nstages; i++)
		pthread_join(stages[i], NULL);
	res->wall = cli_now() - t0;
	if (d->fault_armed && !d->abort && !atomic_load(&run->ds->interrupted)) { /* no batch came: fire all the same */
		snprintf(msg, sizeof(msg), "run: %s (%s): EDRIVER: injected fault (--inject-fault): the device got no "
			 "batch, so it fails at the end of its run", res->spec, res->name);
		dev_fail(d, msg);
	}
out:
	if (!arrived)
		arrive(run, 0);
	if (have_reader) {
		pthread_mutex_lock(&d->mu);
		d->reader_go = 1;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(reader, NULL);
	}
	if (d->dev && !d->host && d->abort)
		wsn_stream_sync(d->dev, NULL); /* no queued copy or kernel may touch what is freed next */
	free_slots(d);
	wsn_stream_destroy(d->os);
	wsn_stream_destroy(d->ks);
	wsn_stream_destroy(d->cs);
	wsn_plan_destroy(d->plan);
	wsn_device_close(d->dev);
	d->dev = NULL;
	if (res->status != EXIT_RUNTIME)
		res->status = res->mismatched_batches ? EXIT_MISMATCH : EXIT_PASS;
	if (write(run->donefd, &one, sizeof(one)) < 0) {
		/* the main thread then finds the device done when it joins */
	}
	return NULL;
}

/* ---- the run ---- */

int pl_run_start(struct pl_run *run)
{
	pthread_condattr_t ca;

	if (!(run->devs = calloc((size_t)run->ndev, sizeof(*run->devs)))) {
		cli_error("run: out of memory");
		return EXIT_RUNTIME;
	}
	pthread_mutex_init(&run->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&run->cv, &ca);
	pthread_condattr_destroy(&ca);
	for (int i = 0; i < run->ndev; i++) {
		struct pl_dev *d = &run->devs[i];

		d->run = run;
		d->res = &run->res[i];
		d->ring = run->cfg->ring;
		pthread_mutex_init(&d->mu, NULL);
		pthread_cond_init(&d->cv, NULL);
	}
	run->donefd = eventfd(0, EFD_CLOEXEC);
	if (run->donefd < 0) {
		cli_error("run: eventfd: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	for (int i = 0; i < run->ndev; i++) {
		struct pl_dev *d = &run->devs[i];
		uint64_t one = 1;

		if (!pthread_create(&d->thread, NULL, device_main, d)) {
			d->started = 1;
			continue;
		}
		/* the devices started wait at the barrier for this one: it arrives as failed */
		snprintf(d->res->errmsg, sizeof(d->res->errmsg), "run: device %d '%s': cannot start its thread",
			 d->res->index, d->res->spec);
		d->res->status = EXIT_RUNTIME;
		arrive(run, 0);
		if (write(run->donefd, &one, sizeof(one)) < 0) {
			/* the main thread counts it when it joins */
		}
	}
	return 0;
}

void pl_run_join(struct pl_run *run)
{
	for (int i = 0; i < run->ndev; i++)
		if (run->devs[i].started) {
			pthread_join(run->devs[i].thread, NULL);
			run->devs[i].started = 0;
		}
	run->t_end = cli_now();
}

void pl_run_stop(struct pl_run *run, int interrupted)
{
	if (interrupted)
		atomic_store(&run->ds->interrupted, 1);
	atomic_store(&run->ds->stop, 1);
	for (int i = 0; run->devs && i < run->ndev; i++) {
		pthread_mutex_lock(&run->devs[i].mu);
		pthread_cond_broadcast(&run->devs[i].cv);
		pthread_mutex_unlock(&run->devs[i].mu);
	}
}

void pl_run_free(struct pl_run *run)
{
	for (int i = 0; run->devs && i < run->ndev; i++) {
		pthread_mutex_destroy(&run->devs[i].mu);
		pthread_cond_destroy(&run->devs[i].cv);
	}
	if (run->devs) {
		pthread_mutex_destroy(&run->mu);
		pthread_cond_destroy(&run->cv);
	}
	free(run->devs);
	run->devs = NULL;
	if (run->donefd >= 0)
		close(run->donefd);
	run->donefd = -1;
}
