/* SPDX-License-Identifier: MIT */
/* launcher/util.c: option parsing, messages, progress lines and JSON output for the CLI. */
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef WSN_MPI
const char *cli_prog = "wsnorm-mpi";
#else
const char *cli_prog = "wsnorm";
#endif
int cli_verbose;

/* errno of the first write to standard output that failed, through the stream cli_stdout_open made */
static int stdout_errno;

/* The write function of that stream: all of buf to file descriptor 1, or -1 with the failure kept. */
static ssize_t stdout_write(void *cookie, const char *buf, size_t len)
{
	size_t done = 0;

	(void)cookie;
	while (done < len) {
		ssize_t w = write(STDOUT_FILENO, buf + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!stdout_errno)
				stdout_errno = w < 0 ? errno : EIO;
			return done ? (ssize_t)done : -1;
		}
		done += (size_t)w;
	}
	return (ssize_t)len;
}

void cli_stdout_open(void)
{
	cookie_io_functions_t io = { .write = stdout_write };
	FILE *f = fopencookie(NULL, "w", io);

	if (!f)
		return; /* stdio's own stream then; a failed write is still caught, its reason may be lost */
	/* buffered as stdio buffers file descriptor 1: by line on a terminal, else in blocks */
	setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
	stdout = f;
}

int cli_stdout_error(void)
{
	return stdout_errno;
}

/* Whether the process has CAP_FOWNER in its effective set (root has it unless it was dropped). */
static int have_cap_fowner(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long caps = 0;
	char line[256];
	int found = 0;

	if (!f)
		return geteuid() == 0;
	while (!found && fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapEff:", 7)) {
			caps = strtoull(line + 7, NULL, 16);
			found = 1;
		}
	fclose(f);
	return found ? (int)((caps >> 3) & 1) : geteuid() == 0; /* CAP_FOWNER is capability 3 */
}

/* Whether the sticky bit of dir stops euid replacing file (see cli_check_replace). */
static int replace_denied(const struct stat *file, const struct stat *dir, unsigned euid, int cap_fowner)
{
	if (!(dir->st_mode & S_ISVTX))
		return 0;
	return file->st_uid != euid && dir->st_uid != euid && !cap_fowner;
}

int cli_check_replace(const char *path, const struct stat *st, char *msg, size_t len)
{
	const char *slash = strrchr(path, '/');
	struct stat ds;
	char *dir;
	int e = 0;

	if (!(dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup("."))) {
		snprintf(msg, len, "cannot replace '%s': ENOMEM: out of memory", path);
		return -ENOMEM;
	}
	if (stat(dir, &ds) < 0) {
		e = errno;
		snprintf(msg, len, "cannot replace '%s': %s: its directory '%s': %s", path, wsn_err_name(-e), dir,
			 strerror(e));
	} else if (access(dir, W_OK | X_OK) < 0) {
		e = errno;
		snprintf(msg, len, "cannot replace '%s': %s: no file can be replaced in directory '%s': %s", path,
			 wsn_err_name(-e), dir, strerror(e));
	} else if (replace_denied(st, &ds, (unsigned)geteuid(), have_cap_fowner())) {
		e = EPERM;
		snprintf(msg, len, "cannot replace '%s': EPERM: it belongs to another user (uid %u) in a sticky directory "
			 "('%s', mode %o) that is not ours either: only its owner, the directory's owner or a process with "
			 "CAP_FOWNER may replace it", path, (unsigned)st->st_uid, dir, (unsigned)(ds.st_mode & 07777));
	}
	free(dir);
	return -e;
}

