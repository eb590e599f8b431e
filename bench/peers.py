#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/peers.py: wsnorm beside the norms a PyTorch user has, on one GPU, with one timer.

wsnorm runs through libwsnorm (ctypes) on PyTorch's own tensors and on PyTorch's current stream
(wsn_stream_wrap); the peers are PyTorch eager (ATen), torch.compile (Inductor), Liger's Triton
kernels and flash-attention's Triton layer_norm, the last two where they can be imported (put
their sources on --peer-path if they are not installed). Every implementation is timed the same
way: each call alone, the L2 flushed before it by a fill of a buffer four times the L2 (at least
64 MiB), CUDA events around the call, the median of --calls calls (the semantics of Triton's
do_bench and of `wsnorm bench --timing single`). TB/s counts the bytes wsn_op_min_bytes counts for
the op; the copy bandwidth is a device-to-device copy timed in the same run. Each implementation's
output is compared with PyTorch in float32 before it is timed; one that disagrees is reported,
not timed.

Usage: python3 bench/peers.py [--lib PATH] [--device N] [--op LIST] [--dtype bf16|f16]
                              [--hidden LIST] [--rows LIST] [--calls N] [--peers LIST]
                              [--peer-path DIR] [--json FILE]
Exit status: 0, 1 when an output disagreed, 2 on a usage error, 3 when wsnorm failed.
"""
import argparse
import ctypes as C
import json
import math
import os
import statistics
import sys
import zlib

OPS = ("layernorm-fwd", "layernorm-bwd", "rmsnorm-fwd", "rmsnorm-bwd")
PEERS = ("eager", "compile", "liger", "flash")
WSN_OP = {name: i for i, name in enumerate(OPS)}  # enum wsn_op
WSN_DTYPE = {"f32": 0, "f16": 1, "bf16": 2}        # enum wsn_dtype
WSN_MEM_DEVICE = 1
WSN_MAX_DIMS = 4
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3}            # relative L2 error against float32 PyTorch


class Tensor(C.Structure):  # struct wsn_tensor
    _fields_ = [("data", C.c_void_p), ("dtype", C.c_int), ("mem", C.c_int), ("ndim", C.c_int),
                ("shape", C.c_int64 * WSN_MAX_DIMS), ("stride", C.c_int64 * WSN_MAX_DIMS)]


class Args(C.Structure):  # struct wsn_args
    _fields_ = [(n, Tensor) for n in ("x", "dy", "weight", "bias", "y", "dx", "dweight", "dbias", "mean", "rstd")]


class PlanOptions(C.Structure):  # struct wsn_plan_options
    _fields_ = [("eps", C.c_float)] + [(n, C.c_int) for n in (
        "has_weight", "has_bias", "approach", "threads", "block_threads", "groups", "unroll", "stages",
        "cluster", "arch", "autotune")]


def fail(status, msg):
    print(f"peers.py: {msg}", file=sys.stderr)
    sys.exit(status)


def load_wsnorm(path):
    """libwsnorm with its functions typed, after checking that the structures above match it."""
    candidates = [path] if path else [os.environ.get("WSNORM_LIB", ""), "build/.libs/libwsnorm.so",
                                      "libwsnorm.so.0"]
    errors = []
    for cand in filter(None, candidates):
        try:
            lib = C.CDLL(cand)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        fail(2, "cannot load libwsnorm (--lib PATH or WSNORM_LIB): " + "; ".join(errors))
    vp, i64 = C.c_void_p, C.c_int64
    sig = {
        "wsn_last_error": (C.c_char_p, []),
        "wsn_device_open": (C.c_int, [C.c_char_p, C.POINTER(vp)]),
        "wsn_device_close": (None, [vp]),
        "wsn_stream_wrap": (C.c_int, [vp, vp, C.POINTER(vp)]),
        "wsn_stream_destroy": (C.c_int, [vp]),
        "wsn_plan_options_init": (None, [C.POINTER(PlanOptions), C.c_int]),
        "wsn_plan_create": (C.c_int, [vp, C.c_int, i64, i64, C.c_int, C.POINTER(PlanOptions), C.POINTER(vp)]),
        "wsn_plan_destroy": (None, [vp]),
        "wsn_plan_execute": (C.c_int, [vp, C.POINTER(Args), vp]),
        "wsn_plan_describe": (C.c_int, [vp, C.c_char_p, C.c_size_t]),
        "wsn_op_min_bytes": (i64, [C.c_int, i64, i64, C.c_int, C.c_int, C.c_int]),
        "wsn_tensor_2d": (C.c_int, [C.POINTER(Tensor), vp, C.c_int, C.c_int, i64, i64]),
        "wsn_tensor_1d": (C.c_int, [C.POINTER(Tensor), vp, C.c_int, C.c_int, i64]),
    }
    for name, (res, argt) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, argt
    # the layout check: what the library writes must land where these structures read it
    o = PlanOptions()
    lib.wsn_plan_options_init(C.byref(o), WSN_OP["layernorm-fwd"])
    t = Tensor()
    lib.wsn_tensor_2d(C.byref(t), 16, WSN_DTYPE["bf16"], WSN_MEM_DEVICE, 3, 5)
    if not (abs(o.eps - 1e-5) < 1e-9 and o.has_weight == 1 and o.has_bias == 1 and o.autotune == 0
            and t.data == 16 and t.ndim == 2 and list(t.shape[:2]) == [3, 5] and list(t.stride[:2]) == [5, 1]):
        fail(2, "this libwsnorm's wsn_plan_options or wsn_tensor differ from the script's: update the script")
    return lib


def wsn_check(lib, err, what):
    if err < 0:
        fail(3, f"wsnorm: {what}: {lib.wsn_last_error().decode(errors='replace')}")


class Timer:
    """Single calls after an L2 flush, events around each, the median in milliseconds."""

    def __init__(self, torch, calls):
        self.torch, self.calls = torch, calls
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.flush = torch.empty(max(4 * l2, 64 << 20), dtype=torch.int8, device="cuda")
        self.ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                   for _ in range(calls)]

    def single(self, fn):
        for _ in range(3):  # warm-up: compilation, autotuning, allocator
            fn()
        self.torch.cuda.synchronize()
        for i, (e0, e1) in enumerate(self.ev):
            self.flush.fill_(i & 0x7f)
            e0.record()
            fn()
            e1.record()
        self.torch.cuda.synchronize()
        return statistics.median(e0.elapsed_time(e1) for e0, e1 in self.ev)

    def copy_tbs(self, nbytes=1 << 30, iters=10):
        """Device-to-device copy bandwidth (read + write), back to back as wsnorm bench times it."""
        torch = self.torch
        a = torch.empty(nbytes, dtype=torch.int8, device="cuda")
        b = torch.empty_like(a)
        b.copy_(a)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(iters):
            e0.record()
            for _ in range(4):
                b.copy_(a)
            e1.record()
            torch.cuda.synchronize()
            times.append(e0.elapsed_time(e1) / 4)
        return 2 * nbytes / (statistics.median(times) * 1e-3) / 1e12


class Point:
    """One op, dtype, hidden and rows: inputs, PyTorch's float32 outputs, and the callables."""

    def __init__(self, torch, op, dtype, hidden, rows, eps=1e-5):
        self.torch, self.op, self.dtype, self.hidden, self.rows, self.eps = torch, op, dtype, hidden, rows, eps
        self.ln, self.bwd = op.startswith("layernorm"), op.endswith("bwd")
        tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        g = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{op} {dtype} {hidden} {rows}".encode()))
        self.x = (torch.randn(rows, hidden, device="cuda", generator=g) + 0.25).to(tdt)
        self.w = (1 + 0.25 * torch.randn(hidden, device="cuda", generator=g)).to(tdt)
        self.b = (0.1 * torch.randn(hidden, device="cuda", generator=g)).to(tdt) if self.ln else None
        self.dy = torch.randn(rows, hidden, device="cuda", generator=g).to(tdt)
        self.ref = self.reference()

    def forward_fn(self, F, x, w, b):
        if self.ln:
            return F.layer_norm(x, (self.hidden,), w, b, self.eps)
        return F.rms_norm(x, (self.hidden,), w, self.eps)

    def reference(self):
        """PyTorch in float32: y, or dx, dweight (and dbias)."""
        torch, F = self.torch, self.torch.nn.functional
        x = self.x.float().requires_grad_(self.bwd)
        w = self.w.float().requires_grad_(self.bwd)
        b = self.b.float().requires_grad_(self.bwd) if self.ln else None
        y = self.forward_fn(F, x, w, b)
        if not self.bwd:
            return [y.detach()]
        return [t.detach() for t in torch.autograd.grad(y, [t for t in (x, w, b) if t is not None], self.dy.float())]

    def autograd_fns(self, forward):
        """A callable for `forward` (x, w, b) -> y: the forward itself, or for a backward op the
        gradients of one recorded forward; and a callable giving the outputs to check."""
        torch = self.torch
        x = self.x.detach().requires_grad_(self.bwd)
        w = self.w.detach().requires_grad_(self.bwd)
        b = self.b.detach().requires_grad_(self.bwd) if self.ln else None
        if not self.bwd:
            return (lambda: forward(x, w, b)), (lambda: [forward(x, w, b)])
        y = forward(x, w, b)
        inputs = [t for t in (x, w, b) if t is not None]
        grad = lambda: torch.autograd.grad(y, inputs, self.dy, retain_graph=True)  # noqa: E731
        return grad, (lambda: list(grad()))

    def agrees(self, outs):
        """The largest relative L2 error of outs against the float32 reference."""
        worst = 0.0
        for got, ref in zip(outs, self.ref):
            got = got.float()
            den = ref.norm().item() or 1.0
            err = (got - ref).norm().item() / den
            worst = max(worst, err if math.isfinite(err) else math.inf)
        return worst


