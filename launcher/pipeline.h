/* SPDX-License-Identifier: MIT */
/* launcher/pipeline.h: the `wsnorm run` pipeline: dataset, per-device stage threads, outputs, measurements.
 * Implemented by shape.c, dataset.c, devices.c, verify.c, output.c and run.c; the ring of slots and
 * its stage threads are private to ring.h. */
#ifndef WSN_PIPELINE_H
#define WSN_PIPELINE_H

#include "cli.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

/* Defaults shown in help text come from these. */
#define PL_DEFAULT_RING 4
#define PL_MAX_RING 64
#define PL_DEFAULT_BATCH_BYTES (64ull << 20) /* of x per batch, when --batch-rows is not given */
#define PL_DEFAULT_VERIFY_EVERY 1
#define PL_DEFAULT_KERNEL_LOOPS 1
#define PL_DEFAULT_COPY_GPU (1ull << 30)
#define PL_DEFAULT_COPY_CPU (64ull << 20)
#define PL_COPY_ITERS 10
#define PL_MAX_DEVICES 64
#define PL_ERRLEN 1024

/* Input tensors of a batch, in file order of preference, and output tensors. */
enum { PL_IN_X, PL_IN_DY, PL_IN_W, PL_IN_B, PL_IN_MEAN, PL_IN_RSTD, PL_NIN };
enum { PL_OUT_Y, PL_OUT_DX, PL_OUT_DW, PL_OUT_DB, PL_OUT_MEAN, PL_OUT_RSTD, PL_NOUT };
extern const char *const pl_in_names[PL_NIN];
extern const char *const pl_out_names[PL_NOUT];

/* Stages, in pipeline order. */
enum { ST_READ, ST_H2D, ST_KERNEL, ST_D2H, ST_VERIFY, ST_WRITE, ST_N };
extern const char *const pl_stage_names[ST_N];

/* What the op reads and writes, and the bytes of each tensor. */
struct pl_shape {
	enum wsn_op op;
	enum wsn_dtype dt;
	int64_t hidden;
	int has_weight, has_bias;
	float eps;
	bool in[PL_NIN], out[PL_NOUT];
	bool in_row[PL_NIN], out_row[PL_NOUT]; /* one slice per row (else a whole [hidden] vector) */
	size_t in_unit[PL_NIN], out_unit[PL_NOUT]; /* bytes per row, or of the whole vector */
};
void pl_shape_init(struct pl_shape *sh, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int has_weight,
		   int has_bias, float eps);
/* Bytes of input (output) tensor i for a batch of rows. */
size_t pl_in_bytes(const struct pl_shape *sh, int i, int64_t rows);
size_t pl_out_bytes(const struct pl_shape *sh, int i, int64_t rows);

/* Options of one run. */
struct pl_config {
	int64_t batch_rows;       /* rows per batch (the last batch of a shard may be shorter) */
	int ring;                 /* slots in each device's ring of pinned buffers */
	int kernel_loops;         /* kernel launches per device-resident batch */
	int64_t verify_rows;      /* rows sampled per verified batch; 0: none */
	int64_t verify_every;     /* verify batches whose sequence number is a multiple of this */
	uint64_t iterations;      /* passes over the dataset; 0: unlimited (with duration) */
	double duration;          /* seconds; 0: none */
	struct wsn_reader_options rd;
	enum wsn_approach approach;
	int autotune;             /* plans time the GPU kernel families once and cache the winner */
	int threads;
	uint64_t copy_bytes;      /* copy-roofline buffer; 0: the device's default */
	int standalone;           /* measure each stage alone before the pipeline */
	int read_only;            /* the read stage alone over the dataset */
	int inject_mismatch;      /* corrupt an output element of each verified batch */
	int inject_fault;         /* device index whose first kernel launch fails; -1: none */
	double inject_slow;       /* > 1: each batch's device work is made this many times as long */
	const char *output;       /* NULL: no outputs */
	int output_dir;           /* output is a directory of per-shard files */
};

/* Are outputs checked against the CPU reference at all (some batches, per verify_every)? */
static inline int pl_verifies(const struct pl_config *cfg)
{
	return cfg->verify_rows > 0 && !cfg->read_only;
}

/* A shard's output file, written under a temporary name (see output.c). */
struct pl_out;

/* One input file. Opened when the pipeline first reaches it. */
struct pl_shard {
	char *path;
	dev_t dev;                /* the file's identity when listed (0, 0: not known), so that an */
	ino_t ino;                /* output is never written over an input */
	struct wsn_st_file *st;   /* NULL for raw input */
	struct stat id;           /* the file as opened (taken before its header is read): every batch's
				   * reads must come from this one */
	int have_id;
	int opened;
	int64_t rows;
	uint64_t off[PL_NIN];     /* absolute file offsets of the input tensors */
	int64_t nbatches;         /* batches per pass */
	struct pl_out *out;       /* its output file, when outputs are written */
};