int cli_check_new_file(const char *path, int stat_errno, int dir_made_later, char *msg, size_t len)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	struct stat st;
	char *dir;
	int e = 0;

	if (stat_errno != ENOENT) { /* a name too long, a file where a directory should be, no search permission */
		snprintf(msg, len, "cannot write '%s': %s: %s", path, wsn_err_name(-stat_errno), strerror(stat_errno));
		return -stat_errno;
	}
	if (strlen(base) > NAME_MAX) {
		snprintf(msg, len, "cannot write '%s': ENAMETOOLONG: its name is %zu bytes, more than a directory entry "
			 "holds (%d)", path, strlen(base), NAME_MAX);
		return -ENAMETOOLONG;
	}
	if (dir_made_later)
		return 0;
	if (!(dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup("."))) {
		snprintf(msg, len, "cannot write '%s': ENOMEM: out of memory", path);
		return -ENOMEM;
	}
	if (stat(dir, &st) < 0) {
		e = errno;
		snprintf(msg, len, "cannot write '%s': %s: its directory '%s' %s", path, wsn_err_name(-e), dir,
			 e == ENOENT ? "does not exist" : strerror(e));
	} else if (!S_ISDIR(st.st_mode)) {
		e = ENOTDIR;
		snprintf(msg, len, "cannot write '%s': ENOTDIR: '%s' is not a directory", path, dir);
	} else if (access(dir, W_OK | X_OK) < 0) {
		e = errno;
		snprintf(msg, len, "cannot write '%s': %s: no file can be created in directory '%s': %s", path,
			 wsn_err_name(-e), dir, strerror(e));
	}
	free(dir);
	return -e;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[2048], clean[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	wsn_text_escape(clean, sizeof(clean), msg); /* a value given on the command line may hold anything */
	fprintf(stderr, "%s%s%s: %s\nTry '%s%s%s --help' for more information.\n", cli_prog, cmd ? " " : "",
		cmd ? cmd : "", clean, cli_prog, cmd ? " " : "", cmd ? cmd : "");
	return EXIT_USAGE;
}

int cli_option_error(const char *cmd, int c, char *const argv[], const struct option *opts)
{
	const char *last = optind > 0 ? argv[optind - 1] : NULL, *next = last ? argv[optind] : NULL;
	char name[3] = { '-', (char)optopt, 0 };
	int is_short;

	/*
	 * getopt_long sets optopt to the character of a bad short option, but also to the val of a
	 * long option that lacks its value (or has one it does not take), so optopt alone does not
	 * tell them apart. A long option is always the last argument getopt consumed; a short one
	 * is in a cluster that is either that argument ("-qx", at its end) or, when the cluster
	 * goes on, the next one, which getopt is still reading.
	 */
	is_short = optopt > 0 && optopt <= 0x7f && last;
	if (is_short && !strncmp(last, "--", 2))
		is_short = next && next[0] == '-' && next[1] && next[1] != '-' && strchr(next + 1, optopt);
	if (c == ':')
		return cli_usage_error(cmd, "option '%s' needs a value", is_short ? name : last ? last : "?");
	if (!is_short && last && !strncmp(last, "--", 2) && opts) {
		/* getopt_long takes an unambiguous prefix; a prefix of several options lands here */
		size_t len = strcspn(last + 2, "=");
		char which[256] = "";
		const struct option *one = NULL;
		int n = 0;
		for (const struct option *op = opts; op->name; op++)
			if (len && !strncmp(op->name, last + 2, len) && strlen(which) + strlen(op->name) + 5 < sizeof(which)) {
				n++, strcat(strcat(which, n > 1 ? ", --" : "--"), op->name);
				one = op;
			}
		if (n > 1)
			return cli_usage_error(cmd, "ambiguous option '%.*s' (could be %s)", (int)len + 2, last, which);
		if (n == 1 && last[2 + len] == '=' && one->has_arg == no_argument)
			return cli_usage_error(cmd, "option '--%s' takes no value (got '%s')", one->name, last);
	}
	return cli_usage_error(cmd, "unknown option '%s'", is_short ? name : last ? last : "?");
}

/* The last runtime error printed, after "wsnorm: " and without the newline (for --json reports). */
static char last_error[4096];

const char *cli_last_error(void)
{
	return last_error;
}

