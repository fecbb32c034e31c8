"""Training throughput: recnotebooks' DLRM against DLRM as it is commonly written.

The reference is the textbook PyTorch DLRM (as in the facebookresearch/dlrm script): one
``nn.EmbeddingBag(sparse=True)`` per table looked up in a Python loop, ``torch.optim.SGD``
over all parameters (sparse gradients for the tables), a bmm + triangle-index dot
interaction and sigmoid + ``BCELoss``. Ours: one fused lookup for all tables, sparse
row-wise SGD on touched rows, GEMM-based interaction, ``BCEWithLogits``. Both start from the
same weights, see the same batches, use SGD with the same learning rate, and run in this
process, interleaved in rounds so machine noise hits both alike. The first step's losses
are compared to show the two compute the same model.

Run: ``python benchmarks/train_throughput.py`` (the issue's config: 8 tables x 1M rows x
dim 64, bottom 13-512-256-64, top 512-512-256-1, dot, batch 2048, pooling 1 and 20).
``--quick`` shrinks it for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.nn import DLRM, SparseSGD


class ReferenceDLRM(nn.Module):
    """DLRM written the common way: a Python loop over per-table EmbeddingBags."""

    def __init__(self, ours: DLRM) -> None:
        super().__init__()
        cfg = ours.config
        self.embs = nn.ModuleList(
            nn.EmbeddingBag.from_pretrained(ours.embeddings.table_weight(k).clone(), freeze=False,
                                            mode=cfg.pooling, sparse=True)
            for k in cfg.table_names
        )  # fmt: skip

        def copy_mlp(src: nn.Sequential, sigmoid: bool) -> nn.Sequential:
            layers: list[nn.Module] = []
            for m in src:
                if isinstance(m, nn.Linear):
                    lin = nn.Linear(m.in_features, m.out_features)
                    lin.load_state_dict(m.state_dict())
                    layers.append(lin)
                else:
                    layers.append(nn.ReLU())
            if sigmoid:
                layers.append(nn.Sigmoid())
            return nn.Sequential(*layers)

        self.bot = copy_mlp(ours.bottom_mlp, False)
        self.top = copy_mlp(ours.top_mlp, True)
        f = cfg.num_interaction_features
        self.li, self.lj = torch.tril_indices(f, f, -1)
        self.dim = cfg.embedding_dim

    def forward(
        self, dense: torch.Tensor, ids: list[torch.Tensor], offsets: list[torch.Tensor]
    ) -> torch.Tensor:
        x = self.bot(dense)
        ly = [emb(i, o) for emb, i, o in zip(self.embs, ids, offsets, strict=True)]
        t = torch.cat([x, *ly], dim=1).view(dense.shape[0], -1, self.dim)
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        r = torch.cat([x, z[:, self.li, self.lj]], dim=1)
        return self.top(r).squeeze(1)


def per_table_inputs(batch) -> tuple[list[torch.Tensor], list[torch.Tensor]]:  # type: ignore[no-untyped-def]
    ids, offs = [], []
    for key in batch.sparse.keys:
        v, lens = batch.sparse[key]
        ids.append(v.long())
        offs.append(torch.cat([torch.zeros(1, dtype=torch.long), lens.long().cumsum(0)[:-1]]))
    return ids, offs


def machine_rates() -> dict[str, float]:
    """This machine's fp32 matmul rate (2048x512x512) and streaming copy bandwidth."""
    a, b = torch.randn(2048, 512), torch.randn(512, 512)
    big = torch.empty(64 * 2**20 // 4)
    dst = torch.empty_like(big)

    def best(fn, n=10):  # type: ignore[no-untyped-def]
        fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)

    mm = 2 * 2048 * 512 * 512 / best(lambda: a @ b)
    bw = 2 * big.numel() * 4 / best(lambda: dst.copy_(big))  # bytes read + written
    return {"matmul_gflops": mm / 1e9, "copy_gbs": bw / 1e9}


