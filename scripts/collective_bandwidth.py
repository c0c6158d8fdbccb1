#!/usr/bin/env python3
"""All-reduce and send/recv bandwidth between the ranks of a job, with nccl-tests'
formulas, and a check that every result is right (docs/cluster.md).

Run under torchrun or srun (with MASTER_ADDR and MASTER_PORT exported), one process per GPU:
  torchrun --nproc-per-node 8 scripts/collective_bandwidth.py --backend nccl --out bw.json

  all-reduce  a float32 sum of S bytes over all n ranks:
              algbw = S / t, busbw = algbw x 2 (n - 1) / n (nccl-tests' AllReduce)
  sendrecv    every rank sends S bytes to rank + 1 and receives S from rank - 1 at once:
              algbw = busbw = S / t (nccl-tests' SendRecv)
  t           the mean of --iterations calls after --warmup, timed between two device
              synchronisations, the slowest rank's (max over ranks).
Each result is checked: the sum of (rank + 1) over the ranks, the previous rank's id.
Rank 0 prints a Markdown table and, with --out, writes the rows as JSON. Exit 1 when a
result is wrong, 2 for bad arguments.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    text = text.strip().upper().removesuffix("B")
    scale = UNITS.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in UNITS else text
    size = int(float(number) * scale)
    if size < 4 or size % 4:
        raise argparse.ArgumentTypeError(f"size {text}: a positive multiple of 4 bytes (float32 elements)")
    return size


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device, call, iterations, warmup):
    for _ in range(warmup):
        call()
    synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    synchronize(device)
    seconds = torch.tensor([(time.perf_counter() - start) / iterations], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return seconds.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--sizes", default="1M,16M,128M,1G", type=lambda s: [parse_size(x) for x in s.split(",")],
                        help="message sizes, comma separated (K, M, G suffixes; default 1M,16M,128M,1G)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", help="JSON file for the rows (rank 0)")
    args = parser.parse_args()
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
        # srun: its variables as torchrun's (MASTER_ADDR and MASTER_PORT come from the job script).
        os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=os.environ["SLURM_NTASKS"],
                          LOCAL_RANK=os.environ.get("SLURM_LOCALID", "0"))
    if "RANK" not in os.environ:
        parser.error("start it under torchrun or srun: neither RANK nor SLURM_PROCID is set")
    if args.iterations < 1 or args.warmup < 0:
        parser.error("--iterations must be >= 1 and --warmup >= 0")

    if args.backend == "nccl":
        if not torch.cuda.is_available():
            parser.error("--backend nccl needs CUDA GPUs; use --backend gloo on CPUs")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        parser.error(f"needs two or more ranks, got {world}")

    rows, wrong = [], []
    following, previous = (rank + 1) % world, (rank - 1) % world
    for size in args.sizes:
        elements = size // 4
        # All-reduce, timed on whatever the buffer holds, then checked once: every rank
        # contributes rank + 1, so the sum is n (n + 1) / 2.
        data = torch.zeros(elements, dtype=torch.float32, device=device)
        t = timed(device, lambda: dist.all_reduce(data), args.iterations, args.warmup)
        data.fill_(rank + 1)
        dist.all_reduce(data)
        synchronize(device)
        if not torch.all(data == world * (world + 1) / 2):
            wrong.append(f"all-reduce of {size} bytes on rank {rank}")
        algbw = size / t / 1e9
        rows.append({"op": "all-reduce", "bytes": size, "ranks": world, "time_us": t * 1e6,
                     "algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (world - 1) / world})

        # Send/recv around the ring: rank r's message lands on r + 1.
        outgoing = torch.full((elements,), float(rank), dtype=torch.float32, device=device)
        incoming = torch.empty(elements, dtype=torch.float32, device=device)

        def send_recv():
            for request in dist.batch_isend_irecv([dist.P2POp(dist.isend, outgoing, following),
                                                   dist.P2POp(dist.irecv, incoming, previous)]):
                request.wait()

        t = timed(device, send_recv, args.iterations, args.warmup)
        if not torch.all(incoming == previous):
            wrong.append(f"send/recv of {size} bytes on rank {rank}")
        algbw = size / t / 1e9
        rows.append({"op": "sendrecv", "bytes": size, "ranks": world, "time_us": t * 1e6,
                     "algbw_gbs": algbw, "busbw_gbs": algbw})

    failures = [None] * world
    dist.all_gather_object(failures, wrong)
    failures = [f for per_rank in failures for f in per_rank]
    if rank == 0:
        print(f"{args.backend}, {world} ranks, {args.iterations} iterations after {args.warmup}")
        print("| op | bytes | time (us) | algbw (GB/s) | busbw (GB/s) |\n|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['op']} | {r['bytes']} | {r['time_us']:.1f} | {r['algbw_gbs']:.2f} | {r['busbw_gbs']:.2f} |")
        if args.out:
            with open(args.out + ".tmp", "w") as f:
                json.dump({"backend": args.backend, "ranks": world, "rows": rows, "wrong": failures}, f, indent=1)
            os.replace(args.out + ".tmp", args.out)
        for f in failures:
            print(f"wrong result: {f}", file=sys.stderr)
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
