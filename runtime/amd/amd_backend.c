/* SPDX-License-Identifier: MIT */
/* runtime/amd/amd_backend.c: AMD GPUs through the ROCT thunk (libhsakmt) and libdrm_amdgpu, loaded at run time. */
#include "backend.h"
#include "core/error.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <hsakmt.h>
#include <libdrm/amdgpu.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * What this backend does today: find the KFD driver, list the GPU nodes of its topology with
 * their properties (CUs, LDS, memory, clocks, PCI location, and from libdrm_amdgpu the memory bus
 * width and clock). Memory, streams and kernels on AMD GPUs are not implemented: those calls
 * answer WSN_ENOTSUP, and `wsnorm devices` lists the devices so a node can be inventoried.
 */

#define AMD_MAX_DEVICES 64

struct thunk {
	void *lib, *drm;
	HSAKMT_STATUS (*open_kfd)(void);
	HSAKMT_STATUS (*close_kfd)(void);
	HSAKMT_STATUS (*acquire)(HsaSystemProperties *);
	HSAKMT_STATUS (*release)(void);
	HSAKMT_STATUS (*node)(HSAuint32, HsaNodeProperties *);
	int (*drm_init)(int, uint32_t *, uint32_t *, amdgpu_device_handle *);
	int (*drm_deinit)(amdgpu_device_handle);
	int (*drm_gpu_info)(amdgpu_device_handle, struct amdgpu_gpu_info *);
};

static struct thunk kt;
static struct wsn_device_info devs[AMD_MAX_DEVICES];
static int ndevs;

static int load(void)
{
	if (!(kt.lib = dlopen("libhsakmt.so.1", RTLD_NOW | RTLD_LOCAL)))
		return wsn__error(WSN_ENODRIVER, "no AMD driver stack: libhsakmt.so.1: %s", dlerror());
	kt.open_kfd = (HSAKMT_STATUS(*)(void))dlsym(kt.lib, "hsaKmtOpenKFD");
	kt.close_kfd = (HSAKMT_STATUS(*)(void))dlsym(kt.lib, "hsaKmtCloseKFD");
	kt.acquire = (HSAKMT_STATUS(*)(HsaSystemProperties *))dlsym(kt.lib, "hsaKmtAcquireSystemProperties");
	kt.release = (HSAKMT_STATUS(*)(void))dlsym(kt.lib, "hsaKmtReleaseSystemProperties");
	kt.node = (HSAKMT_STATUS(*)(HSAuint32, HsaNodeProperties *))dlsym(kt.lib, "hsaKmtGetNodeProperties");
	if (!kt.open_kfd || !kt.close_kfd || !kt.acquire || !kt.release || !kt.node) {
		dlclose(kt.lib);
		memset(&kt, 0, sizeof(kt));
		return wsn__error(WSN_ENODRIVER, "libhsakmt.so.1 lacks the topology entry points");
	}
	/* libdrm_amdgpu is optional: it adds the memory bus width and clock */
	if ((kt.drm = dlopen("libdrm_amdgpu.so.1", RTLD_NOW | RTLD_LOCAL))) {
		kt.drm_init = (int (*)(int, uint32_t *, uint32_t *, amdgpu_device_handle *))dlsym(
			kt.drm, "amdgpu_device_initialize");
		kt.drm_deinit = (int (*)(amdgpu_device_handle))dlsym(kt.drm, "amdgpu_device_deinitialize");
		kt.drm_gpu_info = (int (*)(amdgpu_device_handle, struct amdgpu_gpu_info *))dlsym(
			kt.drm, "amdgpu_query_gpu_info");
	}
	return 0;
}

/* Memory details from the DRM render node, when libdrm_amdgpu can open it. */
static void drm_details(int minor, struct wsn_device_info *d)
{
	struct amdgpu_gpu_info gi;
	amdgpu_device_handle h;
	uint32_t major_v, minor_v;
	char path[64];
	int fd;

	if (!kt.drm_init || !kt.drm_deinit || !kt.drm_gpu_info || minor <= 0)
		return;
	snprintf(path, sizeof(path), "/dev/dri/renderD%d", minor);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return;
	if (kt.drm_init(fd, &major_v, &minor_v, &h) == 0) {
		memset(&gi, 0, sizeof(gi));
		if (kt.drm_gpu_info(h, &gi) == 0) {
			d->mem_clock_khz = (int)gi.max_memory_clk;
			d->mem_bus_width = (int)gi.vram_bit_width;
			/* HBM/GDDR transfer twice per clock */
			d->mem_peak_gbs = 2.0 * (double)gi.max_memory_clk * 1e3 * gi.vram_bit_width / 8 / 1e9;
		}
		kt.drm_deinit(h);
	}
	close(fd);
}

