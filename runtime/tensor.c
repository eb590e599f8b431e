/* SPDX-License-Identifier: MIT */
/* runtime/tensor.c: tensor descriptors, seeded random fill, poison, and comparison. */
#include "compare.h"
#include "core/dtype.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

WSN_API int wsn_tensor_init(struct wsn_tensor *t, void *data, enum wsn_dtype dt, enum wsn_mem mem,
			    int ndim, const int64_t *shape)
{
	int64_t stride = 1, n = 1, bytes;
	int zero = 0;

	if (!t)
		return wsn__error(WSN_EINVAL, "tensor: no tensor to initialise (t is NULL)");
	if (!shape)
		return wsn__error(WSN_EINVAL, "tensor: no shape given (shape is NULL)");
	if (ndim < 1 || ndim > WSN_MAX_DIMS)
		return wsn__error(WSN_EINVAL, "tensor: %d dimensions (expected 1..%d)", ndim, WSN_MAX_DIMS);
	if (!wsn_dtype_size(dt))
		return wsn__error(WSN_EDTYPE, "tensor: invalid dtype %d", (int)dt);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return wsn__error(WSN_ESHAPE, "tensor: dimension %d is negative (%lld)", i, (long long)shape[i]);
		zero |= !shape[i];
	}
	for (int i = 0; i < ndim && !zero; i++)
		if (__builtin_mul_overflow(n, shape[i], &n))
			return wsn__error(WSN_EOVERFLOW, "tensor: the shape's product overflows 64 bits");
	if (__builtin_mul_overflow(n, (int64_t)wsn_dtype_size(dt), &bytes))
		return wsn__error(WSN_EOVERFLOW, "tensor: %lld elements of %s overflow 64 bits of bytes", (long long)n,
				  wsn_dtype_name(dt));
	memset(t, 0, sizeof(*t));
	t->data = data;
	t->dtype = dt;
	t->mem = mem;
	t->ndim = ndim;
	for (int i = ndim - 1; i >= 0; i--) {
		t->shape[i] = shape[i];
		t->stride[i] = stride;
		if (i && __builtin_mul_overflow(stride, shape[i] ? shape[i] : 1, &stride))
			return wsn__error(WSN_EOVERFLOW, "tensor: the stride of dimension %d overflows 64 bits", i - 1);
	}
	return 0;
}

WSN_API int wsn_tensor_2d(struct wsn_tensor *t, void *data, enum wsn_dtype dt, enum wsn_mem mem,
			  int64_t rows, int64_t cols)
{
	int64_t shape[2] = { rows, cols };
	return wsn_tensor_init(t, data, dt, mem, 2, shape);
}

WSN_API int wsn_tensor_1d(struct wsn_tensor *t, void *data, enum wsn_dtype dt, enum wsn_mem mem,
			  int64_t n)
{
	return wsn_tensor_init(t, data, dt, mem, 1, &n);
}

WSN_API int64_t wsn_tensor_numel(const struct wsn_tensor *t)
{
	int64_t n = 1;

	if (!t || !t->data || t->ndim < 1 || t->ndim > WSN_MAX_DIMS)
		return 0;
	for (int i = 0; i < t->ndim; i++)
		if (t->shape[i] <= 0)
			return 0;
	for (int i = 0; i < t->ndim; i++)
		if (__builtin_mul_overflow(n, t->shape[i], &n))
			return -1;
	return n;
}

WSN_API size_t wsn_tensor_nbytes(const struct wsn_tensor *t)
{
	int64_t n = wsn_tensor_numel(t), bytes;

	if (!t || n <= 0 || __builtin_mul_overflow(n, (int64_t)wsn_dtype_size(t->dtype), &bytes))
		return 0;
	return (size_t)bytes;
}

/* Offset in elements of flat (row-major logical) index i. */
static int64_t elem_offset(const struct wsn_tensor *t, int64_t i)
{
	int64_t off = 0;

	for (int d = t->ndim - 1; d >= 0; d--) {
		int64_t n = t->shape[d];
		off += (i % n) * t->stride[d];
		i /= n;
	}
	return off;
}