def peer_impls(torch, pt, wanted, peer_errors):
    """name -> (timed callable, outputs callable) for every peer wanted and available here."""
    F = torch.nn.functional
    impls = {}
    if "eager" in wanted:
        impls["eager"] = pt.autograd_fns(lambda x, w, b: pt.forward_fn(F, x, w, b))
    if "compile" in wanted:
        impls["compile"] = pt.autograd_fns(torch.compile(lambda x, w, b: pt.forward_fn(F, x, w, b), dynamic=False))
    if "liger" in wanted:
        liger_impl(pt, impls, peer_errors)
    if "flash" in wanted:
        flash_impl(pt, impls, peer_errors)
    return impls


def liger_impl(pt, impls, peer_errors):
    try:
        if pt.ln:
            from liger_kernel.ops.layer_norm import LigerLayerNormFunction as Liger
            impls["liger"] = pt.autograd_fns(lambda x, w, b: Liger.apply(x, w, b, pt.eps))
        else:
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction as Liger
            impls["liger"] = pt.autograd_fns(lambda x, w, b: Liger.apply(x, w, pt.eps, 0.0, "llama", False))
    except Exception as e:  # not installed, or not importable with this PyTorch/Triton
        peer_errors.setdefault("liger", f"{type(e).__name__}: {e}")


