/* SPDX-License-Identifier: MIT */
/* runtime/io/safetensors.c: safetensors headers checked with jansson; tensors read and written. */
#include "io/io_internal.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A header longer than this is not a tensor file's header but a corrupt length. */
#define HEADER_MAX ((uint64_t)100 << 20)
#define METADATA_KEY "__metadata__"
/* Bytes of memory the JSON parse takes for each header byte, at most (a header of the smallest
 * entries): a JSON value for every field, each key and string copied. */
#define HEADER_PARSE_FACTOR 16u

struct wsn_st_file {
	char *path;
	struct wsn_reader *r;
	bool own_reader;
	int n;
	struct wsn_st_entry *e; /* in order of offsets */
	int *by_name;           /* indices into e in strcmp order of names */
	json_t *meta;           /* the "__metadata__" object, or NULL */
	uint64_t size;          /* file size */
	uint64_t data_start;    /* 8 + header length */
	uint64_t held;          /* host memory counted for the entries, given back on close */
};

/*
 * The dtypes of the safetensors format, with their element size in bits (F4 and F6 pack elements
 * smaller than a byte). A file may hold any of them; wsnorm computes with the three that map to an
 * enum wsn_dtype, the others are WSN_DTYPE_COUNT.
 */
static const struct {
	const char *name;
	unsigned bits;
	enum wsn_dtype dt;
} st_dtypes[] = {
	{ "F32", 32, WSN_F32 },
	{ "F16", 16, WSN_F16 },
	{ "BF16", 16, WSN_BF16 },
	{ "BOOL", 8, WSN_DTYPE_COUNT },
	{ "F4", 4, WSN_DTYPE_COUNT },
	{ "F6_E2M3", 6, WSN_DTYPE_COUNT },
	{ "F6_E3M2", 6, WSN_DTYPE_COUNT },
	{ "U8", 8, WSN_DTYPE_COUNT },
	{ "I8", 8, WSN_DTYPE_COUNT },
	{ "F8_E5M2", 8, WSN_DTYPE_COUNT },
	{ "F8_E4M3", 8, WSN_DTYPE_COUNT },
	{ "F8_E8M0", 8, WSN_DTYPE_COUNT },
	{ "F8_E4M3FNUZ", 8, WSN_DTYPE_COUNT },
	{ "F8_E5M2FNUZ", 8, WSN_DTYPE_COUNT },
	{ "I16", 16, WSN_DTYPE_COUNT },
	{ "U16", 16, WSN_DTYPE_COUNT },
	{ "I32", 32, WSN_DTYPE_COUNT },
	{ "U32", 32, WSN_DTYPE_COUNT },
	{ "C64", 64, WSN_DTYPE_COUNT },
	{ "F64", 64, WSN_DTYPE_COUNT },
	{ "I64", 64, WSN_DTYPE_COUNT },
	{ "U64", 64, WSN_DTYPE_COUNT },
};

static const char *st_dtype_name(enum wsn_dtype dt)
{
	if (!wsn_dtype_size(dt))
		return NULL;
	for (size_t i = 0; i < WSN_ARRAY_SIZE(st_dtypes); i++)
		if (st_dtypes[i].dt == dt)
			return st_dtypes[i].name;
	return NULL;
}

