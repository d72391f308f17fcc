# torch_train.py: a small PyTorch training job for the real-GPU measurements (tools/gpu_checks.sh).
#
#   python3 torch_train.py BATCH PRECISION OUT [--snapshot]
#
# Trains a 4-layer transformer encoder (width 1024, 16 heads, feed-forward 4096, context 256)
# for 4 steps of AdamW at batch BATCH, in fp32 or under bf16 autocast (PRECISION), each step's
# input copied from pinned host memory. Writes OUT.json: what PyTorch's caching allocator itself
# measured (peak allocated and reserved, cudaMalloc calls, retries, segments). With --snapshot
# it also records PyTorch's own memory history and writes OUT.pickle (a memory snapshot).
import json
import sys

import torch


def main():
    batch, precision, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    snapshot = "--snapshot" in sys.argv[4:]
    if precision not in ("fp32", "bf16"):
        sys.exit("precision must be fp32 or bf16")
    torch.manual_seed(0)
    dev = torch.device("cuda")
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=1000000)
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(dev)
    head = torch.nn.Linear(1024, 1024).to(dev)
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    host = torch.randn(batch, 256, 1024).pin_memory()
    for _ in range(4):
        x = host.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            y = head(model(x))
        loss = y.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    result = {
        "batch": batch,
        "precision": precision,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "max_allocated": torch.cuda.max_memory_allocated(),
        "max_reserved": torch.cuda.max_memory_reserved(),
        "allocated_end": torch.cuda.memory_allocated(),
        "reserved_end": torch.cuda.memory_reserved(),
        "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "num_device_alloc": stats.get("num_device_alloc", 0),
        "num_device_free": stats.get("num_device_free", 0),
        "segments_end": stats.get("segment.all.current", 0),
        "segments_peak": stats.get("segment.all.peak", 0),
    }
    if snapshot:
        torch.cuda.memory._dump_snapshot(out + ".pickle")
        torch.cuda.memory._record_memory_history(enabled=None)
    with open(out + ".json", "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
