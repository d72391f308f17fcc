# membound.py: memory-bound kernels of every length, for the time model's scaling of kernels from
# one GPU to another (tools/gpu_record_jobs.sh, tools/gpu_cross_device.py): elementwise
# operations, a reduction and a copy over fp32 tensors of 256 KiB to 1 GiB, each ten times, so
# that kernels run from a few microseconds to milliseconds.
#
#   python3 membound.py
import torch


def main():
    dev = torch.device("cuda")
    for mib in (0.25, 1, 4, 16, 64, 256, 1024):
        n = int(mib * (1 << 20)) // 4
        x = torch.ones(n, device=dev)
        y = torch.empty_like(x)
        for _ in range(10):
            torch.mul(x, 2.0, out=y)   # read one tensor, write one
            y.add_(x)                  # read two, write one
            y.copy_(x)
            y.sum()
        torch.cuda.synchronize()
        del x, y


main()
