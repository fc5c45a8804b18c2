"""archbench's PyTorch tokens/s of a GPT decoder against a bare training loop written here:
the same architecture (GPT-2 blocks, fused causal attention, tied output projection, no
dropout), AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1), one fixed batch of synthetic
tokens, GPT-2's initialisation (PyTorch's default one ran 3 to 5 times slower here on a
CPU: the weights' values matter), the same threads, batch and sequence length, eager or compiled, fp32 or bf16
(autocast around the forward pass, the loss in fp32, as archbench's step). Each run is a
fresh process; the two alternate over the repetitions (which runs first alternates too).
Then FSDP2 against DDP at 2 ranks through archbench: the tokens/s ratio and each one's
peak resident set per rank.

    python scripts/bench_llm.py --model gpt_tiny --batch-per-process 8 --sequence-length 128 \
        --threads 2 --steps 10 --repetitions 3 [--precision fp32 bf16] [--graph eager compiled]

Goal: archbench / bare >= 0.98 in every precision and graph mode.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archbench.workloads.training.strategies.ddp import ADDRESS, free_port  # noqa: E402


def bare(args) -> None:
    """The peer loop in this process: prints its tokens/s as JSON."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    from archbench.workloads.training.models import GPT
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    s = GPT[args.model]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(s.width), nn.LayerNorm(s.width)
            self.qkv, self.proj = nn.Linear(s.width, 3 * s.width), nn.Linear(s.width, s.width)
            self.fc1, self.fc2 = nn.Linear(s.width, 4 * s.width), nn.Linear(4 * s.width, s.width)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (y.view(b, t, s.heads, d // s.heads).transpose(1, 2) for y in self.qkv(self.n1(x)).split(d, 2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.n2(x)), approximate="tanh"))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(s.vocabulary, s.width), nn.Embedding(s.context, s.width)
            self.blocks = nn.ModuleList(Block() for _ in range(s.layers))
            self.norm = nn.LayerNorm(s.width)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.norm(x) @ self.wte.weight.t()

    model = Net()
    for name, p in model.named_parameters():  # GPT-2's initialisation, as archbench's network
        if p.dim() == 2:
            nn.init.normal_(p, std=0.02 / math.sqrt(2 * s.layers) if name.endswith(("proj.weight", "fc2.weight"))
                            else 0.02)
        elif name.endswith("bias"):  # the layer norms' are zero already
            nn.init.zeros_(p)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    net = torch.compile(model) if args.graph == "compiled" else model
    ids = torch.randint(0, s.vocabulary, (args.batch_per_process, args.sequence_length + 1))
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step():
        optimizer.zero_grad()
        if args.precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = net(inputs)
        else:
            logits = net(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, s.vocabulary), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    for _ in range(args.warmup + (args.graph == "compiled")):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_s": args.batch_per_process * args.sequence_length * args.steps / seconds}))


def env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", ADDRESS: f"127.0.0.1:{free_port()}",
            "PYTHONPATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_bare(args, precision: str, graph: str) -> float:
    argv = [sys.executable, __file__, "--bare", "--model", args.model, "--threads", str(args.threads),
            "--batch-per-process", str(args.batch_per_process), "--sequence-length", str(args.sequence_length),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--precision", precision, "--graph", graph]
    out = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["tokens_s"]


def run_archbench(args, *, precision: str = "fp32", graph: str = "eager", strategy: str = "single",
                  ranks: int = 1) -> dict:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    launcher = ["mpirun", *root, "-np", str(ranks), "--oversubscribe", "--bind-to", "none", "-x", "PATH",
                "-x", "PYTHONPATH", "-x", ADDRESS] if ranks > 1 else []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        argv = [*launcher, sys.executable, "-m", "archbench.train", "--framework", "pytorch", "--model", args.model,
                "--strategy", strategy, "--processes-per-node", str(ranks),
                "--batch-per-process", str(args.batch_per_process), "--sequence-length", str(args.sequence_length),
                "--intra-threads", str(max(1, args.threads // ranks)), "--inter-threads", "0",
                "--steps", str(args.steps), "--warmup-steps", str(args.warmup), "--precision", precision,
                "--graph", graph, "--vendor-probe", "off", "--output", str(out)]
        subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800, check=True)
        record = json.loads(out.read_text())
        assert record["status"] == "ok", record["reason"]
        return record


def paired(args, first, second, *, label: str) -> float:
    ratios = []
    for rep in range(args.repetitions):
        if rep % 2:
            b, a = second(), first()
        else:
            a, b = first(), second()
        ratios.append(a / b)
        print(f"  {label} rep {rep}: {a:.1f} / {b:.1f} tokens/s = {a / b:.3f}", flush=True)
    median = statistics.median(ratios)
    print(f"{label}: median ratio {median:.3f} over {args.repetitions} (min {min(ratios):.3f}, "
          f"max {max(ratios):.3f})", flush=True)
    return median


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt_tiny")
    p.add_argument("--batch-per-process", type=int, default=8)
    p.add_argument("--sequence-length", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--precision", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--graph", nargs="+", default=["eager"])
    p.add_argument("--no-fsdp", action="store_true", help="leave out FSDP2 against DDP")
    p.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bare:
        args.precision, args.graph = args.precision[0], args.graph[0]
        bare(args)
        return 0
    print(f"{args.model} batch {args.batch_per_process} x {args.sequence_length} tokens, {args.threads} "
          f"threads, {args.steps} steps after {args.warmup}", flush=True)
    for precision in args.precision:
        for graph in args.graph:
            paired(args, lambda p=precision, g=graph: run_archbench(args, precision=p, graph=g)["throughput"],
                   lambda p=precision, g=graph: run_bare(args, p, g),
                   label=f"archbench / bare loop, {precision} {graph} (goal >= 0.98)")
    if not args.no_fsdp:
        runs = {s: [run_archbench(args, strategy=s, ranks=2) for _ in range(args.repetitions)]
                for s in ("fsdp2", "ddp")}
        rate = {s: statistics.median(r["throughput"] for r in rs) for s, rs in runs.items()}
        memory = {s: max(r["metrics"]["peak_memory_per_rank"]["value"] for r in rs) for s, rs in runs.items()}
        print(f"FSDP2 / DDP, 2 ranks: {rate['fsdp2']:.1f} / {rate['ddp']:.1f} tokens/s = "
              f"{rate['fsdp2'] / rate['ddp']:.3f}; peak resident set per rank "
              f"{memory['fsdp2'] / 2**20:.0f} MiB / {memory['ddp'] / 2**20:.0f} MiB "
              f"= {memory['fsdp2'] / memory['ddp']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
