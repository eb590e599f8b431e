/* SPDX-License-Identifier: MIT */
/* runtime/cpu/cpu_backend.c: the CPU backend's ops table: host memory, synchronous streams and events, plans. */
#include "cpu/cpu.h"
#include "backend.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/params.h"

#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Host allocations at least this large are advised onto transparent huge pages. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* The device context. */
struct cpu_ctx {
	int threads; /* 0: all hardware threads */
	pthread_mutex_t lock; /* guards maps */
	struct wsn__host_map *maps;
};

struct cpu_stream {
	int unused;
};

struct cpu_event {
	double t; /* monotonic seconds when recorded */
	int recorded;
};

int wsn__cpu_hw_threads(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		n = CPU_COUNT(&set);
	else
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		return 1;
	return n < WSN_CPU_MAX_THREADS ? (int)n : WSN_CPU_MAX_THREADS;
}

static int cpu_init(struct wsn_backend_info *info)
{
	int n = wsn__cpu_hw_threads();

	info->device_count = 1;
	info->available = 1;
	snprintf(info->note, sizeof(info->note), "%d hardware thread%s", n, n == 1 ? "" : "s");
	return 0;
}

/* The "model name" of /proc/cpuinfo into buf; 0 if found. */
static int cpu_model_name(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *v, *end;

		if (strncmp(line, "model name", 10) || !colon)
			continue;
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		end = v + strlen(v);
		while (end > v && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*v) {
			snprintf(buf, len, "%s", v);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

static int cpu_device_info(int index, struct wsn_device_info *out)
{
	struct utsname u;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	if (index != 0)
		return wsn__error(WSN_ENODEV, "cpu: no device %d (the CPU is device 0)", index);
	if (cpu_model_name(out->name, sizeof(out->name)) != 0)
		snprintf(out->name, sizeof(out->name), "cpu");
	if (uname(&u) == 0)
		snprintf(out->arch, sizeof(out->arch), "%.*s", (int)sizeof(out->arch) - 1, u.machine);
	out->multiprocessors = wsn__cpu_hw_threads(); /* the threads a plan uses: this process's CPUs */
	if (pages > 0 && page > 0)
		out->total_mem = (int64_t)pages * page;
	return 0;
}

static int cpu_device_open(int index, void **out)
{
	struct cpu_ctx *c;

	if (index != 0)
		return wsn__error(WSN_ENODEV, "cpu: no device %d (the CPU is device 0)", index);
	if (!(c = calloc(1, sizeof(*c))))
		return wsn__error(WSN_ENOMEM, "cpu: out of memory for the device context");
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		return wsn__error(WSN_ENOMEM, "cpu: cannot create the device lock");
	}
	*out = c;
	return 0;
}

/* Closing the device unmaps what host_alloc mapped and was not freed: the device owns it. */
static void cpu_device_close(void *ctx)
{
	struct cpu_ctx *c = ctx;

	while (c->maps) {
		struct wsn__host_map *m = c->maps;

		c->maps = m->next;
		munmap(m->ptr, m->len);
		wsn__host_release(m->len);
		free(m);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static int cpu_set_threads(void *ctx, int threads)
{
	struct cpu_ctx *c = ctx;

	if (threads < 0 || threads > WSN_CPU_MAX_THREADS)
		return wsn__error(WSN_EINVAL, "cpu: thread count %d out of range 0..%d", threads,
				  WSN_CPU_MAX_THREADS);
	c->threads = threads;
	return 0;
}

/* The thread count for a plan: its option, else the device's setting, else all hardware threads. */
static int resolve_threads(const struct cpu_ctx *c, const struct wsn__cpu_plan *p)
{
	if (p->p.opts.threads > 0)
		return p->p.opts.threads;
	if (c->threads > 0)
		return c->threads;
	return wsn__cpu_hw_threads();
}

static int cpu_mem_alloc(void *ctx, size_t bytes, void **out)
{
	(void)ctx;
	return wsn__host_heap_alloc(out, 64, bytes, "cpu: cannot allocate");
}

static int cpu_mem_free(void *ctx, void *ptr)
{
	(void)ctx;
	wsn__host_heap_free(ptr);
	return 0;
}

static int cpu_mem_set(void *ctx, void *ptr, int value, size_t bytes, void *stream)
{
	(void)ctx, (void)stream;
	if (!ptr && bytes)
		return wsn__error(WSN_EINVAL, "cpu memset: NULL pointer");
	if (bytes)
		memset(ptr, value, bytes);
	return 0;
}

static int cpu_host_alloc(void *ctx, size_t bytes, void **out)
{
	struct cpu_ctx *c = ctx;
	struct wsn__host_map *m;
	long page = sysconf(_SC_PAGESIZE);
	size_t len;
	void *p = NULL;
	int rc;

	if (page <= 0)
		page = 4096;
	if (bytes > SIZE_MAX - (size_t)page)
		return wsn__error(WSN_ENOMEM, "cpu pinned host allocation: %zu bytes is too large", bytes);
	len = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
	if (!(m = malloc(sizeof(*m))))
		return wsn__error(WSN_ENOMEM, "cpu pinned host allocation: out of memory");
	if ((rc = wsn__host_hold(len, "cpu pinned host allocation")) == 0) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			wsn__host_release(len);
			rc = wsn__error(WSN_ENOMEM, "cpu pinned host allocation: mmap of %zu bytes failed", len);
		}
	}
	if (rc) {
		free(m);
		return rc;
	}
#ifdef MADV_HUGEPAGE
	if (len >= HUGE_PAGE_BYTES)
		madvise(p, len, MADV_HUGEPAGE); /* advice only: small pages work too */
#endif
	m->ptr = p;
	m->len = len;
	wsn__host_map_add(&c->lock, &c->maps, m);
	*out = p;
	return 0;
}

static int cpu_host_free(void *ctx, void *ptr)
{
	struct cpu_ctx *c = ctx;
	struct wsn__host_map *m = wsn__host_map_take(&c->lock, &c->maps, ptr);

	if (!m)
		return wsn__error(WSN_EINVAL, "cpu pinned host free: %p was not allocated by wsn_host_alloc on this device",
				  ptr);
	munmap(m->ptr, m->len);
	wsn__host_release(m->len);
	free(m);
	return 0;
}

static int cpu_memcpy(void *ctx, void *dst, const void *src, size_t bytes, enum wsn_copy_kind kind, void *stream)
{
	(void)ctx, (void)kind, (void)stream;
	memcpy(dst, src, bytes);
	return 0;
}

/* A zeroed stream or event (what names it in the message). */
static int handle_new(void **out, size_t size, const char *what)
{
	if (!(*out = calloc(1, size)))
		return wsn__error(WSN_ENOMEM, "%s: out of memory", what);
	return 0;
}

/* Streams and events hold nothing but their own memory. */
static int cpu_handle_destroy(void *ctx, void *handle)
{
	(void)ctx;
	free(handle);
	return 0;
}

static int cpu_stream_create(void *ctx, void **out)
{
	(void)ctx;
	return handle_new(out, sizeof(struct cpu_stream), "cpu stream");
}

/* Execution is synchronous: by the time anyone waits, the work is done. */
static int cpu_stream_sync(void *ctx, void *s)
{
	(void)ctx, (void)s;
	return 0;
}

static int cpu_stream_wait_event(void *ctx, void *s, void *e)
{
	(void)ctx, (void)s, (void)e;
	return 0;
}

static int cpu_event_create(void *ctx, void **out)
{
	(void)ctx;
	return handle_new(out, sizeof(struct cpu_event), "cpu event");
}

static int cpu_event_record(void *ctx, void *e, void *s)
{
	struct cpu_event *ev = e;

	(void)ctx, (void)s;
	ev->t = wsn__now();
	ev->recorded = 1;
	return 0;
}

static int cpu_event_sync(void *ctx, void *e)
{
	(void)ctx, (void)e;
	return 0;
}

static int cpu_event_query(void *ctx, void *e)
{
	(void)ctx, (void)e;
	return 1; /* the CPU runs work as it is submitted */
}

static int cpu_event_elapsed(void *ctx, void *start, void *end, float *ms)
{
	const struct cpu_event *a = start, *b = end;

	(void)ctx;
	if (!a->recorded || !b->recorded)
		return wsn__error(WSN_EINVAL, "cpu event elapsed: the %s event was never recorded",
				  a->recorded ? "end" : "start");
	*ms = (float)((b->t - a->t) * 1e3);
	return 0;
}

static int cpu_plan_create(void *ctx, const struct wsn__plan_params *p, void **out)
{
	struct wsn__cpu_plan *plan;

	(void)ctx;
	if (p->opts.threads > WSN_CPU_MAX_THREADS)
		return wsn__error(WSN_EINVAL, "cpu plan: thread count %d out of range 0..%d", p->opts.threads,
				  WSN_CPU_MAX_THREADS);
	if (!(plan = calloc(1, sizeof(*plan))))
		return wsn__error(WSN_ENOMEM, "cpu plan: out of memory");
	plan->p = *p;
	plan->chunk_rows = wsn__cpu_chunk_rows(p->op, p->rows, p->hidden);
	*out = plan;
	return 0;
}

static void cpu_plan_destroy(void *ctx, void *plan)
{
	(void)ctx;
	free(plan);
}

/* How the CPU reference runs plan p: its threads (at most one per chunk) and what its op computes. */
static int cpu_plan_threads(void *ctx, const struct wsn__cpu_plan *p, const char **how)
{
	int64_t chunks = (p->p.rows + p->chunk_rows - 1) / p->chunk_rows;
	int threads = resolve_threads(ctx, p);

	switch (p->p.op) {
	case WSN_LAYERNORM_FWD: *how = "two-pass variance"; break;
	case WSN_RMSNORM_FWD: *how = "compensated mean of squares"; break;
	case WSN_LAYERNORM_BWD: *how = "deterministic dweight/dbias (chunk partials reduced in order)"; break;
	default: *how = "deterministic dweight (chunk partials reduced in order)"; break;
	}
	return threads > chunks ? (int)chunks : threads;
}

#define CPU_NO_TUNE "nothing to tune on the CPU (one kernel family)"

static int cpu_plan_describe(void *ctx, const void *plan, char *buf, size_t len)
{
	const struct wsn__cpu_plan *p = plan;
	const char *how;
	int threads = cpu_plan_threads(ctx, p, &how);

	return snprintf(buf, len, "cpu reference: %d thread%s, rows split into fixed chunks of %lld rows, "
			"f32 accumulation, %s\n%s", threads, threads == 1 ? "" : "s", (long long)p->chunk_rows, how,
			p->p.opts.autotune ? "autotune:      " CPU_NO_TUNE "\n" : "");
}

static int cpu_plan_json(void *ctx, const void *plan, void *obj)
{
	const struct wsn__cpu_plan *p = plan;
	const char *how;
	int threads = cpu_plan_threads(ctx, p, &how);
	json_t *o = obj;

	if (json_object_set_new(o, "approach", json_string("cpu reference")) ||
	    json_object_set_new(o, "threads", json_integer(threads)) ||
	    json_object_set_new(o, "chunk_rows", json_integer((json_int_t)p->chunk_rows)) ||
	    json_object_set_new(o, "accumulation", json_string("f32")) ||
	    json_object_set_new(o, "method", json_string(how)) ||
	    json_object_set_new(o, "autotune", p->p.opts.autotune ? json_string(CPU_NO_TUNE) : json_null()))
		return wsn__error(WSN_ENOMEM, "cpu plan: out of memory describing the plan as JSON");
	return 0;
}

static int cpu_execute(void *ctx, void *plan, const struct wsn__exec *ex, void *stream)
{
	(void)stream;
	return wsn__cpu_execute(plan, resolve_threads(ctx, plan), ex);
}

const struct wsn__backend_ops wsn__cpu_ops = {
	.name = "cpu",
	.exec_mem = WSN_MEM_HOST,
	.init = cpu_init,
	.device_info = cpu_device_info,
	.device_open = cpu_device_open,
	.device_close = cpu_device_close,
	.set_threads = cpu_set_threads,
	.mem_alloc = cpu_mem_alloc,
	.mem_free = cpu_mem_free,
	.mem_set = cpu_mem_set,
	.host_alloc = cpu_host_alloc,
	.host_free = cpu_host_free,
	.memcpy = cpu_memcpy,
	.stream_create = cpu_stream_create,
	.stream_destroy = cpu_handle_destroy,
	.stream_sync = cpu_stream_sync,
	.stream_wait_event = cpu_stream_wait_event,
	.event_create = cpu_event_create,
	.event_destroy = cpu_handle_destroy,
	.event_record = cpu_event_record,
	.event_sync = cpu_event_sync,
	.event_query = cpu_event_query,
	.event_elapsed = cpu_event_elapsed,
	.plan_create = cpu_plan_create,
	.plan_destroy = cpu_plan_destroy,
	.plan_describe = cpu_plan_describe,
	.plan_json = cpu_plan_json,
	.execute = cpu_execute,
};