/* The message as printed and kept: control bytes and invalid UTF-8 (from file names and file contents)
 * escaped, so neither the terminal nor --json sees them raw. */
static void keep_last(const char *msg)
{
	size_t n;

	wsn_text_escape(last_error, sizeof(last_error), msg);
	n = strlen(last_error);
	while (n && last_error[n - 1] == '\n')
		last_error[--n] = 0;
}

int cli_error(const char *fmt, ...)
{
	char msg[sizeof(last_error)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	keep_last(msg);
	fprintf(stderr, "%s: %s\n", cli_prog, last_error);
	return EXIT_RUNTIME;
}

/* Print "wsnorm: what: ERRNAME: detail" to stderr and keep it as cli_last_error(). Returns EXIT_RUNTIME. */
static int vfail(int err, const char *fmt, va_list ap)
{
	const char *detail = wsn_last_error();
	char *what = NULL, *msg = NULL;
	va_list copy;

	if (!detail || !detail[0])
		detail = wsn_strerror(err);
	va_copy(copy, ap);
	if (vasprintf(&what, fmt, ap) < 0) {
		what = NULL;
	} else {
		/* "plan: ...: EINVAL: plan: ..." says "plan:" once: the library's message loses the same prefix */
		const char *colon = strchr(what, ':');
		size_t n = colon ? (size_t)(colon - what) + 2 : 0;

		if (n > 2 && colon[1] == ' ' && !strncmp(detail, what, n) && detail[n])
			detail += n;
	}
	if (what && asprintf(&msg, "%s: %s: %s", what, wsn_err_name(err), detail) < 0)
		msg = NULL;
	if (msg) {
		keep_last(msg);
		fprintf(stderr, "%s: %s\n", cli_prog, last_error);
	} else { /* no memory for the copy: straight to stderr */
		fprintf(stderr, "%s: ", cli_prog);
		vfprintf(stderr, fmt, copy);
		fprintf(stderr, ": %s: %s\n", wsn_err_name(err), detail);
	}
	va_end(copy);
	free(what);
	free(msg);
	return EXIT_RUNTIME;
}

int cli_fail(int err, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vfail(err, fmt, ap);
	va_end(ap);
	return ret;
}

/* ---- what a second signal removes ---- */

#define CLEANUP_SLOTS (CLI_MAX_SHARDS + 64)
static char *_Atomic cleanup_slot[CLEANUP_SLOTS]; /* read by the handler */
static char cleanup_dir[CLEANUP_SLOTS];            /* set before the slot's path is published */
static char *cleanup_retired[CLEANUP_SLOTS];      /* dropped paths, freed when their slot is taken again */
static pthread_mutex_t cleanup_lock = PTHREAD_MUTEX_INITIALIZER;

int cli_cleanup_add(const char *path, int is_dir)
{
	char *copy = strdup(path);
	int slot = -1;

	if (!copy)
		return -1;
	pthread_mutex_lock(&cleanup_lock);
	for (int i = 0; i < CLEANUP_SLOTS && slot < 0; i++)
		if (!atomic_load(&cleanup_slot[i])) {
			free(cleanup_retired[i]); /* long out of any handler's reach */
			cleanup_retired[i] = NULL;
			cleanup_dir[i] = (char)(is_dir != 0);
			atomic_store(&cleanup_slot[i], copy);
			slot = i;
		}
	pthread_mutex_unlock(&cleanup_lock);
	if (slot < 0)
		free(copy);
	return slot;
}

void cli_cleanup_drop(int slot)
{
	if (slot < 0 || slot >= CLEANUP_SLOTS)
		return;
	pthread_mutex_lock(&cleanup_lock);
	/* not freed yet: a handler may be reading it this moment */
	cleanup_retired[slot] = atomic_exchange(&cleanup_slot[slot], NULL);
	pthread_mutex_unlock(&cleanup_lock);
}

/* The second signal: remove the files, then the directories (async-signal-safe calls only), and end
 * the process by the signal. */
static void cleanup_handler(int sig)
{
	struct sigaction dfl;
	sigset_t one;

	for (int pass = 0; pass < 2; pass++)
		for (int i = CLEANUP_SLOTS - 1; i >= 0; i--) {
			char *p = atomic_load(&cleanup_slot[i]);

			if (p && cleanup_dir[i] == pass)
				(void)(pass ? rmdir(p) : unlink(p));
		}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	raise(sig);
	_exit(128 + sig); /* not reached: the default action of sig ends the process */
}

void cli_cleanup_arm(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cleanup_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* One line on stderr: prefix, then the message with its control bytes escaped (file names and
 * contents may hold anything); a newline ending fmt is the line's own, not text to escape. */
static void escaped_line(const char *prefix, const char *fmt, va_list ap)
{
	char msg[2048], clean[4096];
	size_t len;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	len = strlen(msg);
	if (len && msg[len - 1] == '\n')
		msg[--len] = '\0';
	wsn_text_escape(clean, sizeof(clean), msg);
	fprintf(stderr, "%s%s\n", prefix, clean);
}

void cli_warn(const char *fmt, ...)
{
	char prefix[256];
	va_list ap;

	/* on a terminal, on a line of its own: a progress line may be showing (it is drawn again after) */
	snprintf(prefix, sizeof(prefix), "%s%s: ", isatty(STDERR_FILENO) ? "\r\033[K" : "", cli_prog);
	va_start(ap, fmt);
	escaped_line(prefix, fmt, ap);
	va_end(ap);
}

void cli_note(const char *fmt, ...)
{
	va_list ap;

	if (cli_verbose < 0)
		return;
	va_start(ap, fmt);
	escaped_line("", fmt, ap);
	va_end(ap);
}

/*
 * The multiplier of a size suffix, exactly as wsnorm(1) lists them: K, M or G alone or followed
 * by i, iB or B, all powers of 1024; "" is 1. 0, or -1 for anything else.
 */
static int parse_suffix(const char *end, uint64_t *mult)
{
	static const char *const tails[] = { "", "i", "iB", "B" };
	const char *units = "KMG", *lower = "kmg", *u;
	int shift;

	*mult = 1;
	if (!*end)
		return 0;
	if ((u = strchr(units, *end)))
		shift = (int)(u - units + 1) * 10;
	else if ((u = strchr(lower, *end)))
		shift = (int)(u - lower + 1) * 10;
	else
		return -1;
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		if (!strcmp(end + 1, tails[i])) {
			*mult = 1ull << shift;
			return 0;
		}
	}
	return -1;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int cli_parse_u64(const char *s, uint64_t *out)
{
	int base = 10;
	char *end;
	unsigned long long v;

	if (!s)
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		if (!s[2] || strspn(s + 2, "0123456789abcdefABCDEF") != strlen(s + 2))
			return -1;
	} else if (!*s || strspn(s, "0123456789") != strlen(s)) {
		return -1;
	}
	/* only digits are left, so strtoull sees no sign, space or prefix of its own */
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;
	uint64_t mult;

	/* decimal digits first: no sign, no space (strtoll would take both) */
	if (!s || !is_digit(s[0]))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || parse_suffix(end, &mult))
		return -1;
	if (mult > 1 && v > (long long)(INT64_MAX / (int64_t)mult))
		return -1;
	v *= (long long)mult;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static const struct {
	const char *option;
	int min, max, step; /* step: a multiple of it; -1: a power of two */
	const char *expect;
} kparams[CLI_KP_COUNT] = {
	[CLI_KP_BLOCK_THREADS] = { "--block-threads", 32, 1024, 32, "a multiple of 32 up to 1024" },
	[CLI_KP_GROUPS] = { "--groups", 1, 32, 1, "1..32" },
	[CLI_KP_UNROLL] = { "--unroll", 1, 8, 1, "1..8" },
	[CLI_KP_STAGES] = { "--stages", 1, 32, 1, "1..32" },
	[CLI_KP_CLUSTER] = { "--cluster", 1, 8, -1, "1, 2, 4 or 8" },
};

int cli_parse_kparam(const char *cmd, int k, const char *s, int force[CLI_KP_COUNT])
{
	int64_t v;

	if (cli_parse_count(s, kparams[k].min, kparams[k].max, &v) ||
	    (kparams[k].step > 0 ? v % kparams[k].step : v & (v - 1)))
		return cli_usage_error(cmd, "bad %s '%s' (expected %s)", kparams[k].option, s, kparams[k].expect);
	force[k] = (int)v;
	return 0;
}

const char *cli_kparam_forced(const int force[CLI_KP_COUNT])
{
	for (int k = 0; k < CLI_KP_COUNT; k++)
		if (force[k])
			return kparams[k].option;
	return NULL;
}

int cli_kparam_gpu_only(const char *cmd, const char *spec, const struct wsn_device_info *di,
			const int force[CLI_KP_COUNT], int arch)
{
	const char *opt = cli_kparam_forced(force);

	if (di->exec_mem != WSN_MEM_HOST || (!opt && !arch))
		return 0;
	return cli_usage_error(cmd, "%s %s, but the CPU device%s has no GPU kernels", opt ? opt : "--arch",
			       opt ? "forces a GPU kernel parameter" : "picks a GPU target",
			       strcmp(spec, "auto") ? "" : " (--device auto found no GPU)");
}

void cli_kparam_apply(const int force[CLI_KP_COUNT], struct wsn_plan_options *po)
{
	po->block_threads = force[CLI_KP_BLOCK_THREADS];
	po->groups = force[CLI_KP_GROUPS];
	po->unroll = force[CLI_KP_UNROLL];
	po->stages = force[CLI_KP_STAGES];
	po->cluster = force[CLI_KP_CLUSTER];
}

int cli_parse_size(const char *s, uint64_t *out)
{
	int64_t v;

	if (cli_parse_i64(s, 1, INT64_MAX, &v))
		return -1;
	*out = (uint64_t)v;
	return 0;
}

/*
 * Length of the decimal number s starts with: digits with at most one point (90, 1.5, .5), then, with
 * exp, an optional exponent e or E, a sign and digits. No sign, space, hex, inf or nan. 0 if none.
 */
static size_t decimal_len(const char *s, int exp)
{
	size_t n = strspn(s, "0123456789"), e;

	if (s[n] == '.')
		n += 1 + strspn(s + n + 1, "0123456789");
	if (!n || (n == 1 && s[0] == '.'))
		return 0;
	if (exp && (s[n] == 'e' || s[n] == 'E')) {
		e = n + 1 + (s[n + 1] == '+' || s[n + 1] == '-');
		if (!is_digit(s[e]))
			return 0;
		n = e + strspn(s + e, "0123456789");
	}
	return n;
}

int cli_parse_f32(const char *s, double max, float *out)
{
	size_t n;
	double v;

	if (!s || !(n = decimal_len(s, 1)) || s[n])
		return -1;
	errno = 0;
	v = strtod(s, NULL);
	/* the range is checked before the value is rounded to a float: 1.00000001 is above 1 */
	if (errno || !isfinite(v) || v > max || v > FLT_MAX)
		return -1;
	*out = (float)v;
	return 0;
}

int cli_parse_eps(const char *s, float *out)
{
	return cli_parse_f32(s, 1, out) || !(*out > 0) ? -1 : 0;
}

int cli_parse_count(const char *s, int64_t min, int64_t max, int64_t *out)
{
	if (!s || s[strspn(s, "0123456789")])
		return -1;
	return cli_parse_i64(s, min, max, out);
}

int cli_list_has_empty(const char *list)
{
	size_t n = strlen(list);

	return !n || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,");
}

int cli_parse_i64_list(const char *s, int64_t min, int64_t max, int64_t *out, int max_n)
{
	char buf[1024], *save = NULL, *tok;
	int n = 0;

	if (!s || strlen(s) >= sizeof(buf) || cli_list_has_empty(s))
		return -1;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n >= max_n || cli_parse_i64(tok, min, max, &out[n]))
			return -1;
		n++;
	}
	return n ? n : -1;
}