/* One batch: rows [row0, row0 + rows) of a shard, in pass `pass`; seq counts batches over the run. */
struct pl_batch {
	int shard;
	int64_t row0, rows;
	uint64_t pass, seq;
};

/* The dataset, shared by every device's reader: a cursor under a lock. */
struct pl_dataset {
	pthread_mutex_t lock;
	struct pl_shard *shards;
	int n;
	int raw;                  /* raw files (x only) with a fixed shape */
	int from_dir;             /* the input named a directory (its outputs go to a directory too) */
	int op_given, eps_given;  /* --op, --eps: the files' wsnorm.op, wsnorm.eps metadata is not read */
	struct pl_shape shape;
	const struct pl_config *cfg;
	/* the cursor */
	int cur;
	int64_t cur_row;
	uint64_t pass, seq;
	int exhausted;
	double deadline;          /* monotonic seconds; 0: none */
	/* a stop for every device: an interrupt, a bad shard, a failed output write */
	atomic_int stop;
	atomic_int interrupted;
	int err;                  /* the dataset error (a WSN_E* code), 0 if none */
	char errmsg[PL_ERRLEN];
	char outdir_created;      /* the output directory was made by this run */
	int outdir_cleanup;       /* its cli_cleanup slot + 1 (a second signal removes it if empty); 0: none */
};

/* Is the run's --duration over? The caller holds ds->lock (the deadline is set under it). */
static inline int pl_past_deadline(const struct pl_dataset *ds)
{
	return ds->deadline > 0 && cli_now() >= ds->deadline;
}

/* Latency histogram: log-spaced buckets from 100 ns to 10^4 s, 100 per decade. */
#define PL_HIST_MIN_LOG10 (-7)
#define PL_HIST_PER_DECADE 100
#define PL_HIST_BUCKETS (11 * PL_HIST_PER_DECADE)
struct pl_hist {
	uint64_t n;
	uint64_t b[PL_HIST_BUCKETS];
};
void pl_hist_add(struct pl_hist *h, double seconds);
/* n samples of the same value. */
void pl_hist_add_n(struct pl_hist *h, double seconds, uint64_t n);
void pl_hist_merge(struct pl_hist *into, const struct pl_hist *h);
/* The q-quantile (0..1) in seconds; 0 when empty. */
double pl_hist_quantile(const struct pl_hist *h, double q);

/* One stage's measurements. */
struct pl_stage {
	double bytes;     /* bytes the stage moved (kernel: the fewest bytes the op must move, per launch) */
	double busy;      /* seconds the stage worked (device stages: event time) */
	int64_t batches, rows;
	struct pl_hist lat; /* per batch (kernel: per launch) */
	double alone_rows_s, alone_gbs; /* measured alone (--standalone); 0: not measured */
};

/* Worst verdict per checked tensor. */
struct pl_verdict {
	const char *name;
	double rel, max_abs, tol;
	int64_t nonfinite;
	int pass;
};

/* What one device's pipeline did. */
struct pl_devres {
	int index;
	char spec[32], name[128];
	int status;               /* EXIT_PASS, EXIT_MISMATCH or EXIT_RUNTIME */
	char errmsg[PL_ERRLEN];   /* the failure, when status is EXIT_RUNTIME */
	int host_mem;             /* the device executes on host memory: no copies */
	struct pl_stage st[ST_N];
	int64_t rows, batches, kernel_rows;
	double wall;              /* seconds from the start of the pipeline to its end */
	double copy_bps;          /* device-to-device copy bandwidth (read + write) */
	int64_t verified_batches, mismatched_batches, verified_rows;
	struct pl_verdict v[8];
	int nv;
	char first_mismatch[768];
	char ring_mode[64];
	struct wsn_read_stats rs;
	struct wsn_reader_buffer_stats bs;
	char plan[4096];
	/* progress, read while the pipeline runs */
	atomic_llong live_rows, live_read_bytes;
};

struct pl_dev;

/* A run over the dataset on one or more devices. */
struct pl_run {
	const struct pl_config *cfg;
	struct pl_dataset *ds;
	int ndev;
	struct pl_dev *devs;
	struct pl_devres *res;    /* one per device */
	int donefd;               /* eventfd: each device's thread adds 1 when it ends */
	/* the start barrier: the run begins when every device is set up or failed */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int ready, go;
	/* hold: the last arrival (or the set-up deadline) sets all_ready instead of starting the run,
	 * which then starts at pl_run_go (wsnorm-mpi: when every rank is ready) */
	int hold, all_ready;
	/* once a second while the run waits: the seconds since its start, then each device's rows so far */
	double *samples;
	int nsamples, sample_cap;
	struct timespec setup_deadline; /* CLOCK_MONOTONIC */
	double t_start, t_end;
};