def flash_impl(pt, impls, peer_errors):
    try:
        from flash_attn.ops.triton.layer_norm import layer_norm_fn, rms_norm_fn
        if pt.ln:
            impls["flash"] = pt.autograd_fns(lambda x, w, b: layer_norm_fn(x, w, b, eps=pt.eps))
        else:
            impls["flash"] = pt.autograd_fns(lambda x, w, b: rms_norm_fn(x, w, None, eps=pt.eps))
    except Exception as e:
        peer_errors.setdefault("flash", f"{type(e).__name__}: {e}")


class Wsnorm:
    """pt's op through libwsnorm on PyTorch's tensors and current stream."""

    def __init__(self, lib, dev, stream, pt):
        torch = pt.torch
        self.lib, self.pt, self.stream = lib, pt, stream
        dt, op = WSN_DTYPE[pt.dtype], WSN_OP[pt.op]
        rows, hidden = pt.rows, pt.hidden
        self.y = torch.empty_like(pt.x)
        self.mean = torch.empty(rows, device="cuda", dtype=torch.float32)
        self.rstd = torch.empty(rows, device="cuda", dtype=torch.float32)
        self.dw = torch.empty_like(pt.w)
        self.db = torch.empty_like(pt.b) if pt.ln else None
        self.plan = self.make_plan(dev, op, dt)
        a = Args()
        T2, T1, D = lib.wsn_tensor_2d, lib.wsn_tensor_1d, WSN_MEM_DEVICE
        T2(C.byref(a.x), pt.x.data_ptr(), dt, D, rows, hidden)
        T1(C.byref(a.weight), pt.w.data_ptr(), dt, D, hidden)
        if pt.ln:
            T1(C.byref(a.bias), pt.b.data_ptr(), dt, D, hidden)
            T1(C.byref(a.mean), self.mean.data_ptr(), 0, D, rows)
        T1(C.byref(a.rstd), self.rstd.data_ptr(), 0, D, rows)
        if pt.bwd:  # the statistics from wsnorm's own forward
            fwd = Args()
            C.memmove(C.byref(fwd), C.byref(a), C.sizeof(Args))
            T2(C.byref(fwd.y), self.y.data_ptr(), dt, D, rows, hidden)
            plan = self.make_plan(dev, op - 1, dt)
            wsn_check(lib, lib.wsn_plan_execute(plan, C.byref(fwd), stream), "the forward for the statistics")
            torch.cuda.synchronize()
            lib.wsn_plan_destroy(plan)
            T2(C.byref(a.dy), pt.dy.data_ptr(), dt, D, rows, hidden)
            T2(C.byref(a.dx), self.y.data_ptr(), dt, D, rows, hidden)
            T1(C.byref(a.dweight), self.dw.data_ptr(), dt, D, hidden)
            if pt.ln:
                T1(C.byref(a.dbias), self.db.data_ptr(), dt, D, hidden)
        else:
            T2(C.byref(a.y), self.y.data_ptr(), dt, D, rows, hidden)
        self.args = a

    def make_plan(self, dev, op, dt):
        pt, lib = self.pt, self.lib
        o = PlanOptions()
        lib.wsn_plan_options_init(C.byref(o), op)
        o.eps, o.has_weight, o.has_bias = pt.eps, 1, int(pt.ln)
        plan = C.c_void_p()
        wsn_check(lib, lib.wsn_plan_create(dev, op, pt.rows, pt.hidden, dt, C.byref(o), C.byref(plan)),
                  f"planning {OPS[op]} {pt.dtype} hidden {pt.hidden}, {pt.rows} rows")
        return plan

    def approach(self):
        buf = C.create_string_buffer(8192)
        self.lib.wsn_plan_describe(self.plan, buf, len(buf))
        for line in buf.value.decode(errors="replace").splitlines():
            if line.startswith("approach:"):
                return line.split(":", 1)[1].split()[0]
        return "?"

    def __call__(self):
        wsn_check(self.lib, self.lib.wsn_plan_execute(self.plan, C.byref(self.args), self.stream), "executing")

    def outputs(self):
        self()
        pt = self.pt
        if not pt.bwd:
            return [self.y]
        return [self.y, self.dw] + ([self.db] if pt.ln else [])

    def close(self):
        self.lib.wsn_plan_destroy(self.plan)


