# gen_two_streams.py: writes a trace for the stream-ordered pool on a real GPU
# (tools/gpu_checks.sh): two streams, each allocating, running a kernel on and freeing
# blocks of 16 to 96 MiB, with a whole-device synchronization every 8 rounds, so that
# frees are still pending on one stream while the other allocates.
#
#   python3 gen_two_streams.py > two_streams.jsonl
import json
import random

MIB = 1 << 20


def main():
    rng = random.Random(11)
    out = [{"memplay": 1, "name": "two_streams", "source_format": "generated",
            "device_name": "H100", "device_memory": 85520809984, "device_index": 0,
            "allocator": "async", "attrs": {"generator": "tests/gpu/gen_two_streams.py"}}]
    ts, addr, live = 0, 1, {7: [], 8: []}

    def ev(kind, **kw):
        nonlocal ts
        ts += 1000
        out.append(dict(kind=kind, ts=ts, **kw))

    for rnd in range(64):
        for s in (7, 8):
            for _ in range(rng.randint(1, 3)):
                ev("alloc", device=0, stream=s, addr=addr, size=rng.randint(16, 96) * MIB, mem="device")
                live[s].append(addr)
                addr += 1
            ev("kernel", device=0, stream=s, name="work", dur=rng.randint(50, 400) * 1000)
            while len(live[s]) > 2:
                ev("free", device=0, stream=s, addr=live[s].pop(rng.randrange(len(live[s]))))
        if rnd % 8 == 7:
            ev("sync", device=0, stream=-1)
    for s in (7, 8):
        for a in live[s]:
            ev("free", device=0, stream=s, addr=a)
    ev("sync", device=0, stream=-1)
    for o in out:
        print(json.dumps(o, separators=(",", ":")))


main()