def run(pooling: float, args: argparse.Namespace, rates: dict[str, float]) -> dict[str, float]:
    tables = tuple(TableConfig(f"T{i + 1}", args.rows, pooling) for i in range(args.tables))
    cfg = DLRMConfig(
        13, tables, args.dim, (512, 256, args.dim), (512, 512, 256, 1), name=f"bench_L{pooling:g}"
    )
    data = SyntheticCriteo(cfg, args.batch_size, SyntheticConfig(zipf_exponent=args.zipf), seed=0)
    batches = [data.batch(i) for i in range(args.distinct_batches)]
    ref_inputs = [per_table_inputs(b) for b in batches]

    ours = DLRM(cfg, seed=0)
    ref = ReferenceDLRM(ours)
    lr = 0.01
    dense_opt = torch.optim.SGD(ours.dense_parameters(), lr=lr)
    sparse_opt = SparseSGD(ours.embeddings, lr)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=lr)
    bce_logits, bce = nn.BCEWithLogitsLoss(), nn.BCELoss()

    def ours_step(i: int) -> float:
        b = batches[i % len(batches)]
        loss = bce_logits(ours(b.dense, b.sparse), b.labels)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        dense_opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    def ref_step(i: int) -> float:
        b = batches[i % len(batches)]
        ids, offs = ref_inputs[i % len(batches)]
        loss = bce(ref(b.dense, ids, offs), b.labels)
        ref_opt.zero_grad(set_to_none=True)
        loss.backward()
        ref_opt.step()
        return float(loss.detach())

    first = (ours_step(0), ref_step(0))
    for i in range(1, args.warmup):
        ours_step(i)
        ref_step(i)
    times: dict[str, list[float]] = {"ours": [], "reference": []}
    step = args.warmup
    for _ in range(args.rounds):
        for name, fn in (("ours", ours_step), ("reference", ref_step)):
            t0 = time.perf_counter()
            for k in range(args.steps):
                fn(step + k)
            times[name].append((time.perf_counter() - t0) / args.steps)
        step += args.steps
    ours_s = statistics.median(times["ours"])
    ref_s = statistics.median(times["reference"])
    flops = cfg.total_flops_per_sample() * args.batch_size
    emb = cfg.embedding_bytes_per_sample()
    ebytes = (emb["forward"] + emb["backward"]) * args.batch_size
    return {
        "pooling": pooling,
        "ours_samples_per_s": args.batch_size / ours_s,
        "reference_samples_per_s": args.batch_size / ref_s,
        "ours_ms_per_step": ours_s * 1e3,
        "reference_ms_per_step": ref_s * 1e3,
        "speedup": ref_s / ours_s,
        "ours_gflops": flops / ours_s / 1e9,
        "ours_gflops_share_of_matmul": flops / ours_s / 1e9 / rates["matmul_gflops"],
        "ours_embedding_gbs": ebytes / ours_s / 1e9,
        "ours_gbs_share_of_copy": ebytes / ours_s / 1e9 / rates["copy_gbs"],
        "first_loss_ours": first[0],
        "first_loss_reference": first[1],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--poolings", type=float, nargs="+", default=[1.0, 20.0])
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--zipf", type=float, default=1.05, help="id popularity skew of the synthetic data")
    p.add_argument("--steps", type=int, default=5, help="steps per timed round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--distinct-batches", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.rows, args.batch_size, args.steps, args.rounds, args.warmup = 10_000, 256, 2, 2, 1
    torch.manual_seed(0)
    rates = machine_rates()
    rows = [run(L, args, rates) for L in args.poolings]
    out = {"machine": {**rates, "threads": torch.get_num_threads(), "torch": torch.__version__},
           "config": vars(args), "results": rows}  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"machine: fp32 matmul {rates['matmul_gflops']:.0f} GFLOP/s, copy {rates['copy_gbs']:.0f} GB/s, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")  # fmt: skip
    print(
        f"{args.tables} tables x {args.rows:,} rows x dim {args.dim}, batch {args.batch_size}, zipf {args.zipf}"
    )
    print(f"{'pooling':>7} {'ours/s':>10} {'ref/s':>10} {'speedup':>8} {'ours ms':>8} {'ref ms':>8} "
          f"{'GFLOP/s':>8} {'%mm':>5} {'emb GB/s':>8} {'%copy':>6} {'loss0 ours/ref':>16}")  # fmt: skip
    for r in rows:
        print(f"{r['pooling']:>7g} {r['ours_samples_per_s']:>10,.0f} {r['reference_samples_per_s']:>10,.0f} "
              f"{r['speedup']:>7.2f}x {r['ours_ms_per_step']:>8.1f} {r['reference_ms_per_step']:>8.1f} "
              f"{r['ours_gflops']:>8.1f} {100 * r['ours_gflops_share_of_matmul']:>4.0f}% "
              f"{r['ours_embedding_gbs']:>8.2f} {100 * r['ours_gbs_share_of_copy']:>5.1f}% "
              f"{r['first_loss_ours']:>7.4f}/{r['first_loss_reference']:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