def parse_list(text, conv):
    return [conv(v) for v in text.split(",") if v]


def size(text):
    mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", help="libwsnorm.so to load (default: $WSNORM_LIB, build/.libs, the loader's path)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    ap.add_argument("--op", default=",".join(OPS), help="ops, comma-separated (default all four)")
    ap.add_argument("--dtype", default="bf16", choices=sorted(TOLERANCE))
    ap.add_argument("--hidden", default="4096,16384,32768", help="hidden sizes (default 4096,16384,32768)")
    ap.add_argument("--rows", default="16384", help="row counts (default 16384)")
    ap.add_argument("--calls", type=int, default=100, help="single calls timed per implementation (default 100)")
    ap.add_argument("--peers", default=",".join(PEERS), help="peers, comma-separated (default all: "
                    "torch.compile and flash-attention's autotuning take minutes)")
    ap.add_argument("--peer-path", action="append", default=[], help="a directory to import peers from")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    try:
        ops, hiddens, rowss = parse_list(a.op, str), parse_list(a.hidden, size), parse_list(a.rows, size)
    except ValueError as e:
        fail(2, f"bad list: {e}")
    wanted = parse_list(a.peers, str)
    if any(op not in OPS for op in ops) or not ops or not hiddens or not rowss or a.calls < 1 or \
            any(p not in PEERS for p in wanted):
        fail(2, f"bad --op, --hidden, --rows, --calls or --peers (ops: {', '.join(OPS)}; peers: {', '.join(PEERS)})")
    sys.path[:0] = a.peer_path
    try:
        import torch
    except ImportError:
        fail(2, "PyTorch is not installed")
    if not torch.cuda.is_available():
        fail(2, "no CUDA device for PyTorch")
    torch.cuda.set_device(a.device)
    torch.cuda.init()
    lib = load_wsnorm(a.lib)
    dev, stream = C.c_void_p(), C.c_void_p()
    wsn_check(lib, lib.wsn_device_open(f"cuda:{a.device}".encode(), C.byref(dev)), f"opening cuda:{a.device}")
    wsn_check(lib, lib.wsn_stream_wrap(dev, torch.cuda.current_stream().cuda_stream, C.byref(stream)),
              "wrapping PyTorch's stream")
    timer = Timer(torch, a.calls)
    copy = timer.copy_tbs()
    props = torch.cuda.get_device_properties(a.device)
    print(f"{props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size >> 20} MiB; PyTorch "
          f"{torch.__version__}; copy {copy:.3f} TB/s (device to device, read + write); single calls after an "
          f"L2 flush, median of {a.calls}; TB/s over wsn_op_min_bytes")
    names = ["wsnorm"] + [p for p in PEERS if p in wanted]
    print("| op | dtype | hidden | rows | " + " | ".join(names) + " | wsnorm of copy | wsnorm / best peer | approach |")
    print("|---" * (len(names) + 7) + "|")
    results, peer_errors, status = [], {}, 0
    for op in ops:
        for hidden in hiddens:
            for rows in rowss:
                pt = Point(torch, op, a.dtype, hidden, rows)
                nbytes = lib.wsn_op_min_bytes(WSN_OP[op], rows, hidden, WSN_DTYPE[a.dtype], 1, int(pt.ln))
                ws = Wsnorm(lib, dev, stream, pt)
                impls = {"wsnorm": (ws, ws.outputs)}
                impls.update(peer_impls(torch, pt, wanted, peer_errors))
                tbs, errs = {}, {}
                for name, (fn, outs) in impls.items():
                    try:
                        errs[name] = pt.agrees(outs())
                        if errs[name] > TOLERANCE[a.dtype]:
                            print(f"peers.py: {name} {op} {a.dtype} {hidden} x {rows}: relative L2 error "
                                  f"{errs[name]:.3g} against float32 PyTorch: not timed", file=sys.stderr)
                            status = 1
                            continue
                        tbs[name] = nbytes / (timer.single(fn) * 1e-3) / 1e12
                    except Exception as e:  # a peer that cannot run this shape (Liger's size limit)
                        if name == "wsnorm":
                            raise
                        peer_errors.setdefault(f"{name} {op} {hidden}", f"{type(e).__name__}: {e}")
                peers = {k: v for k, v in tbs.items() if k != "wsnorm"}
                best = max(peers, key=peers.get) if peers else None
                ratio = tbs.get("wsnorm", 0) / peers[best] if best else None
                cells = [f"{tbs[n]:.3f}" if n in tbs else "-" for n in names]
                print(f"| {op} | {a.dtype} | {hidden} | {rows} | " + " | ".join(cells) +
                      f" | {tbs.get('wsnorm', 0) / copy:.3f} | " + (f"{ratio:.2f} ({best})" if best else "-") +
                      f" | {ws.approach()} |", flush=True)
                results.append({"op": op, "dtype": a.dtype, "hidden": hidden, "rows": rows, "bytes": nbytes,
                                "tbs": tbs, "rel_l2": errs, "best_peer": best, "ratio": ratio,
                                "wsnorm_fraction_of_copy": tbs.get("wsnorm", 0) / copy, "approach": ws.approach()})
                ws.close()
                del impls, pt
                torch.cuda.empty_cache()
    for name, why in sorted(peer_errors.items()):
        print(f"note: {name}: {why.splitlines()[0][:200]}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": props.name, "torch": torch.__version__, "copy_tbs": copy, "calls": a.calls,
                       "results": results, "peer_errors": peer_errors}, f, indent=1)
    lib.wsn_stream_destroy(stream)
    lib.wsn_device_close(dev)
    return status


if __name__ == "__main__":
    sys.exit(main())