static void fmt_shape(char *buf, size_t len, const int64_t *shape, int ndim)
{
	size_t n = 0;

	n += (size_t)snprintf(buf + n, len - n, "[");
	for (int i = 0; i < ndim && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (n < len)
		snprintf(buf + n, len - n, "]");
}

/* ---- reading the header ---- */

/* Parse and check one tensor's entry (name -> {dtype, shape, data_offsets}) into e. */
static int parse_entry(const struct wsn_st_file *f, const char *name, json_t *v,
		       struct wsn_st_entry *e)
{
	const char *p = f->path, *dts;
	uint64_t numel = 1, nbytes, begin, end, avail = f->size - f->data_start;
	json_t *dt, *shape, *offs, *jb, *je;
	size_t nd, k = 0;
	unsigned bits;
	bool zero = false;
	char sh[128];

	if (strlen(name) >= WSN_ST_MAX_NAME)
		return wsn__error(WSN_ERANGE, "%s: tensor name '%.48s...' is %zu bytes, longer than the "
				  "limit of %d", p, name, strlen(name), WSN_ST_MAX_NAME - 1);
	if (!json_is_object(v))
		return wsn__error(WSN_EFORMAT, "%s: tensor '%s': entry is not a JSON object", p, name);
	dt = json_object_get(v, "dtype");
	if (!json_is_string(dt))
		return wsn__error(WSN_EFORMAT, "%s: tensor '%s': \"dtype\" is missing or not a string",
				  p, name);
	dts = json_string_value(dt);
	while (k < WSN_ARRAY_SIZE(st_dtypes) && strcmp(dts, st_dtypes[k].name))
		k++;
	if (k == WSN_ARRAY_SIZE(st_dtypes))
		return wsn__error(WSN_EDTYPE, "%s: tensor '%s': unknown dtype \"%.32s\", not one of the "
				  "safetensors format", p, name, dts);
	e->dtype = st_dtypes[k].dt;
	snprintf(e->st_dtype, sizeof(e->st_dtype), "%s", st_dtypes[k].name);
	bits = st_dtypes[k].bits;
	shape = json_object_get(v, "shape");
	if (!json_is_array(shape))
		return wsn__error(WSN_EFORMAT, "%s: tensor '%s': \"shape\" is missing or not an array",
				  p, name);
	nd = json_array_size(shape);
	if (nd > WSN_MAX_DIMS)
		return wsn__error(WSN_ESHAPE, "%s: tensor '%s': shape has %zu dimensions, more than %d",
				  p, name, nd, WSN_MAX_DIMS);
	for (size_t i = 0; i < nd; i++) {
		json_t *x = json_array_get(shape, i);

		if (!json_is_integer(x))
			return wsn__error(WSN_EFORMAT, "%s: tensor '%s': shape[%zu] is not an integer",
					  p, name, i);
		if (json_integer_value(x) < 0)
			return wsn__error(WSN_ESHAPE, "%s: tensor '%s': shape[%zu] = %lld is negative", p,
					  name, i, (long long)json_integer_value(x));
		e->shape[i] = json_integer_value(x);
		zero |= e->shape[i] == 0;
	}
	e->ndim = (int)nd;
	fmt_shape(sh, sizeof(sh), e->shape, e->ndim);
	for (size_t i = 0; i < nd && !zero; i++)
		if (__builtin_mul_overflow(numel, (uint64_t)e->shape[i], &numel) ||
		    numel > (uint64_t)INT64_MAX)
			return wsn__error(WSN_EOVERFLOW, "%s: tensor '%s': the product of shape %s overflows",
					  p, name, sh);
	if (zero)
		numel = 0;
	/* numel * bits / 8, in whole bytes: by the eights, then the rest */
	if ((numel % 8) * bits % 8)
		return wsn__error(WSN_ESHAPE, "%s: tensor '%s': shape %s of %s is %llu elements of %u "
				  "bits, not a whole number of bytes", p, name, sh, dts,
				  (unsigned long long)numel, bits);
	if (__builtin_mul_overflow(numel / 8, (uint64_t)bits, &nbytes) ||
	    __builtin_add_overflow(nbytes, numel % 8 * bits / 8, &nbytes) || nbytes > (uint64_t)INT64_MAX)
		return wsn__error(WSN_EOVERFLOW, "%s: tensor '%s': %s bytes of shape %s overflow", p, name,
				  dts, sh);
	offs = json_object_get(v, "data_offsets");
	jb = json_array_get(offs, 0);
	je = json_array_get(offs, 1);
	if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(jb) ||
	    !json_is_integer(je))
		return wsn__error(WSN_EFORMAT, "%s: tensor '%s': \"data_offsets\" is not an array of two "
				  "integers", p, name);
	if (json_integer_value(jb) < 0 || json_integer_value(je) < 0)
		return wsn__error(WSN_EFORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] are negative",
				  p, name, (long long)json_integer_value(jb),
				  (long long)json_integer_value(je));
	begin = (uint64_t)json_integer_value(jb);
	end = (uint64_t)json_integer_value(je);
	if (begin > end)
		return wsn__error(WSN_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before "
				  "they begin", p, name, (unsigned long long)begin, (unsigned long long)end);
	if (end > avail)
		return wsn__error(WSN_ETRUNC, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end "
				  "of the file (%llu data bytes after the header)", p, name,
				  (unsigned long long)begin, (unsigned long long)end,
				  (unsigned long long)avail);
	if (end - begin != nbytes)
		return wsn__error(WSN_ESHAPE, "%s: tensor '%s': shape %s of %s is %llu bytes but "
				  "data_offsets [%llu, %llu] hold %llu", p, name, sh, dts,
				  (unsigned long long)nbytes, (unsigned long long)begin,
				  (unsigned long long)end, (unsigned long long)(end - begin));
	memcpy(e->name, name, strlen(name) + 1);
	e->offset = f->data_start + begin;
	e->nbytes = nbytes;
	return 0;
}