static void fill(const HsaNodeProperties *np, struct wsn_device_info *d)
{
	size_t i;

	memset(d, 0, sizeof(*d));
	for (i = 0; i + 1 < sizeof(d->name) && i < HSA_PUBLIC_NAME_SIZE && np->MarketingName[i]; i++)
		d->name[i] = np->MarketingName[i] < 128 ? (char)np->MarketingName[i] : '?';
	d->name[i] = '\0';
	if (!d->name[0])
		snprintf(d->name, sizeof(d->name), "AMD GPU %04x", np->DeviceId);
	snprintf(d->arch, sizeof(d->arch), "gfx%u%x%x", (unsigned)np->EngineId.ui32.Major,
		 (unsigned)np->EngineId.ui32.Minor & 0xf, (unsigned)np->EngineId.ui32.Stepping & 0xf);
	d->multiprocessors = np->NumSIMDPerCU ? (int)(np->NumFComputeCores / np->NumSIMDPerCU) : 0;
	d->total_mem = (int64_t)np->LocalMemSize;
	d->smem_per_block_optin = (int)np->LDSSizeInKB * 1024;
	d->smem_per_sm = d->smem_per_block_optin;
	snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "%04x:%02x:%02x.%x", np->Domain, np->LocationId >> 8,
		 (np->LocationId >> 3) & 0x1f, np->LocationId & 7);
	drm_details(np->DrmRenderMinor, d);
}

static int amd_init(struct wsn_backend_info *info)
{
	HsaSystemProperties sp;
	HSAKMT_STATUS st;
	int err;

	if ((err = load()) < 0) {
		snprintf(info->note, sizeof(info->note), "%s", wsn_last_error());
		return err;
	}
	st = kt.open_kfd();
	/* already opened (by ROCm in this process): the thunk counted this open too, and the close below undoes it */
	if (st != HSAKMT_STATUS_SUCCESS && st != HSAKMT_STATUS_KERNEL_ALREADY_OPENED) {
		snprintf(info->note, sizeof(info->note), "no AMD GPU: the KFD driver (/dev/kfd) could not be opened");
		return WSN_ENODRIVER;
	}
	memset(&sp, 0, sizeof(sp));
	if (kt.acquire(&sp) != HSAKMT_STATUS_SUCCESS) {
		kt.close_kfd();
		snprintf(info->note, sizeof(info->note), "hsaKmtAcquireSystemProperties failed");
		return WSN_EDRIVER;
	}
	for (HSAuint32 n = 0; n < sp.NumNodes && ndevs < AMD_MAX_DEVICES; n++) {
		HsaNodeProperties np;
		memset(&np, 0, sizeof(np));
		if (kt.node(n, &np) != HSAKMT_STATUS_SUCCESS || np.NumFComputeCores == 0)
			continue; /* CPU-only node */
		fill(&np, &devs[ndevs++]);
	}
	kt.release();
	kt.close_kfd();
	info->device_count = ndevs;
	snprintf(info->note, sizeof(info->note), ndevs ? "lists devices only: no kernels run on AMD GPUs yet"
						       : "KFD driver present but no GPU node");
	return ndevs ? 0 : WSN_ENODEV;
}

static int amd_device_info(int index, struct wsn_device_info *out)
{
	if (index < 0 || index >= ndevs)
		return wsn__error(WSN_ENODEV, "amd:%d: no such device", index);
	*out = devs[index];
	return 0;
}

static int amd_device_open(int index, void **ctx)
{
	if (index < 0 || index >= ndevs)
		return wsn__error(WSN_ENODEV, "amd:%d: no such device", index);
	*ctx = &devs[index];
	return 0;
}

static void amd_device_close(void *ctx)
{
	(void)ctx;
}

const struct wsn__backend_ops wsn__amd_ops = {
	.name = "amd",
	.exec_mem = WSN_MEM_DEVICE,
	.init = amd_init,
	.device_info = amd_device_info,
	.device_open = amd_device_open,
	.device_close = amd_device_close,
	/* no plan_create/execute: plans on AMD devices fail with WSN_ENOTSUP, and "auto" skips them */
};
