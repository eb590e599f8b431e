/* SPDX-License-Identifier: MIT */
/* runtime/core/error.c: error names and messages from the one table, and per-thread failure details. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DETAIL_MAX WSN__DETAIL_MAX

static _Thread_local char detail[DETAIL_MAX];
static _Thread_local int drv_code;
static _Thread_local const char *drv_name;
static _Thread_local int drv_valid;

WSN_API const char *wsn_version(void)
{
	return WSN_VERSION_STRING;
}

WSN_API const char *wsn_strerror(int err)
{
	switch (err) {
#define XX(name, val, msg) case WSN_##name: return msg;
	WSN_ERRNO_MAP(XX)
#undef XX
	case 0: return "success";
	default: return "unknown error";
	}
}

WSN_API const char *wsn_err_name(int err)
{
	switch (err) {
#define XX(name, val, msg) case WSN_##name: return #name;
	WSN_ERRNO_MAP(XX)
#undef XX
	case 0: return "OK";
	default: return "UNKNOWN";
	}
}

WSN_API const char *wsn_last_error(void)
{
	return detail;
}

WSN_API int wsn_last_driver_status(int *code, const char **name)
{
	if (!drv_valid)
		return WSN_ENOENT;
	if (code)
		*code = drv_code;
	if (name)
		*name = drv_name ? drv_name : "";
	return 0;
}

/* Bytes of the UTF-8 character at p (2-4), or 0 when p does not start a valid one (overlong, surrogate, past U+10FFFF). */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
	unsigned char lo = p[0] == 0xe0 ? 0xa0 : p[0] == 0xf0 ? 0x90 : 0x80;
	unsigned char hi = p[0] == 0xed ? 0x9f : p[0] == 0xf4 ? 0x8f : 0xbf;

	if (n && (p[1] < lo || p[1] > hi))
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

WSN_API size_t wsn_text_escape(char *dst, size_t cap, const char *src)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t o = 0, n;

	if (!dst || !cap)
		return 0;
	while (src && *p) {
		if (*p < 0x80 && *p >= 0x20 && *p != 0x7f) {
			if (o + 1 >= cap)
				break;
			dst[o++] = (char)*p++;
		} else if (*p >= 0x80 && (n = utf8_len(p))) {
			if (o + n >= cap)
				break; /* a whole character or none */
			memcpy(dst + o, p, n);
			o += n;
			p += n;
		} else {
			if (o + 4 >= cap)
				break;
			o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", *p++);
		}
	}
	dst[o] = '\0';
	return o;
}

/*
 * A message may quote bytes from a file (tensor names, metadata, a JSON parser's context): control
 * characters and invalid UTF-8 become \xNN, so that printing the message cannot drive the user's
 * terminal and JSON can carry it.
 */
static void escape_controls(char *s, size_t cap)
{
	char out[DETAIL_MAX];

	wsn_text_escape(out, sizeof(out), s);
	snprintf(s, cap, "%s", out);
}

static void set_detail(const char *fmt, va_list ap)
{
	vsnprintf(detail, sizeof(detail), fmt, ap);
	escape_controls(detail, sizeof(detail));
}

int wsn__error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_detail(fmt, ap);
	va_end(ap);
	drv_valid = 0;
	return err;
}

int wsn__driver_error(int err, int raw, const char *raw_name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_detail(fmt, ap);
	va_end(ap);
	drv_code = raw;
	drv_name = raw_name;
	drv_valid = 1;
	return err;
}

int wsn__error_context(int err, const char *fmt, ...)
{
	char msg[DETAIL_MAX];
	const char *rest = detail[0] ? detail : wsn_strerror(err);
	size_t n, m;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = strlen(msg);
	/* "plan ... on cuda:0: plan: ..." names the step once: the detail loses the context's first word */
	m = strcspn(msg, " :");
	if (m && !strncmp(rest, msg, m) && !strncmp(rest + m, ": ", 2) && rest[m + 2])
		rest += m + 2;
	if (n + 2 < sizeof(msg)) {
		memcpy(msg + n, ": ", 2);
		n += 2;
		m = strlen(rest);
		if (m > sizeof(msg) - 1 - n)
			m = sizeof(msg) - 1 - n;
		memcpy(msg + n, rest, m);
		n += m;
	}
	msg[n] = '\0';
	memcpy(detail, msg, n + 1);
	escape_controls(detail, sizeof(detail));
	return err;
}

void wsn__error_save(struct wsn__error_saved *s)
{
	memcpy(s->detail, detail, sizeof(s->detail));
	s->code = drv_code;
	s->name = drv_name;
	s->valid = drv_valid;
}

void wsn__error_restore(const struct wsn__error_saved *s)
{
	memcpy(detail, s->detail, sizeof(detail));
	drv_code = s->code;
	drv_name = s->name;
	drv_valid = s->valid;
}
