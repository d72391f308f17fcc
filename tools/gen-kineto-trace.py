#!/usr/bin/env python3
"""gen-kineto-trace.py: writes a large synthetic PyTorch profiler (Kineto) trace, for measuring import speed.

The file has the layout and the event mix of a real Kineto trace recorded with
profile_memory=True (the V100 training trace among the real traces: of its events about 26%
are operators, 13% memory events, 9% kernels, 20% runtime calls, 30% flow events): per training
step a forward pass on the main thread and a backward pass on the autograd thread, operators
with nested operators and [memory] events, kernels, copies and memsets launched through runtime
calls, other runtime calls (cudaStreamIsCapturing, cudaEventQuery), flow events linking launches
to activities, ProfilerStep and Optimizer.step annotations. Like Kineto it
writes the CPU operators thread by thread, then the memory events thread by thread, then the
GPU activities each next to its runtime call, so an importer has to reorder. Memory events
carry a consistent Total Allocated over a baseline allocated before the window.

    tools/gen-kineto-trace.py --events 3000000 --out big.json [--seed 1] [--gzip]

--events is the number of trace events to write (whole steps are written, so approximately).
The output is the same for the same arguments. Memory use is constant: each section of the
file is written to a temporary file as it is generated, and the sections are joined at the end.
"""
import argparse
import gzip
import os
import random
import shutil
import sys
import tempfile

KERNEL_FWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
              "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
KERNEL_BWD = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
              "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >"
              "(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
              "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, "
              "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
              "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor"
              "<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})")
