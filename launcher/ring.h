/* SPDX-License-Identifier: MIT */
/* launcher/ring.h: one device's ring of slots and the stage threads that pass them on (private to the pipeline). */
#ifndef WSN_RING_H
#define WSN_RING_H

#include "pipeline.h"

#define SLACK 4096u  /* room before each input so a read can land aligned like its file offset */
#define DEV_ALIGN 256u

/*
 * The slot state machine. Batch k (a device-local sequence number) lives in slot k % ring, and
 * each slot goes round FREE -> READ -> SUBMITTED -> DONE -> VERIFIED -> FREE. One thread moves a
 * slot out of each state:
 *   FREE      -> READ       the reader (stages.c), once the batch's reads are in
 *   READ      -> SUBMITTED  the submit stage (stages.c): copies in, kernel(s), copies out queued
 *   SUBMITTED -> DONE       the complete stage (stages.c): the streams' events have fired
 *   DONE      -> VERIFIED   the verify stage (verify.c): sampled rows checked, or none to check
 *   VERIFIED  -> FREE       the write stage (stages.c): outputs written, rows counted
 * The four stages after the reader are each one pl_stage_loop. States change under d->mu, with a
 * broadcast on d->cv. With --read-only, submit and complete do no work; after a stop (ds->stop),
 * verify and write skip their work, but slots keep moving until the reader runs dry.
 * A stage ends when batch k will never come (the reader is done and read fewer than k + 1
 * batches) or on abort. A stage error calls pl_dev_fail, which records the device's first
 * failure and sets d->abort: every stage wakes and ends, leaving its slot where it is. A write
 * error is the dataset's (pl_dataset_fail) and does not abort the device.
 */
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
	int loops;                  /* kernel launches queued for the batch (fewer than asked after a stop) */
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

/* ring.c: the slots, their states and the kernel arguments over them. */
void pl_dev_fail(struct pl_dev *d, const char *msg);
bool pl_wait_slot(struct pl_dev *d, int64_t k, int want);
unsigned char *pl_host_in(const struct pl_dev *d, const struct pl_slot *sl, int i);
void *pl_dev_in(const struct pl_dev *d, const struct pl_slot *sl, int i);
void *pl_dev_out(const struct pl_dev *d, const struct pl_slot *sl, int i);
void pl_make_args(const struct pl_shape *sh, void *const in[PL_NIN], void *const out[PL_NOUT], int64_t rows,
		      enum wsn_mem mem, struct wsn_args *a);
void pl_slot_args(const struct pl_dev *d, const struct pl_slot *sl, struct wsn_args *a);
void pl_stage_add(struct pl_stage *st, double bytes, double seconds, int64_t rows);
int pl_setup_slots(struct pl_dev *d, char *msg, size_t len);
void pl_free_slots(struct pl_dev *d);

/*
 * A stage's work on the slot holding one batch: 0 to hand the slot on, or a negative code with
 * msg set to stop the device. ctx is the stage's own state, kept across batches.
 */
typedef int pl_stage_work(struct pl_dev *d, struct pl_slot *sl, void *ctx, char *msg, size_t len);
/* Run one stage: for each batch in turn, wait for its slot in state `from`, work, hand on in `to`. */
void pl_stage_loop(struct pl_dev *d, int from, pl_stage_work *work, void *ctx, int to);

/* stages.c: the stage threads; each takes a struct pl_dev *. */
void *pl_reader_main(void *arg);
void *pl_submit_main(void *arg);
void *pl_complete_main(void *arg);
void *pl_write_main(void *arg);

/* verify.c: the verification stage and its CPU reference. */
int pl_verify_batch(struct pl_dev *d, struct wsn_device *cpu, struct pl_slot *sl, char *msg, size_t len);
int pl_verify_cpu(struct pl_dev *d, struct wsn_device **cpu, char *msg, size_t len);
void *pl_verify_main(void *arg);

/* measure.c: each stage measured alone before the pipelined run. */
int pl_measure_alone(struct pl_dev *d, char *msg, size_t len);

#endif
