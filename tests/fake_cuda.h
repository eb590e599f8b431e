/* SPDX-License-Identifier: MIT */
/* tests/fake_cuda.h: what the fake driver's files share: the modelled device, its objects and state, the helpers. */
#ifndef WSN_FAKE_CUDA_H
#define WSN_FAKE_CUDA_H

#include "cuda/cuda_internal.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

#define MAX_DEVICES 8
#define MAX_ENTRIES 16
#define SMS 132
#define TOTAL_MEM ((size_t)80 << 30)
#define SMEM_PER_SM 233472
#define SMEM_OPTIN 232448
#define SMEM_DEFAULT (48 << 10)
#define REGS_PER_KERNEL 32
/* the modelled clock: every copy, memset and launch takes OP_NS more than its bytes need, so that
 * loops timed by events (warm-ups of 100 ms) end after a few rounds */
#define OP_NS 10e6
#define H2D_BYTES_PER_NS 25.0   /* copies over PCIe */
#define DEV_BYTES_PER_NS 2000.0 /* device-to-device copies and memsets */
#define RECORD_NS 1000.0

/* ---- the entry points and their call counts ---- */

enum entry {
#define ENTRY_ID(name, version, params) E_##name,
	WSN_CU_FUNCS(ENTRY_ID)
#undef ENTRY_ID
	E_N
};

/* Each entry point's name, by enum entry. */
extern const char *const fake__entry_names[E_N];

/* ---- objects and contexts ---- */

enum kind { K_MEM, K_HOST, K_MODULE, K_STREAM, K_EVENT, K_N };

struct entry_fn {
	char name[128];
	int max_threads;
	int max_dyn_smem; /* raised by cuFuncSetAttribute */
};

/* One live object. Handles given out are the object's address; they are looked up in the list
 * before use, so an unknown or stale handle is found, never dereferenced. */
struct object {
	enum kind kind;
	int dev;
	uintptr_t addr;     /* K_MEM: device address; K_HOST: the pinned range */
	size_t bytes;
	int recorded;       /* K_EVENT */
	int timing;         /* K_EVENT: created without CU_EVENT_DISABLE_TIMING */
	double stamp_ns;    /* K_EVENT: the clock when recorded */
	int ptx_version;    /* K_MODULE */
	int nfn;
	struct entry_fn fn[MAX_ENTRIES];
	struct object *next;
};

/* A context: the primary one of each device, and one that belongs to "the application". */
struct context {
	int dev;
	int primary;
	long retains;
	CUresult fault; /* sticky: set by a faulting launch, cleared when the context is destroyed */
};

/* ---- state (fake_cuda_state.c), guarded by the lock fake__enter() takes ---- */

extern int fake__ndev, fake__initialised;
extern long fake__sticky_after;      /* WSNORM_FAKE_CUDA_STICKY: the launch that faults (-1: none) */
extern CUresult fake__sticky_code;   /* and the fault it leaves */
extern char fake__missing[64];       /* WSNORM_FAKE_CUDA_MISSING */
extern struct context fake__contexts[MAX_DEVICES];
extern struct context fake__app_context;
extern struct object *fake__objects; /* the live ones */
extern long fake__launches;
extern size_t fake__mem_used[MAX_DEVICES];
extern double fake__clock_ns;
extern __thread struct context *fake__current;

/* Read the WSNORM_FAKE_CUDA_* variables, once per process. */
void fake__load_env(void);
/* Print "fake-cuda: BUG: ..." and count it. */
void fake__bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The name of a CUresult, or "CUDA_ERROR_UNRECOGNIZED". */
const char *fake__error_name(CUresult r);
/* Count a call of e and return the failure injected into it, if any. Takes the lock; fake__leave() drops it. */
CUresult fake__enter(enum entry e);
CUresult fake__leave(CUresult r);
/* Begin entry point e where it works before cuInit: count it, then return an injected failure. */
#define BEGIN_ANY(e)                                    \
	do {                                            \
		CUresult r_ = fake__enter(e);           \
		if (r_ != CUDA_SUCCESS)                 \
			return fake__leave(r_);         \
	} while (0)
/* Begin entry point e: count it, then return an injected failure or, before cuInit, NOT_INITIALIZED. */
#define BEGIN_ENTRY(e)                                                  \
	do {                                                            \
		BEGIN_ANY(e);                                           \
		if (!fake__initialised)                                 \
			return fake__leave(CUDA_ERROR_NOT_INITIALIZED); \
	} while (0)
#define BEGIN(name) BEGIN_ENTRY(E_##name)
/* BEGIN for an entry point given a device ordinal d: an unknown one is CUDA_ERROR_INVALID_DEVICE. */
#define BEGIN_DEVICE(name, d)                                                \
	do {                                                                 \
		BEGIN(name);                                                 \
		if ((d) < 0 || (d) >= fake__ndev)                            \
			return fake__leave(CUDA_ERROR_INVALID_DEVICE);       \
	} while (0)

/* The live object of kind k behind handle (the device address for K_MEM and K_HOST), or NULL. */
struct object *fake__find(enum kind k, uintptr_t handle);
/* The allocation holding [addr, addr + bytes), or NULL. */
struct object *fake__find_range(uintptr_t addr, size_t bytes);
/* A new live object of kind k on device dev, or NULL when out of memory. */
struct object *fake__add(enum kind k, int dev);
/* Release o (its memory for K_MEM); its handle is never given out again. */
void fake__drop(struct object *o);
/*
 * The entry point e that releases the module, stream or event (k) behind handle: counted, found or a
 * caller's bug, and released even when the call fails (by injection or after a fault). Takes the lock.
 */
CUresult fake__release(enum entry e, enum kind k, void *handle);
/*
 * The current context for a call that needs one (what): a primary context the caller retained.
 * Anything else is a caller's bug: no context, the application's, or a released one.
 */
CUresult fake__need_context(const char *what, struct context **out);
/* A stream argument (NULL: the context's default stream) of a call made in context c. */
CUresult fake__check_stream(const char *what, struct context *c, CUstream s);
/* fake__need_context, then fake__check_stream of s in that context: a call on stream s. */
CUresult fake__need_stream(const char *what, CUstream s, struct context **out);
/* The sticky fault of the device an object belongs to. */
CUresult fake__fault_of(int dev);
/* Move the modelled clock on by ns. */
void fake__advance(double ns);

/* ---- the entry points, one fake_NAME per WSN_CU_FUNCS entry, typed as the library's table expects ---- */

#define FAKE_DECLARE(name, version, params) CUresult fake_##name params;
WSN_CU_FUNCS(FAKE_DECLARE)
#undef FAKE_DECLARE

#endif