static int parse_metadata(const struct wsn_st_file *f, json_t *v)
{
	const char *key;
	json_t *x;

	if (!json_is_object(v))
		return wsn__error(WSN_EFORMAT, "%s: \"" METADATA_KEY "\" is not a JSON object", f->path);
	json_object_foreach(v, key, x) {
		if (!json_is_string(x))
			return wsn__error(WSN_EFORMAT, "%s: metadata '%.80s%s' is not a string", f->path, key,
					  strlen(key) > 80 ? "..." : "");
	}
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct wsn_st_entry *x = a, *y = b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b, void *ctx)
{
	const struct wsn_st_entry *e = ctx;

	return strcmp(e[*(const int *)a].name, e[*(const int *)b].name);
}

/* Sort the entries by offset, reject overlapping ranges, and build the name index. */
static int index_entries(struct wsn_st_file *f)
{
	uint64_t max_end = 0;
	int holder = -1;

	qsort(f->e, (size_t)f->n, sizeof(*f->e), by_offset);
	for (int i = 0; i < f->n; i++) {
		const struct wsn_st_entry *e = &f->e[i];

		if (!e->nbytes)
			continue;
		if (holder >= 0 && e->offset < max_end)
			return wsn__error(WSN_EFORMAT, "%s: tensors '%s' and '%s' overlap (data_offsets "
					  "[%llu, %llu] and [%llu, %llu])", f->path, f->e[holder].name,
					  e->name,
					  (unsigned long long)(f->e[holder].offset - f->data_start),
					  (unsigned long long)(max_end - f->data_start),
					  (unsigned long long)(e->offset - f->data_start),
					  (unsigned long long)(e->offset + e->nbytes - f->data_start));
		if (e->offset + e->nbytes > max_end) {
			max_end = e->offset + e->nbytes;
			holder = i;
		}
	}
	f->by_name = calloc((unsigned)f->n + 1u, sizeof(*f->by_name));
	if (!f->by_name)
		return wsn__error(WSN_ENOMEM, "%s: out of memory", f->path);
	for (int i = 0; i < f->n; i++)
		f->by_name[i] = i;
	qsort_r(f->by_name, (size_t)f->n, sizeof(*f->by_name), by_name, f->e);
	return 0;
}

/* Count bytes against the host memory available for what, a use of f's hlen-byte header; 0 or WSN_ENOMEM
 * naming the file. */
static int hold_for(const struct wsn_st_file *f, uint64_t bytes, const char *what, uint64_t hlen)
{
	size_t len = strlen(f->path) + 96;
	char *name = malloc(len);
	int err;

	if (!name)
		return wsn__error(WSN_ENOMEM, "%s: out of memory", f->path);
	snprintf(name, len, "%s: %s (%llu bytes)", f->path, what, (unsigned long long)hlen);
	err = wsn__host_hold(bytes, name);
	free(name);
	return err;
}