int cli_parse_arch(const char *s)
{
	if (!s)
		return -1;
	if (!strcmp(s, "sm_90a") || !strcmp(s, "sm_90") || !strcmp(s, "90"))
		return 90;
	if (!strcmp(s, "sm_100a") || !strcmp(s, "sm_100") || !strcmp(s, "100"))
		return 100;
	return -1;
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cli_rate(double bytes, double seconds, char *buf, size_t len)
{
	if (seconds <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f GB/s", bytes / seconds / 1e9);
	return buf;
}

void cli_progress_start(struct cli_progress *p)
{
	p->start = cli_now();
	p->active = isatty(STDERR_FILENO) && cli_verbose >= 0;
	p->shown = 0;
}

void cli_progress_update(struct cli_progress *p, const char *fmt, ...)
{
	va_list ap;

	if (!p->active || cli_now() - p->start < 1.0)
		return;
	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	p->shown = 1;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = 0;
}

void cli_json_print(json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));

	if (s) {
		puts(s);
		free(s);
	}
	json_decref(v);
}

int cli_open_device(const char *cmd, const char *spec, int threads, struct wsn_device **out)
{
	int err = wsn_device_open(spec, out);

	if (err < 0)
		return cli_fail(err, "%s: cannot open device '%s'", cmd, spec);
	if (threads > 0 && (err = wsn_device_set_threads(*out, threads)) < 0) {
		wsn_device_close(*out);
		*out = NULL;
		return cli_fail(err, "%s: cannot set %d threads", cmd, threads);
	}
	return 0;
}