static int host_tensor_ok(const struct wsn_tensor *t, const char *what)
{
	int64_t n = 1;
	int zero = 0;

	if (!t || !t->data || t->ndim < 1 || t->ndim > WSN_MAX_DIMS || !wsn_dtype_size(t->dtype))
		return wsn__error(WSN_EINVAL, "%s: absent or invalid tensor", what);
	if (t->mem != WSN_MEM_HOST)
		return wsn__error(WSN_EINVAL, "%s: tensor is not in host memory", what);
	for (int d = 0; d < t->ndim; d++)
		if (t->shape[d] < 0)
			return wsn__error(WSN_ESHAPE, "%s: dimension %d is negative (%lld)", what, d, (long long)t->shape[d]);
	for (int d = 0; d < t->ndim; d++)
		zero |= !t->shape[d];
	for (int d = 0; d < t->ndim && !zero; d++)
		if (__builtin_mul_overflow(n, t->shape[d], &n))
			return wsn__error(WSN_EOVERFLOW, "%s: the shape's product overflows 64 bits", what);
	return 0;
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * A counter-based approximately normal value: the sum of four 16-bit uniforms (Irwin-Hall, n=4),
 * centred and scaled to unit variance. Integer and exact double arithmetic only, so the values
 * are the same on every machine for a seed.
 */
static double seeded_normal(uint64_t seed, int64_t i)
{
	uint64_t h = splitmix64(seed ^ splitmix64((uint64_t)i));
	double s = (double)(h & 0xffff) + (double)((h >> 16) & 0xffff) +
		   (double)((h >> 32) & 0xffff) + (double)(h >> 48);
	/* each uniform is (k + 0.5) / 65536 in (0,1): sum mean 2, variance 4/12 */
	s = (s + 2.0) / 65536.0 - 2.0;
	return s * 1.7320508075688772;
}

WSN_API int wsn_tensor_fill_random(const struct wsn_tensor *t, uint64_t seed, float mean, float stddev)
{
	int err = host_tensor_ok(t, "random fill");
	int64_t n = wsn_tensor_numel(t);

	if (err)
		return err;
	for (int64_t i = 0; i < n; i++)
		wsn__store(t->data, t->dtype, elem_offset(t, i),
			   (float)(mean + stddev * seeded_normal(seed, i)));
	return 0;
}

WSN_API int wsn_tensor_fill_nan(const struct wsn_tensor *t)
{
	int err = host_tensor_ok(t, "poison");
	int64_t n = wsn_tensor_numel(t);

	if (err)
		return err;
	for (int64_t i = 0; i < n; i++)
		wsn__store(t->data, t->dtype, elem_offset(t, i), NAN);
	return 0;
}

void wsn__compare_begin(struct wsn_compare *c, double sums[2])
{
	memset(c, 0, sizeof(*c));
	c->worst = -1;
	sums[0] = sums[1] = 0;
}

void wsn__compare_add(struct wsn_compare *c, double sums[2], int64_t i, double got, double ref)
{
	double d;

	if (!isfinite(ref) && !isfinite(got))
		return; /* both NaN or infinite: nothing to measure, nothing wrong */
	if (!isfinite(ref) || !isfinite(got)) {
		c->nonfinite++;
		if (c->worst < 0 || c->max_abs != INFINITY) {
			c->max_abs = INFINITY;
			c->worst = i;
		}
		return;
	}
	d = fabs(got - ref);
	sums[0] += d * d;
	sums[1] += ref * ref;
	if (d > c->max_abs || c->worst < 0) {
		c->max_abs = d;
		c->worst = i;
	}
}

void wsn__compare_end(struct wsn_compare *c, const double sums[2], int64_t n)
{
	c->count = n;
	c->rel_l2 = c->nonfinite ? INFINITY : sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sqrt(sums[0]);
}

WSN_API int wsn_tensor_compare(const struct wsn_tensor *got, const struct wsn_tensor *ref,
			       struct wsn_compare *out)
{
	double sums[2];
	int64_t n;
	int err;

	if ((err = host_tensor_ok(got, "compare")) || (err = host_tensor_ok(ref, "compare")))
		return err;
	if (!out)
		return wsn__error(WSN_EINVAL, "compare: no result given");
	n = wsn_tensor_numel(got);
	if (n != wsn_tensor_numel(ref))
		return wsn__error(WSN_ESHAPE, "compare: %lld elements against a reference of %lld",
				  (long long)n, (long long)wsn_tensor_numel(ref));
	wsn__compare_begin(out, sums);
	for (int64_t i = 0; i < n; i++)
		wsn__compare_add(out, sums, i, wsn__load(got->data, got->dtype, elem_offset(got, i)),
				 wsn__load(ref->data, ref->dtype, elem_offset(ref, i)));
	wsn__compare_end(out, sums, n);
	return 0;
}
