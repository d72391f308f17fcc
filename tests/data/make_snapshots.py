#!/usr/bin/env python3
"""make_snapshots.py: writes the small PyTorch memory snapshots that memplay's tests import.

They are made by hand here, field for field in the layouts torch.cuda.memory._dump_snapshot()
writes (see docs/formats.md), and checked in: the tests themselves never need Python. Run it
again only to change them:  python3 tests/data/make_snapshots.py
It prints the figures the tests expect (tests/cli/test_import_snapshot_fixtures.sh).
"""
import os
import pickle
import pickletools

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "snapshots")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus")

MB = 1 << 20


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


# A few shared frames, as PyTorch shares them between entries.
F_ALLOC = frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "CUDACachingAllocator.cpp", 0)
F_FREE = frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free", "CUDACachingAllocator.cpp", 0)
F_FWD = frame("forward", "/work/model.py", 42)
F_BWD = frame("backward", "/work/train.py", 7)
F_MAIN = frame("<module>", "/work/train.py", 99)


def stack(*frames):
    return list(frames)


def entry(action, addr, size, t=None, frames=None, stream=0, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream}
    if t is not None:
        e["time_us"] = t
    e.update(extra)
    if frames is not None:
        e["frames"] = frames
    return e


def tiny():
    """A ring-buffer window on one device: blocks live before the first entry, both kinds."""
    base = 0x7F0000000000
    s_alloc = stack(F_ALLOC, F_FWD, F_MAIN)
    s_free = stack(F_FREE, F_BWD, F_MAIN)
    trace = [
        # freed before any alloc in the window: a preexisting block of 1000 bytes at base+0
        entry("free_requested", base, 1000, 100, s_free),
        entry("free_completed", base, 1000, 101, s_free),
        entry("alloc", base, 700, 110, s_alloc),
        entry("segment_alloc", base + 20 * MB, 2 * MB, 120, s_alloc),
        entry("alloc", base + 20 * MB, 4096, 121, s_alloc, compile_context="Torch-Compiled Region: 0/0"),
        entry("free_requested", base + 20 * MB, 4096, 130, s_free, user_metadata="step 1"),
        entry("free_completed", base + 20 * MB, 4096, 131, s_free),
        entry("alloc", base + 20 * MB, 2048, 140, s_alloc),
    ]
    segments = [
        {"device": 0, "address": base, "total_size": 20 * MB, "allocated_size": 1536 + 3 * MB,
         "active_size": 1536 + 3 * MB, "requested_size": 700 + 3 * MB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": s_alloc,
         "blocks": [
             {"address": base, "size": 1024, "requested_size": 700, "state": "active_allocated", "frames": s_alloc},
             {"address": base + 1024, "size": 512, "requested_size": 0, "state": "inactive", "frames": []},
             # live in the final state and never allocated in the trace: preexisting
             {"address": base + 1536, "size": 3 * MB, "requested_size": 3 * MB, "state": "active_allocated",
              "frames": s_alloc},
             {"address": base + 1536 + 3 * MB, "size": 20 * MB - 1536 - 3 * MB, "requested_size": 0,
              "state": "inactive", "frames": []},
         ]},
        {"device": 0, "address": base + 20 * MB, "total_size": 2 * MB, "allocated_size": 2048, "active_size": 2048,
         "requested_size": 2048, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": s_alloc,
         "blocks": [
             {"address": base + 20 * MB, "size": 2048, "requested_size": 2048, "state": "active_allocated",
              "frames": s_alloc},
             {"address": base + 20 * MB + 2048, "size": 2 * MB - 2048, "requested_size": 0, "state": "inactive",
              "frames": []},
         ]},
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128", "max_split_size": 128 * MB,
                "garbage_collection_threshold": 0.0, "expandable_segments": False,
                "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
    annotations = [{"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": 125},
                   {"stage": "END", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": 135}]
    return {"segments": segments, "device_traces": [trace], "allocator_settings": settings,
            "external_annotations": annotations}


def legacy():
    """As PyTorch 2.0 wrote it: blocks with a history instead of an address, no time_us, no settings."""
    base = 0x7E0000000000
    s = stack(F_ALLOC, F_FWD)
    trace = [
        entry("segment_alloc", base, 2 * MB, None, s),
        entry("alloc", base, 512, None, s),
        entry("alloc", base + 512, 1000, None, s),
        entry("free_requested", base, 512, None, s),
        entry("free_completed", base, 512, None, s),
        entry("alloc", base + 4 * MB, 300, None, s),  # a block of a segment that was there before
    ]
    segments = [
        {"device": 0, "address": base, "total_size": 2 * MB, "allocated_size": 1024, "active_size": 1024,
         "stream": 0, "segment_type": "small",
         "blocks": [
             {"size": 512, "state": "inactive", "history": [{"addr": base, "real_size": 512, "frames": s}]},
             {"size": 1024, "state": "active_allocated",
              "history": [{"addr": base + 512, "real_size": 1000, "frames": s}]},
             {"size": 2 * MB - 1536, "state": "inactive"},
         ]},
        {"device": 0, "address": base + 4 * MB, "total_size": 2 * MB, "allocated_size": 1024, "active_size": 1024,
         "stream": 0, "segment_type": "small",
         "blocks": [
             {"size": 512, "state": "active_allocated",
              "history": [{"addr": base + 4 * MB, "real_size": 300, "frames": s}]},
             {"size": 512, "state": "active_allocated"},  # live before the window, no history
             {"size": 2 * MB - 1024, "state": "inactive"},
         ]},
    ]
    return {"segments": segments, "device_traces": [trace]}


def expandable():
    """Two devices with entries and a third without; expandable segments, an OOM, other actions."""
    b0, b1 = 0x7D0000000000, 0x7C0000000000
    st = 94000000000000  # a cudaStream_t
    s = stack(F_ALLOC, F_FWD, F_MAIN)
    t0 = [
        entry("segment_map", b0, 20 * MB, 1000, s, stream=st),
        entry("alloc", b0, 16 * MB, 1001, s, stream=st),
        entry("alloc", b0 + 16 * MB, 1 * MB, 1002, s, stream=st),
        entry("free_requested", b0 + 16 * MB, 1 * MB, 1003, s, stream=st),
        entry("oom", 0, 64 * MB, 1004, s, stream=st, device_free=10 * MB),
        entry("free_completed", b0 + 16 * MB, 1 * MB, 1005, s, stream=st),
        entry("segment_unmap", b0 + 16 * MB + 0, 0, 1006, s, stream=st),
        entry("snapshot", 0, 16 * MB, 1007, None, stream=st),
        entry("user_defined", 0, 0, 1008, None),
    ]
    t0[6]["size"] = 4 * MB
    t1 = [
        entry("free_requested", b1, 512, 2000, s),  # pending free at the window start, first seen freed
        entry("alloc", b1 + 2 * MB, 4000, 2001, s),
    ]
    segments = [
        {"device": 0, "address": b0, "total_size": 16 * MB, "allocated_size": 16 * MB, "active_size": 16 * MB,
         "requested_size": 16 * MB, "stream": st, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": True, "frames": s,
         "blocks": [{"address": b0, "size": 16 * MB, "requested_size": 16 * MB, "state": "active_allocated",
                     "frames": s}]},
        {"device": 1, "address": b1, "total_size": 2 * MB, "allocated_size": 512, "active_size": 512,
         "requested_size": 512, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [],
         "blocks": [{"address": b1, "size": 512, "requested_size": 512, "state": "active_pending_free", "frames": []},
                    {"address": b1 + 512, "size": 2 * MB - 512, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
        {"device": 1, "address": b1 + 2 * MB, "total_size": 2 * MB, "allocated_size": 4096, "active_size": 4096,
         "requested_size": 4000, "stream": 0, "segment_type": "small", "segment_pool_id": (1, 3),
         "is_expandable": False, "frames": [],
         "blocks": [{"address": b1 + 2 * MB, "size": 4096, "requested_size": 4000, "state": "active_allocated",
                     "frames": s},
                    {"address": b1 + 2 * MB + 4096, "size": 2 * MB - 4096, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
        {"device": 2, "address": 0x7B0000000000, "total_size": 2 * MB, "allocated_size": 0, "active_size": 0,
         "requested_size": 0, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [],
         "blocks": [{"address": 0x7B0000000000, "size": 2 * MB, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
                "garbage_collection_threshold": 0.5, "expandable_segments": True,
                "roundup_power2_divisions": [1, 2, 4]}
    return {"segments": segments, "device_traces": [t0, t1, []], "allocator_settings": settings}


def expandable_bases():
    """Two devices, each a window of a warm process with expandable segments: a large-pool range
    mapped before the window, then a small-pool request that reserves a segment of its own, whose
    base the driver put 3 GiB above the large one (inside the 1 1/8 of an 80 GiB card validate
    would assume for the large reservation, as on a smaller card)."""
    s = stack(F_ALLOC, F_FWD, F_MAIN)
    traces, segments = [], []
    for dev, b0 in ((0, 0x7A0000000000), (1, 0x7B4000000000)):
        b1 = b0 + 3 * 1024 * MB
        traces.append([
            entry("segment_map", b1, 2 * MB, 1000 + dev, s),
            entry("alloc", b1, 4096, 1001 + dev, s),
            entry("segment_map", b0 + 20 * MB, 20 * MB, 1002 + dev, s),
            entry("alloc", b0 + 16 * MB, 12 * MB, 1003 + dev, s),
        ])
        segments += [
            {"device": dev, "address": b0, "total_size": 40 * MB, "allocated_size": 28 * MB, "active_size": 28 * MB,
             "requested_size": 28 * MB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
             "is_expandable": True, "frames": s,
             "blocks": [{"address": b0, "size": 16 * MB, "requested_size": 16 * MB, "state": "active_allocated",
                         "frames": s},
                        {"address": b0 + 16 * MB, "size": 12 * MB, "requested_size": 12 * MB,
                         "state": "active_allocated", "frames": s},
                        {"address": b0 + 28 * MB, "size": 12 * MB, "requested_size": 0, "state": "inactive",
                         "frames": []}]},
            {"device": dev, "address": b1, "total_size": 2 * MB, "allocated_size": 4096, "active_size": 4096,
             "requested_size": 4096, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
             "is_expandable": True, "frames": s,
             "blocks": [{"address": b1, "size": 4096, "requested_size": 4096, "state": "active_allocated",
                         "frames": s},
                        {"address": b1 + 4096, "size": 2 * MB - 4096, "requested_size": 0, "state": "inactive",
                         "frames": []}]},
        ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": True}
    return {"segments": segments, "device_traces": traces, "allocator_settings": settings}


def other_device():
    """Entries for device 1 only, while the final state has segments on devices 0 and 1: the
    trace is written for device 0 at first (the lowest with segments) and moved to device 1."""
    b0, b1 = 0x7A0000000000, 0x790000000000
    s = stack(F_ALLOC, F_FWD, F_MAIN)
    t1 = [
        entry("free_requested", b1, 512, 3000, s),  # live before the window
        entry("segment_alloc", b1 + 2 * MB, 2 * MB, 3001, s),
        entry("alloc", b1 + 2 * MB, 4000, 3002, s),
    ]
    seg = lambda dev, addr, used: {
        "device": dev, "address": addr, "total_size": 2 * MB, "allocated_size": used, "active_size": used,
        "requested_size": used, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
        "is_expandable": False, "frames": [],
        "blocks": [{"address": addr, "size": 4096, "requested_size": used, "state": "active_allocated", "frames": s},
                   {"address": addr + 4096, "size": 2 * MB - 4096, "requested_size": 0, "state": "inactive",
                    "frames": []}]}
    segments = [seg(0, b0, 100), seg(1, b1 + 2 * MB, 4000), seg(1, b1 + 4 * MB, 300)]
    return {"segments": segments, "device_traces": [[], t1]}


def interleaved():
    """Two devices' lists of entries filled turn about (PyTorch fills one list after the other,
    but a pickle may refer back to a list and append to it later). Written opcode by opcode."""
    def s(text):
        b = text.encode()
        return b"X" + len(b).to_bytes(4, "little") + b  # BINUNICODE
    def n(v):
        b = v.to_bytes(8, "little", signed=True)
        return b"\x8a" + bytes([len(b)]) + b  # LONG1
    def ent(action, addr, size, t):
        return (b"}(" + s("action") + s(action) + s("addr") + n(addr) + s("size") + n(size) +
                s("stream") + n(0) + s("time_us") + n(t) + b"u")  # EMPTY_DICT MARK ... SETITEMS
    a0, a1 = 0x780000000000, 0x770000000000
    out = b"\x80\x02}q\x00(" + s("segments") + b"]" + s("device_traces") + b"](]q\x02]q\x03eu"
    for lst, e in ((2, ent("alloc", a0, 512, 10)), (3, ent("alloc", a1, 1024, 11)), (2, ent("free_requested", a0, 512, 12)),
                   (3, ent("free_requested", a1, 1024, 13)), (2, ent("free_completed", a0, 512, 14)),
                   (2, ent("alloc", a0 + 512, 256, 15))):
        out += b"h" + bytes([lst]) + e + b"a0"  # BINGET, the entry, APPEND, POP
    return out + b"."


def bad_snapshots():
    """Well-formed pickles that are not snapshots, or snapshots with a mistyped field."""
    good = tiny()

    def with_entry(**change):
        d = tiny()
        d["device_traces"][0][2].update(change)
        return d

    def with_block(**change):
        d = tiny()
        d["segments"][0]["blocks"][1].update(change)
        return d

    cases = {
        "mistyped_addr": with_entry(addr="0x7f0000000000"),
        "negative_size": with_entry(size=-4096),
        "huge_size": with_entry(size=1 << 64),
        "mistyped_frames": with_entry(frames="forward"),
        "bad_state": with_block(state="freed"),
        "entries_not_dicts": {"segments": [], "device_traces": [[1, 2, 3]]},
        "segments_not_list": {"segments": {"a": 1}, "device_traces": good["device_traces"]},
        "no_device_traces": {"segments": good["segments"]},
        "no_entries": {"segments": good["segments"], "device_traces": [[], []]},
        "list_of_segments": good["segments"],
        "not_a_snapshot": {"model": "resnet", "epochs": 3},
    }
    out = {}
    for name, obj in cases.items():
        out[name + ".pickle"] = pickle.dumps(obj, protocol=4)
    out["protocol0.pickle"] = pickle.dumps(good, protocol=0)
    # A snapshot with a set in it: protocol 2 writes sets by calling builtins.set (GLOBAL, REDUCE).
    calls = tiny()
    calls["device_traces"][0][0]["frames"] = {"a"}
    out["calls_code.pickle"] = pickle.dumps(calls, protocol=2)
    return out


def write(name, obj, protocol):
    data = pickle.dumps(obj, protocol=protocol)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    return data


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    t = tiny()
    for proto in (2, 3, 4, 5):
        data = write(f"tiny_p{proto}.pickle", t, proto)
        ops = sorted({op.name for op, _, _ in pickletools.genops(data)})
        print(f"tiny_p{proto}.pickle: {len(data)} bytes, opcodes {' '.join(ops)}")
    odd = tiny()  # names memplay does not know, one of them empty
    odd["device_traces"][0][2][""] = 1
    odd["device_traces"][0][2]["stream_priority"] = 0
    odd["device_traces"][0].append(entry("", 0, 0, 150))
    odd["device_traces"][0].append(entry("user_defined", 0, 0, 151))
    write("odd_names.pickle", odd, 4)
    write("legacy.pickle", legacy(), 4)
    write("expandable.pickle", expandable(), 4)
    write("other_device.pickle", other_device(), 4)
    write("expandable_bases.pickle", expandable_bases(), 4)
    # Integers wider than 64 bits where PyTorch writes a C++ size_t: a frame's unknown line is
    # 2**64 - 1 (a 9-byte LONG1), a stream handle above 2**63; and one beyond any width.
    wide = tiny()
    wide["device_traces"][0][2]["frames"] = stack(frame("malloc", "CUDACachingAllocator.cpp", (1 << 64) - 1), F_FWD)
    wide["device_traces"][0][2]["frame_id"] = 1 << 80
    write("wide_ints.pickle", wide, 4)
    data = interleaved()
    d = pickle.loads(data)
    print("interleaved.pickle", {i: len(tr) for i, tr in enumerate(d["device_traces"])})
    with open(os.path.join(OUT, "interleaved.pickle"), "wb") as f:
        f.write(data)
    # Seeds for the fuzzers: the snapshots above and one value of every data opcode family.
    seeds = {
        "tiny_p2": pickle.dumps(t, protocol=2), "tiny_p5": pickle.dumps(t, protocol=5),
        "legacy": pickle.dumps(legacy(), protocol=4), "expandable": pickle.dumps(expandable(), protocol=3),
        "scalars_p0": pickle.dumps([None, True, False, 1, -2, 1 << 70, 1.5, "a\u00e9\u4e2d", (1, 2)], protocol=0),
        "scalars_p2": pickle.dumps([None, True, 255, 65535, -1, 1 << 40, -(1 << 70), 2.5, "\u4e2d", ()], protocol=2),
        "bytes_p3": pickle.dumps([b"", b"x" * 300, (1,), (1, 2, 3), (1, 2, 3, 4)], protocol=3),
        "sets_p4": pickle.dumps([{1, 2}, frozenset({3}), {"k": [1, {2: 3}]}], protocol=4),
        "bytearray_p5": pickle.dumps([bytearray(b"abc"), "s" * 300], protocol=5),
    }
    shared = [1, 2]
    seeds["shared_p4"] = pickle.dumps({"a": shared, "b": shared, "c": [shared, shared]}, protocol=4)
    cyc = []
    cyc.append(cyc)
    seeds["cycle_p2"] = pickle.dumps(cyc, protocol=2)
    for k, v in seeds.items():
        with open(os.path.join(CORPUS, k + ".pickle"), "wb") as f:
            f.write(v)
    os.makedirs(os.path.join(OUT, "bad"), exist_ok=True)
    for name, data in bad_snapshots().items():
        with open(os.path.join(OUT, "bad", name), "wb") as f:
            f.write(data)
        first_global = next((pos for op, _, pos in pickletools.genops(data) if op.name == "GLOBAL"), None)
        if first_global is not None:
            print(f"bad/{name}: GLOBAL at byte {first_global}")
    for name in ("tiny_p4.pickle", "legacy.pickle", "expandable.pickle"):
        d = pickle.load(open(os.path.join(OUT, name), "rb"))
        print(name, {i: len(tr) for i, tr in enumerate(d["device_traces"])}, "segments", len(d["segments"]))


if __name__ == "__main__":
    main()