int cli_parse_duration(const char *s, double *seconds)
{
	char *end;
	double v, mult = 1;
	size_t digits;

	if (!s)
		return -1;
	/* a decimal number without an exponent, then s, m or h */
	if (!(digits = decimal_len(s, 0)))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end != s + digits)
		return -1;
	if (!strcmp(end, "m"))
		mult = 60;
	else if (!strcmp(end, "h"))
		mult = 3600;
	else if (*end && strcmp(end, "s"))
		return -1;
	v *= mult;
	if (!isfinite(v) || !(v > 0) || v > 1e9)
		return -1;
	*seconds = v;
	return 0;
}

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

float cli_median(float *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_f);
	return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* n back-to-back device-to-device copies of bytes from src to dst on s, timed by events e0/e1 (*ms per copy). */
static int timed_copy(struct wsn_device *dev, struct wsn_stream *s, struct wsn_event *e0, struct wsn_event *e1,
		      void *dst, const void *src, uint64_t bytes, int n, float *ms)
{
	int err;

	*ms = 0;
	if ((err = wsn_event_record(e0, s)) < 0)
		return err;
	for (int i = 0; i < n; i++)
		if ((err = wsn_memcpy(dev, dst, src, bytes, WSN_COPY_D2D, s)) < 0)
			return err;
	if ((err = wsn_event_record(e1, s)) < 0 || (err = wsn_event_sync(e1)) < 0 ||
	    (err = wsn_event_elapsed(e0, e1, ms)) < 0)
		return err;
	*ms /= (float)n;
	return 0;
}