API = {"kernel": "cudaLaunchKernel", "gpu_memcpy": "cudaMemcpyAsync", "gpu_memset": "cudaMemsetAsync"}
MAIN, BWD = 1000, 1001
BASE_US = 1_700_000_000_000_000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=3_000_000, help="trace events to write (approximately)")
    ap.add_argument("--out", required=True, help="output path")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gzip", action="store_true", help="gzip the output")
    a = ap.parse_args()
    rnd = random.Random(a.seed)

    ops_per_step = 400
    per_step = 7842  # trace events one step writes (counted from the layout below)
    steps = max(1, a.events // per_step)
    allocated = 4 << 30   # the baseline: allocated before the window
    reserved = 12 << 30

    tmp = tempfile.mkdtemp(prefix="gen-kineto-")
    names = ["ops_bwd", "ops_main", "mem_bwd", "mem_main", "gpu"]
    sec = {k: open(os.path.join(tmp, k), "w", encoding="utf-8") for k in names}
    count = {"n": 0}

    def ev(section, text):
        sec[section].write(",\n  " + text)
        count["n"] += 1

    def op(section, tid, ts, dur, name, cat="cpu_op"):
        ev(section, '{"ph": "X", "cat": "%s", "name": "%s", "pid": 7, "tid": %d, "ts": %d, "dur": %d, "args": '
                    '{"External id": %d, "Ev Idx": %d}}' % (cat, name, tid, BASE_US + int(ts), max(1, int(dur)),
                                                            count["n"], count["n"]))

    def memory(section, tid, ts, addr, size):
        nonlocal allocated
        allocated += size
        ev(section, '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": %d, '
                    '"ts": %d, "args": {"Ev Idx": %d, "Device Type": 1, "Device Id": 0, "Addr": %d, "Bytes": %d, '
                    '"Total Allocated": %d, "Total Reserved": %d}}'
                    % (tid, BASE_US + int(ts), count["n"], addr, size, allocated, reserved))

    corr = [1000]

    def launch(kind, name, dev_ts, dur, tid, launch_ts, api_dur, nbytes=0):
        corr[0] += 1
        c = corr[0]
        if kind == "kernel":
            ev("gpu", '{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %d, "dur": %d, "args": '
                      '{"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": %d, '
                      '"registers per thread": 16, "shared memory": 0, "blocks per SM": 0.3, "warps per SM": 1.2, '
                      '"grid": [24, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 2}}'
                      % (name, BASE_US + int(dev_ts), max(1, int(dur)), c, c))
        else:
            ev("gpu", '{"ph": "X", "cat": "%s", "name": "%s", "pid": 0, "tid": 7, "ts": %d, "dur": %d, "args": '
                      '{"External id": %d, "device": 0, "context": 1, "stream": 7, "correlation": %d, "bytes": %d, '
                      '"memory bandwidth (GB/s)": 11.4}}' % (kind, name, BASE_US + int(dev_ts), int(dur), c, c, nbytes))
        ev("gpu", '{"ph": "f", "id": %d, "pid": 0, "tid": 7, "ts": %d, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
                  % (c, BASE_US + int(dev_ts)))
        ev("gpu", '{"ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": 7, "tid": %d, "ts": %d, "dur": %d, "args": '
                  '{"External id": %d, "cbid": 211, "correlation": %d}}'
                  % (API[kind], tid, BASE_US + int(launch_ts), int(api_dur), c, c))
        ev("gpu", '{"ph": "s", "id": %d, "pid": 7, "tid": %d, "ts": %d, "cat": "ac2g", "name": "ac2g"}'
                  % (c, tid, BASE_US + int(launch_ts)))

    def runtime_call(tid, ts, name):
        corr[0] += 1
        ev("gpu", '{"ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": 7, "tid": %d, "ts": %d, "dur": 2, "args": '
                  '{"External id": %d, "cbid": 317, "correlation": %d}}' % (name, tid, BASE_US + int(ts), corr[0], corr[0]))

    next_addr = [0x7F0000000000]
    free_addrs = []

    def new_addr():
        if free_addrs:
            return free_addrs.pop()
        next_addr[0] += 1 << 20
        return next_addr[0]

    t = 0.0
    for step in range(steps):
        start = t
        activations = []
        t += 5.0
        for i in range(ops_per_step):  # forward, on the main thread
            dur = rnd.uniform(20, 60)
            op("ops_main", MAIN, t, dur, rnd.choice(("aten::linear", "aten::mul", "aten::add", "aten::relu")))
            op("ops_main", MAIN, t + 0.5, dur - 1, rnd.choice(("aten::addmm", "aten::mul", "aten::add")))
            op("ops_main", MAIN, t + 1, 4, "aten::empty")
            size = rnd.choice((512, 4096, 1 << 20, 4 << 20, 16 << 20))
            addr = new_addr()
            memory("mem_main", MAIN, t + 2, addr, size)
            activations.append((addr, size))
            if i % 4 == 3:  # a temporary freed inside the operator
                ta = new_addr()
                memory("mem_main", MAIN, t + 3, ta, 8192)
                memory("mem_main", MAIN, t + dur - 1, ta, -8192)
                free_addrs.append(ta)
            runtime_call(MAIN, t + 4, rnd.choice(("cudaStreamIsCapturing", "cudaEventQuery",
                                                  "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags")))
            launch("kernel", KERNEL_FWD, t + dur + 30, rnd.uniform(2, 40), MAIN, t + 5, 7)
            if i % 10 == 0:
                launch("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", t + dur + 35, 12, MAIN, t + 6, 9, 147456)
            if i % 20 == 0:
                launch("gpu_memset", "Memset (Device)", t + dur + 36, 1, MAIN, t + 7, 5, 1408)
            t += dur + rnd.uniform(1, 5)
        t += 10
        for i in range(ops_per_step):  # backward, on the autograd thread
            dur = rnd.uniform(20, 60)
            op("ops_bwd", BWD, t, dur, "autograd::engine::evaluate_function: MulBackward0")
            op("ops_bwd", BWD, t + 1, dur - 2, "MulBackward0")
            op("ops_bwd", BWD, t + 1.5, 3, "aten::mul")
            if i % 4 == 1:  # a temporary of the backward pass
                ga = new_addr()
                memory("mem_bwd", BWD, t + 2, ga, 2 << 20)
                memory("mem_bwd", BWD, t + dur - 2, ga, -(2 << 20))
                free_addrs.append(ga)
            runtime_call(BWD, t + 4, rnd.choice(("cudaStreamIsCapturing", "cudaStreamWaitEvent")))
            addr, size = activations.pop()
            memory("mem_bwd", BWD, t + dur - 1, addr, -size)
            free_addrs.append(addr)
            launch("kernel", KERNEL_BWD, t + dur + 30, rnd.uniform(2, 40), BWD, t + 5, 6)
            t += dur + rnd.uniform(1, 5)
        op("ops_main", MAIN, t, 190, "Optimizer.step#SGD.step", "user_annotation")
        t += 200
        op("ops_main", MAIN, start, t - start, "ProfilerStep#%d" % step, "user_annotation")
        t += 5

    for f in sec.values():
        f.close()
    opener = gzip.open if a.gzip else open
    with opener(a.out, "wt", encoding="utf-8", newline="\n") as out:
        out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "Synthetic GPU", '
                  '"totalGlobalMem": 85899345920, "computeMajor": 8, "computeMinor": 0, "numSms": 108}\n  ],\n'
                  '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n  "traceEvents": [\n  '
                  '{"name": "process_name", "ph": "M", "ts": %d, "pid": 7, "tid": 0, "args": {"name": "python3"}}'
                  % BASE_US)
        for k in names:
            with open(os.path.join(tmp, k), encoding="utf-8") as f:
                shutil.copyfileobj(f, out, 1 << 20)
        out.write('\n  ],\n  "traceName": "synthetic"\n}\n')
    shutil.rmtree(tmp)
    print("%s: %d trace events, %d steps" % (a.out, count["n"] + 1, steps), file=sys.stderr)


if __name__ == "__main__":
    main()
