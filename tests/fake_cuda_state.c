/* SPDX-License-Identifier: MIT */
/*
 * tests/fake_cuda_state.c: the fake driver's state: CUresult names, call counts and injected failures,
 * objects, contexts, the clock, and the exit report.
 */
#include "fake_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const char *const fake__entry_names[E_N] = {
#define ENTRY_NAME(name, version, params) #name,
	WSN_CU_FUNCS(ENTRY_NAME)
#undef ENTRY_NAME
};

/* ---- CUresult names (the library's own table: cuda_internal.h) ---- */

static const struct wsn__cu_error_entry errors[] = { WSN_CU_ERRORS(WSN_CU_ERROR_ENTRY) };

/* The table's entry for r, or NULL. */
static const struct wsn__cu_error_entry *error_entry(CUresult r)
{
	for (size_t i = 0; i < WSN_ARRAY_SIZE(errors); i++)
		if (errors[i].code == r)
			return &errors[i];
	return NULL;
}

CUresult fake_cuGetErrorName(CUresult e, const char **s)
{
	const struct wsn__cu_error_entry *entry = error_entry(e);

	*s = entry ? entry->name : NULL;
	return entry ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuGetErrorString(CUresult e, const char **s)
{
	const struct wsn__cu_error_entry *entry = error_entry(e);

	*s = entry ? entry->text : NULL;
	return entry ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static const char *const kind_names[K_N] = { "allocations", "pinned ranges", "modules", "streams", "events" };
/* what fake__release calls one of a kind in its message */
static const char *const release_nouns[K_N] = { [K_MODULE] = "module", [K_STREAM] = "stream", [K_EVENT] = "event" };

/* ---- state, call counts and injected failures (WSNORM_FAKE_CUDA_*) ---- */

#define MAX_FAILS 16

struct fail {
	char name[64];
	long nth;
	CUresult code;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
int fake__ndev = 1, fake__initialised;
static int trace;
static struct fail fails[MAX_FAILS];
static int nfails;
static struct fail next_fail; /* fake_cuda_fail_next: the next call of one entry point fails */
long fake__sticky_after = -1;
CUresult fake__sticky_code = CUDA_ERROR_ILLEGAL_ADDRESS;
char fake__missing[64];
struct context fake__contexts[MAX_DEVICES];
struct context fake__app_context = { .dev = 0, .primary = 0 };
struct object *fake__objects;
static struct object *released; /* released objects are kept, so their handles are never reused */
long fake__launches;
static long live[K_N], bugs, calls[E_N];
size_t fake__mem_used[MAX_DEVICES];
double fake__clock_ns;
__thread struct context *fake__current;

void fake__bug(const char *fmt, ...)
{
	va_list ap;

	bugs++;
	fprintf(stderr, "fake-cuda: BUG: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int parse_code(const char *s, CUresult *out)
{
	char *end;
	long v;

	for (size_t i = 0; i < WSN_ARRAY_SIZE(errors); i++)
		if (!strcmp(s, errors[i].name)) {
			*out = errors[i].code;
			return 0;
		}
	v = strtol(s, &end, 0);
	if (end == s || *end || v <= 0)
		return -1;
	*out = (CUresult)v;
	return 0;
}

static void read_env(void)
{
	const char *s;
	char *list, *save = NULL;

	if ((s = getenv("WSNORM_FAKE_CUDA_DEVICES")) && (fake__ndev = atoi(s)) > MAX_DEVICES)
		fake__ndev = MAX_DEVICES;
	if (fake__ndev < 0)
		fake__ndev = 0;
	for (int i = 0; i < MAX_DEVICES; i++) {
		fake__contexts[i].dev = i;
		fake__contexts[i].primary = 1;
	}
	if ((s = getenv("WSNORM_FAKE_CUDA_FAIL")) && (list = strdup(s))) {
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			struct fail *f = &fails[nfails];
			char code[64];

			if (nfails == MAX_FAILS || sscanf(t, "%63[^:]:%ld:%63s", f->name, &f->nth, code) != 3 ||
			    f->nth < 0 || parse_code(code, &f->code) < 0) {
				fprintf(stderr, "fake-cuda: bad WSNORM_FAKE_CUDA_FAIL entry '%s' (NAME:NTH:CODE)\n", t);
				abort();
			}
			nfails++;
		}
		free(list);
	}
	if ((s = getenv("WSNORM_FAKE_CUDA_STICKY"))) {
		char code[64] = "";

		if (sscanf(s, "%ld:%63s", &fake__sticky_after, code) < 1 || fake__sticky_after < 1 ||
		    (code[0] && parse_code(code, &fake__sticky_code) < 0)) {
			fprintf(stderr, "fake-cuda: bad WSNORM_FAKE_CUDA_STICKY '%s' (N[:CODE], N >= 1)\n", s);
			abort();
		}
	}
	if ((s = getenv("WSNORM_FAKE_CUDA_MISSING")))
		snprintf(fake__missing, sizeof(fake__missing), "%s", s);
	trace = (s = getenv("WSNORM_FAKE_CUDA_TRACE")) && *s && strcmp(s, "0");
}

void fake__load_env(void)
{
	pthread_once(&env_once, read_env);
}

const char *fake__error_name(CUresult r)
{
	const struct wsn__cu_error_entry *entry = error_entry(r);

	return entry ? entry->name : "CUDA_ERROR_UNRECOGNIZED";
}

CUresult fake__enter(enum entry e)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&lock);
	calls[e]++;
	if (next_fail.name[0] && !strcmp(next_fail.name, fake__entry_names[e])) {
		r = next_fail.code;
		next_fail.name[0] = '\0';
		fprintf(stderr, "fake-cuda: failing %s call %ld with %s\n", fake__entry_names[e], calls[e],
			fake__error_name(r));
	}
	for (int i = 0; i < nfails && !r; i++)
		if (!strcmp(fails[i].name, fake__entry_names[e]) && (!fails[i].nth || fails[i].nth == calls[e])) {
			r = fails[i].code;
			fprintf(stderr, "fake-cuda: failing %s call %ld with %s\n", fake__entry_names[e], calls[e],
				fake__error_name(r));
		}
	return r;
}

CUresult fake__leave(CUresult r)
{
	pthread_mutex_unlock(&lock);
	return r;
}

/* ---- objects, contexts and the clock ---- */

struct object *fake__find(enum kind k, uintptr_t handle)
{
	for (struct object *o = fake__objects; o; o = o->next)
		if (o->kind == k && (k == K_MEM || k == K_HOST ? o->addr : (uintptr_t)o) == handle)
			return o;
	return NULL;
}

struct object *fake__find_range(uintptr_t addr, size_t bytes)
{
	for (struct object *o = fake__objects; o; o = o->next)
		if (o->kind == K_MEM && addr >= o->addr && addr - o->addr <= o->bytes && bytes <= o->bytes - (addr - o->addr))
			return o;
	return NULL;
}

struct object *fake__add(enum kind k, int dev)
{
	struct object *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->kind = k;
	o->dev = dev;
	o->next = fake__objects;
	fake__objects = o;
	live[k]++;
	return o;
}

void fake__drop(struct object *o)
{
	for (struct object **pp = &fake__objects; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	live[o->kind]--;
	if (o->kind == K_MEM) {
		fake__mem_used[o->dev] -= o->bytes;
		munmap((void *)o->addr, o->bytes);
	}
	o->next = released;
	released = o;
}

CUresult fake__release(enum entry e, enum kind k, void *handle)
{
	CUresult r = fake__enter(e);
	struct object *o;

	if (!(o = fake__find(k, (uintptr_t)handle))) {
		fake__bug("%s of %p, which is not a live %s", fake__entry_names[e], handle, release_nouns[k]);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (r == CUDA_SUCCESS)
		r = fake__fault_of(o->dev);
	fake__drop(o);
	return fake__leave(r);
}

CUresult fake__need_context(const char *what, struct context **out)
{
	struct context *c = fake__current;

	*out = c;
	if (!c) {
		fake__bug("%s with no context current", what);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!c->primary) {
		fake__bug("%s in the application's context, not a device's primary context", what);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (c->retains < 1) {
		fake__bug("%s in the primary context of device %d, which is not retained", what, c->dev);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	return c->fault;
}

CUresult fake__check_stream(const char *what, struct context *c, CUstream s)
{
	struct object *o;

	if (!s)
		return CUDA_SUCCESS;
	if (!(o = fake__find(K_STREAM, (uintptr_t)s))) {
		fake__bug("%s on unknown stream %p", what, (void *)s);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (o->dev != c->dev) {
		fake__bug("%s on a stream of device %d in the context of device %d", what, o->dev, c->dev);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

CUresult fake__need_stream(const char *what, CUstream s, struct context **out)
{
	CUresult r = fake__need_context(what, out);

	return r != CUDA_SUCCESS ? r : fake__check_stream(what, *out, s);
}

CUresult fake__fault_of(int dev)
{
	return dev >= 0 && dev < MAX_DEVICES ? fake__contexts[dev].fault : CUDA_SUCCESS;
}

void fake__advance(double ns)
{
	fake__clock_ns += ns;
}

/* ---- what a program that loads the fake can call, and the exit report ---- */

/* Make the next call of entry point name fail with code (for a program that tests one call). */
FAKE_EXPORT void fake_cuda_fail_next(const char *name, CUresult code);
FAKE_EXPORT void fake_cuda_fail_next(const char *name, CUresult code)
{
	pthread_mutex_lock(&lock);
	snprintf(next_fail.name, sizeof(next_fail.name), "%s", name);
	next_fail.code = code;
	pthread_mutex_unlock(&lock);
}

/* Driver objects live now: allocations, pinned ranges, modules, streams and events. */
FAKE_EXPORT long fake_cuda_live(void);
FAKE_EXPORT long fake_cuda_live(void)
{
	long n = 0;

	pthread_mutex_lock(&lock);
	for (int k = 0; k < K_N; k++)
		n += live[k];
	pthread_mutex_unlock(&lock);
	return n;
}

/* A context that belongs to the application, not to any library: for tests that check it stays current. */
FAKE_EXPORT CUcontext fake_cuda_app_context(void);
FAKE_EXPORT CUcontext fake_cuda_app_context(void)
{
	return (CUcontext)&fake__app_context;
}

__attribute__((destructor)) static void report(void)
{
	long retains = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_DEVICES; i++)
		retains += fake__contexts[i].retains;
	fprintf(stderr, "fake-cuda: at exit: %ld %s, %ld %s, %ld %s, %ld %s, %ld %s, %ld context retains live; "
		"%ld launches, %ld bugs\n", live[K_MEM], kind_names[K_MEM], live[K_HOST], kind_names[K_HOST],
		live[K_MODULE], kind_names[K_MODULE], live[K_STREAM], kind_names[K_STREAM], live[K_EVENT],
		kind_names[K_EVENT], retains, fake__launches, bugs);
	if (trace) {
		fprintf(stderr, "fake-cuda: calls:");
		for (int e = 0; e < E_N; e++)
			if (calls[e])
				fprintf(stderr, " %s %ld", fake__entry_names[e], calls[e]);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&lock);
}
