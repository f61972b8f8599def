"""PyTorch DDP peer of mstep's data-parallel GPT-mini step (bench/ddp_scaling.sh).

The GPT-mini of torch_steps.py (same shapes, full-length sequences, AdamW
lr 3e-4, weight decay 0.1, no clipping) wrapped in
torch.nn.parallel.DistributedDataParallel on the gloo backend, one rank
per process, launched by mpirun (Open MPI's OMPI_COMM_WORLD_RANK/SIZE give
the rank and world; the ranks meet at MASTER_ADDR:MASTER_PORT, default
127.0.0.1:29533). Each rank steps on its own batch of --batch sequences.
Rank 0 prints

    RESULT metric=ddp_gpt_step_ms impl=torch-ddp-gloo value=<median ms> threads=<n> world=<w> bucket_mb=<b>

    mpirun -np 2 -x OMP_NUM_THREADS=1 python bench/peers/torch_ddp.py --threads 1 [--bucket-mb 25]
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import peer_common
from torch_steps import Gpt


def main():
    p = peer_common.arg_parser(__doc__)
    p.add_argument("--bucket-mb", type=float, default=25)
    p.add_argument("--reps", type=int, default=6)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.dim, a.heads, a.layers, a.seq)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb,
                                                    gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4, weight_decay=0.1)
    torch.manual_seed(1 + rank)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1))

    def step():
        opt.zero_grad(set_to_none=True)
        logits = ddp(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    ms = peer_common.timed(step, warmup=2, reps=2 if a.quick else a.reps)
    # The slowest rank's median is the job's step.
    t = torch.tensor([ms])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        peer_common.report("ddp_gpt_step_ms", "torch-ddp-gloo", float(t[0]),
                           torch.get_num_threads(), world=world, bucket_mb=a.bucket_mb,
                           torch=torch.__version__)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