int cli_copy_bandwidth(struct wsn_device *dev, struct wsn_stream *s, uint64_t bytes, int iters, double *out)
{
	struct wsn_event *e0 = NULL, *e1 = NULL;
	void *a = NULL, *b = NULL;
	float *ms = iters > 0 ? calloc((size_t)iters, sizeof(float)) : NULL, m = 0;
	int err = ms ? 0 : WSN_ENOMEM, n = 1;

	if (!err)
		err = wsn_event_create(dev, &e0);
	if (!err)
		err = wsn_event_create(dev, &e1);
	if (!err)
		err = wsn_mem_alloc(dev, bytes, &a);
	if (!err)
		err = wsn_mem_alloc(dev, bytes, &b);
	if (!err)
		err = wsn_mem_set(dev, a, 0x5a, bytes, s);
	/* warm-up: at least 100 ms of copies, so the clocks are up when the timing starts */
	for (float warm = 0; !err && warm < 100.0f; warm += m > 0.01f ? m : 0.01f)
		err = timed_copy(dev, s, e0, e1, b, a, bytes, 1, &m);
	/* copies per batch: at least CLI_BATCH_MS of them (the first one's submission is not counted) */
	if (m > 0 && m < CLI_BATCH_MS) {
		double c = ceil(CLI_BATCH_MS / m);
		n = c < 1000 ? (int)c : 1000;
	}
	for (int i = 0; i < iters && !err; i++)
		err = timed_copy(dev, s, e0, e1, b, a, bytes, n, &ms[i]);
	if (!err) {
		float med = cli_median(ms, iters);
		*out = med > 0 ? 2.0 * (double)bytes / (med * 1e-3) : 0;
	}
	if (a)
		wsn_mem_free(dev, a);
	if (b)
		wsn_mem_free(dev, b);
	wsn_event_destroy(e0);
	wsn_event_destroy(e1);
	free(ms);
	return err;
}

