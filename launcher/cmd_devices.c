/* SPDX-License-Identifier: MIT */
/* launcher/cmd_devices.c: `wsnorm devices`: backends and devices with their properties. */
#include "cli.h"

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "Usage: %s devices [--json]\n"
		   "List every backend (cpu, cuda, amd), whether it is built and available and why not,\n"
		   "and the properties of each device. The amd backend lists devices only: no kernels\n"
		   "run on AMD GPUs yet.\n\n"
		   "  --json      machine-readable output\n"
		   "  -h, --help  show this help\n",
		cli_prog);
}

static json_t *device_json(const struct wsn_device_info *d)
{
	json_t *o = json_object();

	json_object_set_new(o, "spec", json_string(d->spec));
	json_object_set_new(o, "backend", json_string(d->backend));
	json_object_set_new(o, "index", json_integer(d->index));
	json_object_set_new(o, "name", json_string(d->name));
	json_object_set_new(o, "arch", json_string(d->arch));
	json_object_set_new(o, "multiprocessors", json_integer(d->multiprocessors));
	json_object_set_new(o, "total_mem", json_integer(d->total_mem));
	if (strcmp(d->backend, "cpu")) {
		json_object_set_new(o, "compute_capability", json_sprintf("%d.%d", d->cc_major, d->cc_minor));
		json_object_set_new(o, "smem_per_block_optin", json_integer(d->smem_per_block_optin));
		json_object_set_new(o, "smem_per_sm", json_integer(d->smem_per_sm));
		json_object_set_new(o, "regs_per_sm", json_integer(d->regs_per_sm));
		json_object_set_new(o, "l2_bytes", json_integer(d->l2_bytes));
		json_object_set_new(o, "mem_clock_khz", json_integer(d->mem_clock_khz));
		json_object_set_new(o, "mem_bus_width", json_integer(d->mem_bus_width));
		json_object_set_new(o, "mem_peak_gbs", cli_json_real(d->mem_peak_gbs));
		json_object_set_new(o, "pci_bus_id", json_string(d->pci_bus_id));
		json_object_set_new(o, "pcie_gen", json_integer(d->pcie_gen));
		json_object_set_new(o, "pcie_width", json_integer(d->pcie_width));
		json_object_set_new(o, "cluster_launch", json_boolean(d->cluster_launch));
		json_object_set_new(o, "driver_version", json_integer(d->driver_version));
	}
	return o;
}

static void device_text(const struct wsn_device_info *d)
{
	printf("  %-8s %s\n", d->spec, d->name);
	if (!strcmp(d->backend, "cpu")) {
		printf("           %s, %d hardware thread%s, %.1f GiB memory\n", d->arch, d->multiprocessors,
		       d->multiprocessors == 1 ? "" : "s", (double)d->total_mem / (1 << 30));
		return;
	}
	printf("           compute capability %d.%d (%s), %d SMs, %.1f GiB memory\n", d->cc_major, d->cc_minor,
	       d->arch, d->multiprocessors, (double)d->total_mem / (1 << 30));
	printf("           shared memory %d B/block opt-in, %d B/SM; %d registers/SM; L2 %.1f MiB\n",
	       d->smem_per_block_optin, d->smem_per_sm, d->regs_per_sm, (double)d->l2_bytes / (1 << 20));
	printf("           memory clock %d MHz x %d bit (peak %.0f GB/s)\n", d->mem_clock_khz / 1000,
	       d->mem_bus_width, d->mem_peak_gbs);
	if (d->pcie_gen)
		printf("           PCIe %s: Gen%d x%d\n", d->pci_bus_id, d->pcie_gen, d->pcie_width);
	else if (d->pci_bus_id[0])
		printf("           PCI %s\n", d->pci_bus_id);
	printf("           clusters %s; driver %d.%d\n", d->cluster_launch ? "yes" : "no",
	       d->driver_version / 1000, d->driver_version % 1000 / 10);
}

int cmd_devices(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	json_t *root = NULL, *jb = NULL;
	int json = 0, c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':':
		default: return cli_option_error("devices", c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error("devices", "unexpected argument '%s'", argv[optind]);
	if (json) {
		root = json_object();
		jb = json_array();
		json_object_set_new(root, "version", json_string(wsn_version()));
	}
	for (int b = 0; b < wsn_backend_count(); b++) {
		struct wsn_backend_info bi;
		json_t *jdevs = json ? json_array() : NULL;

		if (wsn_backend_info(b, &bi) < 0)
			continue;
		if (!json)
			printf("%s: %s%s%s\n", bi.name,
			       !bi.built ? "not built" : bi.available ? "available" : "unavailable",
			       bi.note[0] ? " - " : "", bi.note);
		for (int i = 0; i < wsn_device_count(); i++) {
			struct wsn_device_info di;
			if (wsn_device_info_at(i, &di) < 0 || strcmp(di.backend, bi.name))
				continue;
			if (json)
				json_array_append_new(jdevs, device_json(&di));
			else
				device_text(&di);
		}
		if (json) {
			json_t *o = json_object();
			json_object_set_new(o, "name", json_string(bi.name));
			json_object_set_new(o, "built", json_boolean(bi.built));
			json_object_set_new(o, "available", json_boolean(bi.available));
			json_object_set_new(o, "note", json_string(bi.note));
			json_object_set_new(o, "devices", jdevs);
			json_array_append_new(jb, o);
		}
	}
	if (json) {
		json_object_set_new(root, "backends", jb);
		cli_json_print(root);
	}
	return EXIT_PASS;
}
