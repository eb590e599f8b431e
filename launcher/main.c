/* SPDX-License-Identifier: MIT */
/* launcher/main.c: the wsnorm command: dispatch to devices, gen, run, plan, emit, bench. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *what;
} cmds[] = {
	{ "devices", cmd_devices, "list backends and devices with their properties" },
	{ "gen", cmd_gen, "write seeded synthetic safetensors inputs for an op and shape" },
	{ "run", cmd_run, "read inputs through io_uring, run an op, verify, report throughput" },
	{ "bench", cmd_bench, "time kernels on device-resident data against the copy bandwidth" },
	{ "plan", cmd_plan, "print the plan (kernel family, parameters, budgets) for a shape" },
	{ "emit", cmd_emit, "print the generated PTX for a shape (no GPU needed)" },
};

/* The short usage misuse gets on stderr. */
static int misuse(const char *fmt, const char *arg)
{
	char clean[1024];

	wsn_text_escape(clean, sizeof(clean), arg); /* an argument may hold anything */
	fprintf(stderr, "%s: ", cli_prog);
	fprintf(stderr, fmt, clean);
	fprintf(stderr, "\nUsage: %s [-q|-v] COMMAND [OPTIONS]; commands:", cli_prog);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(stderr, " %s", cmds[i].name);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", cli_prog);
	return EXIT_USAGE;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [-q|-v] COMMAND [OPTIONS]\n"
		"LayerNorm and RMSNorm kernels on GPUs, with tensors streamed from files through io_uring.\n"
		"\nCommands:\n",
		cli_prog);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].what);
	fprintf(f,
		"\nOptions:\n"
		"  -h, --help     show this help and exit\n"
		"  -V, --version  show the version and exit\n"
		"  -q, --quiet    print only results and errors\n"
		"  -v, --verbose  print more detail\n"
		"\n'%s COMMAND --help' describes each command. 'wsnorm run --demo' runs a self-contained demo.\n"
		"Exit status: 0 pass, 1 verification mismatch or threshold missed, 2 usage error,\n"
		"3 runtime error.\n",
		cli_prog);
}

/* A report that could not be written is a runtime error, not a pass: stdout may be a pipe whose reader left
 * (SIGPIPE is ignored so that a command always gets to remove its temporary files) or a full disk. */
static int finish(int ret)
{
	int flushed = fflush(stdout) == 0, e = cli_stdout_error();

	if (flushed && !ferror(stdout))
		return ret;
	/* the stream's own record first: errno may be left from whatever ran since the failed write */
	if (!e)
		e = !flushed && errno ? errno : EIO;
	fprintf(stderr, "%s: cannot write to standard output: %s\n", cli_prog, strerror(e));
	return ret == EXIT_PASS ? EXIT_RUNTIME : ret;
}

int main(int argc, char **argv)
{
	int i = 1;

	signal(SIGPIPE, SIG_IGN);
	cli_stdout_open();

	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) { /* the options end: the command follows */
			i++;
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return finish(EXIT_PASS);
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("wsnorm %s (libwsnorm %s)\n", WSN_VERSION_STRING, wsn_version());
			return finish(EXIT_PASS);
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			cli_verbose = -1;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			cli_verbose++;
		} else {
			return misuse("unknown option '%s'", a);
		}
	}
	if (i >= argc) {
		return misuse("%s", "no command given");
	}
	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++)
		if (!strcmp(argv[i], cmds[c].name))
			return finish(cmds[c].fn(argc - i, argv + i));
	return misuse("unknown command '%s'", argv[i]);
}