int cli_xfer_bandwidth(struct wsn_device *dev, struct wsn_stream *s, void *const *host, int nhost, void *dbuf,
		       uint64_t bytes, enum wsn_copy_kind kind, int iters, double *out)
{
	struct wsn_event *e0 = NULL, *e1 = NULL;
	float ms = 0;
	int err;

	if (nhost < 1 || iters < 1 || (kind != WSN_COPY_H2D && kind != WSN_COPY_D2H))
		return WSN_EINVAL;
	if ((err = wsn_event_create(dev, &e0)) < 0 || (err = wsn_event_create(dev, &e1)) < 0)
		goto out;
	for (int i = -2; i < iters && !err; i++) {
		void *h = host[(i + 2) % nhost];

		if (i == 0 && (err = wsn_event_record(e0, s)) < 0)
			break;
		err = kind == WSN_COPY_H2D ? wsn_memcpy(dev, dbuf, h, bytes, kind, s) :
					     wsn_memcpy(dev, h, dbuf, bytes, kind, s);
	}
	if (!err && (err = wsn_event_record(e1, s)) == 0 && (err = wsn_event_sync(e1)) == 0 &&
	    (err = wsn_event_elapsed(e0, e1, &ms)) == 0)
		*out = ms > 0 ? (double)bytes * iters / (ms * 1e-3) : 0;
out:
	wsn_event_destroy(e0);
	wsn_event_destroy(e1);
	return err;
}

void cli_op_io(enum wsn_op op, struct cli_op_io *io)
{
	memset(io, 0, sizeof(*io));
	io->mean = wsn_op_is_layernorm(op);
	io->dy = io->stats_in = wsn_op_is_backward(op);
	io->fwd = io->mean ? WSN_LAYERNORM_FWD : WSN_RMSNORM_FWD;
}

uint64_t cli_tensor_seed(uint64_t seed, int shard, char tag)
{
	return seed * 0x9e3779b97f4a7c15ull + (uint64_t)shard * 0x100000001b3ull + (uint64_t)(unsigned char)tag;
}

json_t *cli_json_text(const char *s)
{
	size_t cap = strlen(s) * 4 + 1;
	char *t;
	json_t *j;

	if ((j = json_string(s))) /* valid UTF-8: as it is (JSON escapes control characters itself) */
		return j;
	if (!(t = malloc(cap)))
		return NULL;
	wsn_text_escape(t, cap, s);
	j = json_string(t);
	free(t);
	return j;
}
