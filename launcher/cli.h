/* SPDX-License-Identifier: MIT */
/* launcher/cli.h: what the wsnorm subcommands share: exit codes, option parsing, output. */
#ifndef WSN_CLI_H
#define WSN_CLI_H

#include "config.h"

#include <getopt.h>
#include <sys/stat.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "wsnorm.h"

/* Exit status of every subcommand. */
enum {
	EXIT_PASS = 0,    /* success; verification passed */
	EXIT_MISMATCH = 1, /* verification mismatch (or a threshold missed) */
	EXIT_USAGE = 2,   /* bad command line */
	EXIT_RUNTIME = 3, /* runtime error: bad input file, driver error, I/O error */
};

/* Defaults shown in help text come from these. */
#define CLI_DEFAULT_SEED 1
#define CLI_DEFAULT_VERIFY_ROWS 64
#define CLI_DEFAULT_BENCH_ITERS 50
#define CLI_DEFAULT_BENCH_WARMUP 5
#define CLI_DEFAULT_BENCH_ROWS 16384
#define CLI_DEFAULT_BENCH_HIDDEN "1024,2048,4096,8192,16384,32768"
#define CLI_DEFAULT_BENCH_OPS "layernorm-fwd,layernorm-bwd,rmsnorm-fwd,rmsnorm-bwd"
/* A timed batch of GPU work (bench's kernels, the copy bandwidth) runs at least this many ms, so
 * the host's time to submit its first launch to an idle GPU is a negligible part of it. */
#define CLI_BATCH_MS 2.0

extern const char *cli_prog; /* "wsnorm" */
extern int cli_verbose;     /* -v count; -1 for -q */

/*
 * Standard output through a stream that keeps the errno of its first failed write (stdio keeps only
 * that one failed), so that the error reported at exit is the real one. Called once, before any
 * output; cli_stdout_error() is that errno, or 0.
 */
void cli_stdout_open(void);
int cli_stdout_error(void);

/*
 * Can a file be made at path, which stat() said is not there (stat_errno: its errno)? Not when its
 * name is longer than a directory entry holds (NAME_MAX), or its directory is missing, is not a
 * directory or takes no new files (unless dir_made_later: the command makes it, checked on its own);
 * any stat error other than ENOENT is named as it is. 0, or a negative errno with msg set to
 * "cannot write 'path': ERRNAME: why".
 */
int cli_check_new_file(const char *path, int stat_errno, int dir_made_later, char *msg, size_t len);

/*
 * Can the existing regular file path (stat st) be replaced by a new file? Its directory must take
 * changes (EACCES, EROFS) and, if sticky (mode 1777, as /tmp), allow this process to replace it: not
 * when neither the file nor the directory is ours and the process lacks CAP_FOWNER (EPERM), for the
 * kernel then refuses the rename over it and the unlink of any link made to it. 0, or a negative errno with msg set to "cannot replace 'path': ERRNAME: why".
 */
int cli_check_replace(const char *path, const struct stat *st, char *msg, size_t len);

