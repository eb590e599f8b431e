/* SPDX-License-Identifier: MIT */
/* launcher/dataset.c: the run's dataset: listing shards, checking them, and cutting them into batches. */
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

/* ---- messages ---- */

/* "what: ENAME: detail" with the library's last error of this thread, into buf. */
void pl_errf(char *buf, size_t len, int err, const char *fmt, ...)
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

int pl_shard_identify(struct pl_shard *sh, char *msg, size_t len)
{
	if (stat(sh->path, &sh->id) < 0) {
		snprintf(msg, len, "run: cannot open input '%s': %s", sh->path, strerror(errno));
		return -1;
	}
	sh->have_id = 1;
	return 0;
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
			pl_errf(msg, len, err, "run: cannot read '%s'", sh->path);
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
void pl_dataset_fail(struct pl_dataset *ds, int err, const char *msg)
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
int pl_next_batch(struct pl_dataset *ds, struct wsn_reader *r, struct pl_batch *b)
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
		    (ds->seq > 0 && pl_past_deadline(ds))) {
			ds->exhausted = 1;
			break;
		}
		sh = &ds->shards[ds->cur];
		if (!sh->opened && (err = pl_shard_open(ds, ds->cur, r, 0, msg, sizeof(msg)))) {
			pl_dataset_fail(ds, err, msg);
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
int pl_first_batches(struct pl_dataset *ds, struct wsn_reader *r, struct pl_batch *out, int n)
{
	char msg[PL_ERRLEN];
	int got = 0, err = 0;

	pthread_mutex_lock(&ds->lock);
	for (int s = 0; s < ds->n && got < n && !err; s++) {
		struct pl_shard *sh = &ds->shards[s];
		if (!sh->opened && (err = pl_shard_open(ds, s, r, 0, msg, sizeof(msg)))) {
			pl_dataset_fail(ds, err, msg);
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

