# gen_host_gaps.py: writes a trace whose host waits exceed the GPU's own work, for --pace on a
# real GPU (tools/gpu_checks.sh): eight training steps, each beginning with 30 ms of host work
# (loading a batch) before its input is copied to the device; then a forward and a backward pass
# of 40 kernels of 200 to 500 us, launched 15 us apart, allocating and freeing their
# activations; then the optimizer and a synchronization that waits for the device. The GPU is
# busy about 14 ms a step and idle while the host loads the next batch, so a replay that keeps
# the recorded host times (--pace) takes the recorded 8 x ~45 ms, and one that does not takes
# the GPU's ~14 ms a step.
#
#   python3 gen_host_gaps.py > host_gaps.jsonl
import json
import random

US = 1000
MS = 1000 * US
MIB = 1 << 20


def main():
    rng = random.Random(5)
    out = [{"memplay": 1, "name": "host_gaps", "source_format": "generated",
            "device_name": "H100", "device_memory": 85520809984, "device_index": 0,
            "allocator": "cuda", "batch_size": 32,
            "attrs": {"generator": "tests/gpu/gen_host_gaps.py"}}]
    t = 0          # the host's clock
    dev_free = 0   # when the device has finished everything launched so far
    addr = 1

    def launch(kind, **kw):
        """A device operation issued at the host's time: it starts when the device is free."""
        nonlocal t, dev_free
        start = max(dev_free, t + 5 * US)
        dev_free = start + kw["dur"]
        out.append(dict(kind=kind, ts=t, dev_ts=start, api_dur=5 * US, stream=0, **kw))
        t += 15 * US

    def host(kind, **kw):
        nonlocal t
        out.append(dict(kind=kind, ts=t, **kw))
        t += 2 * US

    weights = []
    for i in range(16):
        host("alloc", addr=addr, size=rng.randint(8, 64) * MIB, category="parameter", mem="device", stream=0)
        weights.append(addr)
        addr += 1
    host("host_alloc", addr=addr, size=64 * MIB, mem="pinned")
    staging = addr
    addr += 1
    for step in range(8):
        out.append(dict(kind="marker", ts=t, name="ProfilerStep#%d" % step, flags=["step_begin"], step=step))
        t += 30 * MS  # the host loads a batch; the device has nothing to do
        host("alloc", addr=addr, size=48 * MIB, category="input", mem="device", stream=0, step=step)
        batch = addr
        addr += 1
        launch("memcpy", size=48 * MIB, dir="h2d", mem="pinned", addr=staging, dur=900 * US, step=step)
        acts = []
        for k in range(20):  # forward: every layer keeps an activation
            host("alloc", addr=addr, size=rng.randint(16, 96) * MIB, category="activation", mem="device",
                 stream=0, step=step)
            acts.append(addr)
            addr += 1
            launch("kernel", name="forward_%d" % k, dur=rng.randint(200, 500) * US, step=step)
        for k in range(20):  # backward: each layer's activation goes once its gradient is made
            launch("kernel", name="backward_%d" % k, dur=rng.randint(200, 500) * US, step=step)
            host("free", addr=acts.pop(), stream=0, step=step)
        host("free", addr=batch, stream=0, step=step)
        launch("kernel", name="adam", dur=400 * US, step=step)
        wait = max(dev_free - t, 0) + 10 * US
        out.append(dict(kind="sync", ts=t, dur=wait, stream=0, step=step, name="cudaStreamSynchronize"))
        t += wait + 5 * US
    for a in weights:
        host("free", addr=a, stream=0)
    host("host_free", addr=staging, mem="pinned")
    for o in out:
        print(json.dumps(o, separators=(",", ":")))


main()