/* Subcommands: argc/argv start at the subcommand name. */
int cmd_devices(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_emit(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Print "wsnorm <cmd>: message" and a usage hint to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A getopt_long error, from the option loop's `case ':'` (c == ':': "option 'NAME' needs a
 * value") and `default:` ("unknown option 'NAME'", or "ambiguous option 'NAME' (could be --a,
 * --b)" when NAME abbreviates several of the long options opts), with optstring "+:h" and
 * opterr = 0. NAME is "-X" for a short option (also inside a cluster such as "-qx") and the
 * argument as given for a long one ("--rows", "--bogus"). Returns cli_usage_error()'s EXIT_USAGE.
 */
int cli_option_error(const char *cmd, int c, char *const argv[], const struct option *opts);
/* Print "wsnorm: message" (a runtime error; one trailing newline is added, not needed) to stderr and keep
 * it as cli_last_error(); returns EXIT_RUNTIME. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The message of the last cli_error() or cli_fail*(), as printed after "wsnorm: "; "" if none. */
const char *cli_last_error(void);
/* Print "wsnorm: what: ERRNAME: detail" to stderr and keep it as cli_last_error(); returns EXIT_RUNTIME. */
int cli_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Informational line to stderr unless -q. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * What a second signal removes before it ends the process: temporary output files, the demo's
 * inputs, directories a run made. add returns a slot (or -1 when none is free: the path is then just
 * not removed), drop gives it up once the path is renamed or removed; directories go after files.
 * cli_cleanup_arm(sig) makes the next sig do it (from a handler, then end the process by sig).
 */
int cli_cleanup_add(const char *path, int is_dir);
void cli_cleanup_drop(int slot);
void cli_cleanup_arm(int sig);
/* "wsnorm: <message>" on stderr, escaped like errors; shown under -q too (not kept as cli_last_error). */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Parsers: 0 on success, -1 on a malformed value (the caller reports a usage error).
 * cli_parse_i64 and cli_parse_size take decimal digits (no sign, no space) and an optional
 * suffix K, M or G, alone or followed by i, iB or B (KiB, KB: all x1024), as wsnorm(1) lists;
 * cli_parse_u64 takes decimal digits, or 0x or 0X and hexadecimal digits, up to 2^64 - 1.
 */
int cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int cli_parse_size(const char *s, uint64_t *out); /* bytes, at least 1 */
/* counts (threads, iterations, ...): decimal digits alone, no suffix */
int cli_parse_count(const char *s, int64_t min, int64_t max, int64_t *out);
/* a decimal number (1e-5, 0.5, 12): no sign, space, hex, inf or nan; at most max, checked before rounding */
int cli_parse_f32(const char *s, double max, float *out);
/* an epsilon: such a number with 0 < eps <= 1 */
int cli_parse_eps(const char *s, float *out);
int cli_parse_u64(const char *s, uint64_t *out);
/* Comma-separated list of integers (with suffixes), no empty entry; returns count or -1. */
int cli_parse_i64_list(const char *s, int64_t min, int64_t max, int64_t *out, int max_n);
/* Parse "sm_90a"/"sm_100a"/"90"/"100" into 90/100; -1 on error. */
int cli_parse_arch(const char *s);
/* A JSON string of text that may hold anything (a file name): the text itself where it is valid UTF-8
 * (a path a script can open; JSON escapes its control characters), else escaped as wsn_text_escape()
 * does, where json_string() would refuse it. */
json_t *cli_json_text(const char *s);
/* Whether a comma-separated list is empty or has an empty entry ("a,,b", ",a", "a,"). */
int cli_list_has_empty(const char *list);

/*
 * The GPU kernel parameters plan, emit and bench can force (--block-threads, --groups, --unroll,
 * --stages, --cluster); force[k] == 0 leaves parameter k to the planner. Their long options take
 * the getopt vals CLI_OPT_KPARAM + k, which are no characters.
 */
enum { CLI_KP_BLOCK_THREADS, CLI_KP_GROUPS, CLI_KP_UNROLL, CLI_KP_STAGES, CLI_KP_CLUSTER, CLI_KP_COUNT };
#define CLI_OPT_KPARAM 0x100
#define CLI_KPARAM_OPTIONS                                                                   \
	{ "block-threads", required_argument, NULL, CLI_OPT_KPARAM + CLI_KP_BLOCK_THREADS }, \
	{ "groups", required_argument, NULL, CLI_OPT_KPARAM + CLI_KP_GROUPS },               \
	{ "unroll", required_argument, NULL, CLI_OPT_KPARAM + CLI_KP_UNROLL },               \
	{ "stages", required_argument, NULL, CLI_OPT_KPARAM + CLI_KP_STAGES },               \
	{ "cluster", required_argument, NULL, CLI_OPT_KPARAM + CLI_KP_CLUSTER }
/* The switch cases of those options (the last one without its colon). */
#define CLI_KPARAM_CASES                                                                 \
	case CLI_OPT_KPARAM + CLI_KP_BLOCK_THREADS: case CLI_OPT_KPARAM + CLI_KP_GROUPS: \
	case CLI_OPT_KPARAM + CLI_KP_UNROLL: case CLI_OPT_KPARAM + CLI_KP_STAGES:        \
	case CLI_OPT_KPARAM + CLI_KP_CLUSTER
/*
 * Parse the value of forced parameter k into force[k], within the range wsnorm(1) documents for
 * it (--block-threads a multiple of 32 up to 1024, --groups 1..32, --unroll 1..8, --stages 1..32,
 * --cluster 1, 2, 4 or 8). Returns 0, or reports "bad --NAME 'S' (expected ...)" as a usage error
 * of cmd and returns EXIT_USAGE.
 */
int cli_parse_kparam(const char *cmd, int k, const char *s, int force[CLI_KP_COUNT]);
/* The option of the first forced parameter ("--groups"), or NULL when none is forced. */
const char *cli_kparam_forced(const int force[CLI_KP_COUNT]);
/*
 * On the CPU device (di, opened from spec), which has no GPU kernels, forcing one of their parameters
 * or a GPU target (arch != 0) is a usage error of cmd naming the option; 0 elsewhere or when nothing
 * is forced, else EXIT_USAGE.
 */
int cli_kparam_gpu_only(const char *cmd, const char *spec, const struct wsn_device_info *di,
			const int force[CLI_KP_COUNT], int arch);
/* Copy the forced parameters into the plan options (0: the planner's choice). */
void cli_kparam_apply(const int force[CLI_KP_COUNT], struct wsn_plan_options *po);

/* Seconds, monotonic. */
double cli_now(void);
/* Human byte rate: "12.3 GB/s". */
const char *cli_rate(double bytes, double seconds, char *buf, size_t len);

/* A progress line on stderr, shown only when stderr is a terminal and the run is past 1 s. */
struct cli_progress {
	double start;
	int active;
	int shown;
};
void cli_progress_start(struct cli_progress *p);
void cli_progress_update(struct cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_progress_end(struct cli_progress *p);

/* Print a JSON value to stdout, indented, with a newline. Takes the reference. */
void cli_json_print(json_t *v);
/* JSON number that stays valid for inf/nan (null). */
static inline json_t *cli_json_real(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* Open a device for command cmd, reporting failures ("wsnorm: cmd: cannot open device ..."); 0 or EXIT_RUNTIME. */
int cli_open_device(const char *cmd, const char *spec, int threads, struct wsn_device **out);

/* Parse a duration: a positive number of seconds with an optional s, m or h suffix. 0 or -1. */
int cli_parse_duration(const char *s, double *seconds);
/* Median of n floats (sorts v). */
float cli_median(float *v, int n);
/*
 * Device-to-device copy bandwidth in bytes/s, counting bytes read plus written: the median over
 * iters batches of back-to-back copies of `bytes` between two device buffers (as many per batch
 * as run CLI_BATCH_MS), timed with events on stream s after at least 100 ms of warm-up copies.
 * This is the roofline kernels are compared with. Returns 0 or a WSN_E* code.
 */
int cli_copy_bandwidth(struct wsn_device *dev, struct wsn_stream *s, uint64_t bytes, int iters, double *out);
/*
 * Host<->device copy bandwidth in bytes/s: iters copies of `bytes` (kind WSN_COPY_H2D or
 * WSN_COPY_D2H) between the pinned host buffers host[0..nhost) in turn and the device buffer
 * dbuf, queued back to back on stream s after two warm-up copies and timed with events as one
 * span. Returns 0 or a WSN_E* code.
 */
int cli_xfer_bandwidth(struct wsn_device *dev, struct wsn_stream *s, void *const *host, int nhost, void *dbuf,
		       uint64_t bytes, enum wsn_copy_kind kind, int iters, double *out);

/* Which named tensors an op reads and writes in files (PyTorch names). */
struct cli_op_io {
	bool dy;        /* reads dy */
	bool stats_in;  /* reads rstd (and mean for LayerNorm) */
	bool mean;      /* the op has a mean (LayerNorm) */
	enum wsn_op fwd; /* the forward op that produces its stats */
};
void cli_op_io(enum wsn_op op, struct cli_op_io *io);

/* Seed of tensor `tag` of shard `shard` for base seed `seed`. */
uint64_t cli_tensor_seed(uint64_t seed, int shard, char tag);

#define CLI_MAX_SHARDS 4096
#define CLI_MAX_THREADS 1024
#define CLI_MAX_HIDDEN (1 << 24)
#define CLI_MAX_ROWS (1LL << 40)

/* Write one generated input file (see `wsnorm gen`); used by `run --demo`. Returns 0 or EXIT_RUNTIME. */
int cli_gen_file(enum wsn_op op, enum wsn_dtype dt, int64_t rows, int64_t hidden, uint64_t seed,
		 const char *path);

#endif