/* Read the header through the reader and fill f. */
static int load_header(struct wsn_st_file *f)
{
	unsigned char lenbuf[8];
	uint64_t hlen = 0, parse_bytes, entry_bytes;
	char *hdr = NULL;
	size_t nent;
	json_t *root = NULL, *v;
	json_error_t jerr;
	const char *key;
	int err;

	err = wsn_reader_read(f->r, f->path, 0, 8, lenbuf);
	if (err)
		return err;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenbuf[i];
	if (hlen > HEADER_MAX)
		return wsn__error(WSN_EFORMAT, "%s: header length %llu is not plausible (more than "
				  "100 MiB): not a safetensors file or a corrupt one", f->path,
				  (unsigned long long)hlen);
	if (hlen > f->size - 8)
		return wsn__error(WSN_ETRUNC, "%s: header length %llu runs past the end of the file "
				  "(%llu bytes)", f->path, (unsigned long long)hlen,
				  (unsigned long long)f->size);
	if (hlen == 0)
		return wsn__error(WSN_EFORMAT, "%s: header length is 0: no JSON header", f->path);
	f->data_start = 8 + hlen;
	/* the header and its parse are counted against the memory available while they are held */
	parse_bytes = hlen * (1 + HEADER_PARSE_FACTOR);
	err = hold_for(f, parse_bytes, "parsing its JSON header", hlen);
	if (err)
		return err;
	hdr = malloc((size_t)hlen);
	if (!hdr) {
		wsn__host_release(parse_bytes);
		return wsn__error(WSN_ENOMEM, "%s: out of memory for a %llu-byte header", f->path,
				  (unsigned long long)hlen);
	}
	err = wsn_reader_read(f->r, f->path, 8, hlen, hdr);
	if (err)
		goto out;
	/* the length bounds the parse: the header is not NUL-terminated */
	root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		const char *nul = memchr(hdr, 0, (size_t)hlen);
		if (nul) /* the parser would only say "end of file expected" */
			err = wsn__error(WSN_EFORMAT, "%s: the %llu-byte JSON header holds a NUL byte at byte %lld "
					 "(a header is padded with spaces, not NULs)", f->path, (unsigned long long)hlen,
					 (long long)(nul - (const char *)hdr));
		else
			err = wsn__error(WSN_EFORMAT, "%s: malformed JSON header at byte %d (line %d, column "
					 "%d): %s", f->path, jerr.position, jerr.line, jerr.column, jerr.text);
		goto out;
	}
	if (!json_is_object(root)) {
		err = wsn__error(WSN_EFORMAT, "%s: the JSON header is not an object", f->path);
		goto out;
	}
	nent = json_object_size(root) ? json_object_size(root) : 1;
	entry_bytes = (uint64_t)nent * (sizeof(*f->e) + sizeof(*f->by_name));
	if ((err = hold_for(f, entry_bytes, "the entries of its JSON header", hlen)))
		goto out;
	f->held = entry_bytes;
	f->e = calloc(nent, sizeof(*f->e));
	if (!f->e) {
		err = wsn__error(WSN_ENOMEM, "%s: out of memory for %zu entries", f->path,
				 json_object_size(root));
		goto out;
	}
	json_object_foreach(root, key, v) {
		if (!strcmp(key, METADATA_KEY)) {
			err = parse_metadata(f, v);
			if (err)
				goto out;
			f->meta = json_incref(v);
			continue;
		}
		err = parse_entry(f, key, v, &f->e[f->n]);
		if (err)
			goto out;
		f->n++;
	}
	err = index_entries(f);
out:
	json_decref(root);
	free(hdr);
	wsn__host_release(parse_bytes);
	return err;
}

/*
 * Open path as a safetensors file. The header is read through r (NULL: a private reader with
 * default options, owned by the file). Returns 0 and *out, or WSN_EINVAL, WSN_ENOENT, WSN_EISDIR,
 * WSN_ETRUNC (file shorter than its header or data), WSN_EFORMAT (bad length, JSON or entry),
 * WSN_EDTYPE, WSN_ESHAPE, WSN_EOVERFLOW, WSN_ERANGE (a tensor name of WSN_ST_MAX_NAME bytes or
 * more), WSN_ENOMEM, or a read error; the detail names the file and the tensor.
 */
WSN_API int wsn_st_open(const char *path, struct wsn_reader *r, struct wsn_st_file **out)
{
	struct wsn_st_file *f;
	int err;

	if (!out)
		return wsn__error(WSN_EINVAL, "safetensors: no output pointer");
	*out = NULL;
	if (!path)
		return wsn__error(WSN_EINVAL, "safetensors: no path");
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return wsn__error(WSN_ENOMEM, "%s: out of memory", path);
	}
	err = wsn__file_size(path, &f->size);
	if (err)
		goto err;
	if (f->size < 8) {
		if (f->size == 0)
			err = wsn__error(WSN_ETRUNC, "%s: empty file, not a safetensors file", path);
		else
			err = wsn__error(WSN_ETRUNC, "%s: %llu bytes, shorter than the 8-byte header "
					 "length", path, (unsigned long long)f->size);
		goto err;
	}
	if (!r) {
		err = wsn_reader_create(NULL, &f->r);
		if (err)
			goto err;
		f->own_reader = true;
	} else {
		f->r = r;
	}
	err = load_header(f);
	if (err)
		goto err;
	*out = f;
	return 0;

