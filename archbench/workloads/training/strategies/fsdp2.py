"""Strategy ``fsdp2``: PyTorch's fully sharded data parallelism, FSDP2
(``torch.distributed.fsdp.fully_shard``): every parameter sharded across the ranks
(per-parameter, as DTensors), gathered for a block's forward and backward and resharded
after the forward (``--reshard-after-forward``), its gradients reduce-scattered; gloo on
CPUs, NCCL on GPUs. A GPT decoder is sharded block by block, then as a whole; another
model as a whole. Ranks are started and meet as DDP's (:mod:`.ddp`)."""

from __future__ import annotations

from archbench.workloads.launch import process_rank
from archbench.workloads.training.strategies import ddp
from archbench.workloads.training.strategies.base import Strategy

STRATEGY = Strategy(launch=ddp.launch, launch_rank=process_rank,
                    help="FSDP2, fully_shard: parameters sharded across the ranks (gloo on CPUs, "
                         "NCCL on GPUs)", label="FSDP2")