/*
 * Dataset: expand the input (a file, a comma-separated list, or a directory of *.safetensors) into
 * shards. With raw_rows > 0 the files are raw x tensors of raw_rows x raw_hidden. Prints its errors.
 * Returns 0 or EXIT_RUNTIME.
 */
int pl_dataset_list(struct pl_dataset *ds, const char *input, int raw);
/*
 * Open shard i now (on the calling thread's reader r, NULL: a private one), checking it against the
 * dataset's shape (first: it sets the shape's hidden, dtype, weight and bias). On failure writes
 * the message to msg and returns a WSN_E* code.
 */
/* Record shard sh's identity (stat) before its header is read; -1 with msg set when it cannot be. */
int pl_shard_identify(struct pl_shard *sh, char *msg, size_t len);
int pl_shard_open(struct pl_dataset *ds, int i, struct wsn_reader *r, int first, char *msg, size_t len);
void pl_dataset_free(struct pl_dataset *ds);
/* Record the dataset's first failure and stop every device. */
void pl_dataset_fail(struct pl_dataset *ds, int err, const char *msg);
/* The next batch into b: 1, 0 when there are no more, or a WSN_E* code (recorded). */
int pl_next_batch(struct pl_dataset *ds, struct wsn_reader *r, struct pl_batch *b);
/* Up to n batches of the first pass, for the stages measured alone; the count or an error. */
int pl_first_batches(struct pl_dataset *ds, struct wsn_reader *r, struct pl_batch *out, int n);
/* "what: ENAME: detail" with the library's last error of this thread, into buf. */
void pl_errf(char *buf, size_t len, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Rows of a [..., hidden] safetensors entry: the product of its dimensions but the last (0 when one is
 * 0; -1 when the product overflows). */
int64_t pl_entry_rows(const struct wsn_st_entry *e);

/* Relative-error (rel_l2) tolerance for outputs of dtype dt against the CPU reference; f32 statistics
 * (mean, rstd) take pl_tolerance(WSN_F32) whatever the data's dtype. */
double pl_tolerance(enum wsn_dtype dt);
/* The n rows of rows that verification compares: evenly spaced, the first and the last included. */
void pl_sample_rows(int64_t rows, int n, int64_t *idx);
/* Copy rows idx[0..n) of rows of row_bytes each from the host matrix src into dst. */
void pl_gather(void *dst, const void *src, const int64_t *idx, int n, size_t row_bytes);

/* Outputs (output.c). */
/* Before the run: may every shard's output path (cfg->output, or a file named as its input under it when
 * cfg->output_dir) take its outputs? 0, or a WSN_E* code with msg naming the path and why not. */
int pl_out_check(const struct pl_dataset *ds, const struct pl_config *cfg, char *msg, size_t len);
/* Create shard i's temporary output file. Returns 0 or a WSN_E* code with msg set. */
int pl_out_create(struct pl_dataset *ds, int i, char *msg, size_t len);
/* Whether directory dir holds a shard PREFIX-I-of-K.safetensors of another count than k (its name in found). */
int pl_shard_stale(const char *dir, const char *prefix, long k, char *found, size_t len);
/* Commit (sync and rename) every output when commit and all are complete, else remove them all. */
int pl_out_finish(struct pl_dataset *ds, int commit, char *msg, size_t len);
/* Whether every shard's output is complete. */
int pl_out_complete(const struct pl_dataset *ds);

/* An io_uring ring for writes, one per writer thread. */
struct pl_writer;
int pl_writer_create(struct pl_writer **out, char *msg, size_t len);
void pl_writer_destroy(struct pl_writer *w);
/*
 * Write one batch's outputs (host pointers per output tensor) into its shard's file; the shard's
 * last batch also writes the summed dweight/dbias. Returns 0 or a WSN_E* code with msg set.
 */
int pl_out_write_batch(struct pl_dataset *ds, struct pl_writer *w, const struct pl_batch *b,
		       void *const host[PL_NOUT], char *msg, size_t len);

/* Devices: specs for --device/--devices. Prints its errors; returns the count or -EXIT_USAGE. */
int pl_devices_parse(const char *list, char specs[][32], int max);

/* Start one thread per device; returns 0 or EXIT_RUNTIME (nothing started). */
int pl_run_start(struct pl_run *run);
/* Wait for every device thread (after donefd counted them all, or a stop). */
void pl_run_join(struct pl_run *run);
/* Ask every device to stop taking batches (an interrupt). */
void pl_run_stop(struct pl_run *run, int interrupted);
/* Record a sample (pl_run.samples) of every device's rows now; 0, or -1 when out of memory (the
 * samples then stop). */
int pl_run_sample(struct pl_run *run);
/* Start a held run (pl_run.hold) now; nothing when it has started. */
void pl_run_go(struct pl_run *run);
/* Is a held run's every device set up (or failed, or past the set-up deadline)? */
int pl_run_all_ready(struct pl_run *run);
void pl_run_free(struct pl_run *run);

#endif