err:
	wsn_st_close(f);
	return err;
}

/* Close a file opened by wsn_st_open (and its private reader). NULL is ignored. */
WSN_API void wsn_st_close(struct wsn_st_file *f)
{
	if (!f)
		return;
	if (f->own_reader)
		wsn_reader_destroy(f->r);
	json_decref(f->meta);
	free(f->by_name);
	free(f->e);
	wsn__host_release(f->held);
	free(f->path);
	free(f);
}

/* The path the file was opened with. */
WSN_API const char *wsn_st_path(const struct wsn_st_file *f)
{
	return f ? f->path : NULL;
}

/* Number of tensors in the file (0 for NULL). */
WSN_API int wsn_st_count(const struct wsn_st_file *f)
{
	return f ? f->n : 0;
}

/* Entry i (0..count-1) in order of file offsets; NULL when i is out of range. */
WSN_API const struct wsn_st_entry *wsn_st_entry_at(const struct wsn_st_file *f, int i)
{
	if (!f || i < 0 || i >= f->n)
		return NULL;
	return &f->e[i];
}

/* The entry named name (binary search of the name index); NULL when absent. */
WSN_API const struct wsn_st_entry *wsn_st_find(const struct wsn_st_file *f, const char *name)
{
	int lo = 0, hi;

	if (!f || !name)
		return NULL;
	hi = f->n - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct wsn_st_entry *e = &f->e[f->by_name[mid]];
		int c = strcmp(name, e->name);

		if (!c)
			return e;
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The "__metadata__" string value of key; NULL when absent. Valid until wsn_st_close. */
WSN_API const char *wsn_st_metadata(const struct wsn_st_file *f, const char *key)
{
	if (!f || !f->meta || !key)
		return NULL;
	return json_string_value(json_object_get(f->meta, key));
}

/*
 * Read tensor name into dst (cap bytes) through the file's reader. Returns 0, WSN_EINVAL,
 * WSN_ENOTENSOR (detail names tensor and file), WSN_EDTYPE (a dtype wsnorm does not compute with),
 * WSN_ERANGE (cap too small), or a read error.
 */
WSN_API int wsn_st_read(struct wsn_st_file *f, const char *name, void *dst, size_t cap)
{
	const struct wsn_st_entry *e;
	int err;

	if (!f || !name)
		return wsn__error(WSN_EINVAL, "safetensors read: no file or no tensor name");
	e = wsn_st_find(f, name);
	if (!e)
		return wsn__error(WSN_ENOTENSOR, "%s: no tensor '%s' in the file", f->path, name);
	if (!wsn_dtype_size(e->dtype))
		return wsn__error(WSN_EDTYPE, "%s: tensor '%s' is %s; wsnorm computes with F32, F16 and "
				  "BF16", f->path, name, e->st_dtype);
	if (cap < e->nbytes)
		return wsn__error(WSN_ERANGE, "%s: tensor '%s' is %llu bytes, the buffer holds %zu",
				  f->path, name, (unsigned long long)e->nbytes, cap);
	err = wsn_reader_read(f->r, f->path, e->offset, e->nbytes, dst);
	if (err)
		return wsn__error_context(err, "tensor '%s'", name);
	return 0;
}

/* ---- writing ---- */

/*
 * The header of n tensors, what names the file (or the call) in messages: the 8-byte little-endian
 * length, then the JSON object (metadata first, then the tensors in the given order with their
 * data packed in that order) padded with spaces to a multiple of 8 bytes. *hdr is malloc'd;
 * offsets (NULL: not wanted) receives each tensor's absolute data offset.
 */
static int make_header(const char *what, const struct wsn_st_tensor_info *tensors, int n,
		       const char *const *metadata, unsigned char **hdr, size_t *hdr_len,
		       uint64_t *offsets)
{
	json_t *root = json_object();
	uint64_t off = 0;
	char *text = NULL;
	size_t text_len, padded;
	int err = 0;

	*hdr = NULL;
	*hdr_len = 0;
	if (!root)
		return wsn__error(WSN_ENOMEM, "%s: out of memory", what);
	if (metadata && metadata[0]) {
		json_t *meta = json_object();

		if (!meta || json_object_set_new(root, METADATA_KEY, meta)) {
			err = wsn__error(WSN_ENOMEM, "%s: out of memory", what);
			goto out;
		}
		for (size_t i = 0; metadata[i]; i += 2) {
			if (!metadata[i + 1]) {
				err = wsn__error(WSN_EINVAL, "%s: metadata key '%s' has no value", what,
						 metadata[i]);
				goto out;
			}
			if (json_object_set_new(meta, metadata[i], json_string(metadata[i + 1]))) {
				err = wsn__error(WSN_EINVAL, "%s: metadata '%s' is not valid UTF-8 text",
						 what, metadata[i]);
				goto out;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		const struct wsn_st_tensor_info *t = &tensors[i];
		const char *name = t->name;
		uint64_t nbytes;
		json_t *shape, *entry;

		if (!name || !name[0]) {
			err = wsn__error(WSN_EINVAL, "%s: tensor %d has no name", what, i);
			goto out;
		}
		if (strlen(name) >= WSN_ST_MAX_NAME) {
			err = wsn__error(WSN_ERANGE, "%s: tensor name '%.48s...' is longer than %d bytes",
					 what, name, WSN_ST_MAX_NAME - 1);
			goto out;
		}
		if (!strcmp(name, METADATA_KEY) || json_object_get(root, name)) {
			err = wsn__error(WSN_EINVAL, "%s: tensor name '%s' is reserved or used twice",
					 what, name);
			goto out;
		}
		if (!st_dtype_name(t->dtype)) {
			err = wsn__error(WSN_EDTYPE, "%s: tensor '%s': dtype %d is not F32, F16 or BF16",
					 what, name, (int)t->dtype);
			goto out;
		}
		if (t->ndim < 0 || t->ndim > WSN_MAX_DIMS) {
			err = wsn__error(WSN_EINVAL, "%s: tensor '%s': %d dimensions (expected 0..%d)",
					 what, name, t->ndim, WSN_MAX_DIMS);
			goto out;
		}
		nbytes = wsn_dtype_size(t->dtype);
		for (int d = 0; d < t->ndim; d++) {
			if (t->shape[d] < 0) {
				err = wsn__error(WSN_ESHAPE, "%s: tensor '%s': shape[%d] = %lld is negative",
						 what, name, d, (long long)t->shape[d]);
				goto out;
			}
			if (__builtin_mul_overflow(nbytes, (uint64_t)t->shape[d], &nbytes) ||
			    nbytes > (uint64_t)INT64_MAX) {
				err = wsn__error(WSN_EOVERFLOW, "%s: tensor '%s': the bytes of its shape "
						 "overflow", what, name);
				goto out;
			}
		}
		if (off + nbytes < off || off + nbytes > (uint64_t)INT64_MAX) {
			err = wsn__error(WSN_EOVERFLOW, "%s: the tensors' data exceeds the offset range",
					 what);
			goto out;
		}
		shape = json_array();
		for (int d = 0; shape && d < t->ndim; d++)
			if (json_array_append_new(shape, json_integer(t->shape[d]))) {
				json_decref(shape);
				shape = NULL;
			}
		entry = shape ? json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype_name(t->dtype),
					  "shape", shape, "data_offsets", (json_int_t)off,
					  (json_int_t)(off + nbytes)) : NULL;
		if (!entry) {
			err = wsn__error(WSN_ENOMEM, "%s: out of memory", what);
			goto out;
		}
		if (json_object_set_new(root, name, entry)) {
			err = wsn__error(WSN_EINVAL, "%s: tensor name '%s' is not valid UTF-8", what, name);
			goto out;
		}
		if (offsets)
			offsets[i] = off;
		off += nbytes;
	}
	text = json_dumps(root, JSON_COMPACT);
	if (!text) {
		err = wsn__error(WSN_ENOMEM, "%s: out of memory for the header", what);
		goto out;
	}
	text_len = strlen(text);
	padded = (text_len + 7) & ~(size_t)7;
	*hdr = malloc(8 + padded);
	if (!*hdr) {
		err = wsn__error(WSN_ENOMEM, "%s: out of memory for the header", what);
		goto out;
	}
	for (int i = 0; i < 8; i++)
		(*hdr)[i] = (unsigned char)((uint64_t)padded >> (8 * i));
	memcpy(*hdr + 8, text, text_len);
	memset(*hdr + 8 + text_len, ' ', padded - text_len);
	*hdr_len = 8 + padded;
	for (int i = 0; offsets && i < n; i++)
		offsets[i] += *hdr_len;
out:
	free(text);
	json_decref(root);
	return err;
}

/*
 * Build the safetensors header of n tensors described by dtype and shape, and optional metadata
 * (key, value, ..., NULL): *header (malloc'd, free() it) holds *header_len bytes, the 8-byte length
 * and the padded JSON; offsets (n entries, or NULL) receives each tensor's absolute data offset,
 * data packed in the given order. Returns 0 or WSN_EINVAL, WSN_EDTYPE, WSN_ESHAPE, WSN_ERANGE,
 * WSN_EOVERFLOW, WSN_ENOMEM naming the tensor.
 */
WSN_API int wsn_st_header(const struct wsn_st_tensor_info *tensors, int n,
			  const char *const *metadata, unsigned char **header, size_t *header_len,
			  uint64_t *offsets)
{
	if (!header || !header_len)
		return wsn__error(WSN_EINVAL, "safetensors header: no output pointer");
	*header = NULL;
	*header_len = 0;
	if (n < 0 || (n > 0 && !tensors))
		return wsn__error(WSN_EINVAL, "safetensors header: %d tensors", n);
	return make_header("safetensors header", tensors, n, metadata, header, header_len, offsets);
}

/*
 * Write n tensors (contiguous host tensors) and optional metadata (key, value, ..., NULL) as a
 * safetensors file: header entries and data in the given order, the header padded with spaces
 * to a multiple of 8 bytes. Written to a temporary file in the same directory, synced and
 * renamed over path; on failure path is untouched. Returns 0 or WSN_EINVAL, WSN_EDTYPE,
 * WSN_ESHAPE, WSN_ERANGE, WSN_EOVERFLOW, WSN_EISDIR, WSN_ENOSPC, ... naming the file.
 */
WSN_API int wsn_st_write(const char *path, const struct wsn_named_tensor *tensors, int n,
			 const char *const *metadata)
{
	struct wsn_out_file o = { .fd = -1 };
	struct wsn_st_tensor_info *info = NULL;
	unsigned char *hdr = NULL;
	size_t hlen;
	char what[1024];
	int err;

	if (!path || !path[0])
		return wsn__error(WSN_EINVAL, "safetensors write: no path");
	if (n < 0 || (n > 0 && !tensors))
		return wsn__error(WSN_EINVAL, "%s: %d tensors to write", path, n);
	info = calloc(n > 0 ? (size_t)n : 1, sizeof(*info));
	if (!info)
		return wsn__error(WSN_ENOMEM, "%s: out of memory", path);
	for (int i = 0; i < n; i++) {
		const struct wsn_tensor *t = tensors[i].t;

		if (!tensors[i].name || !tensors[i].name[0]) {
			err = wsn__error(WSN_EINVAL, "%s: tensor %d has no name", path, i);
			goto out;
		}
		snprintf(what, sizeof(what), "%s: tensor '%s'", path, tensors[i].name);
		err = wsn__check_host_contiguous(t, what);
		if (err)
			goto out;
		info[i].name = tensors[i].name;
		info[i].dtype = t->dtype;
		info[i].ndim = t->ndim;
		memcpy(info[i].shape, t->shape, sizeof(info[i].shape));
	}
	err = make_header(path, info, n, metadata, &hdr, &hlen, NULL);
	if (err)
		goto out;
	err = wsn_out_open(&o, path);
	if (err)
		goto out;
	err = wsn__out_write(&o, hdr, hlen);
	for (int i = 0; i < n && !err; i++)
		err = wsn__out_write(&o, tensors[i].t->data, (size_t)wsn__tensor_bytes(tensors[i].t));
	if (!err)
		err = wsn_out_commit(&o, true);
out:
	wsn_out_abort(&o);
	free(hdr);
	free(info);
	return err;
}
