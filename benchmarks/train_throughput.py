"""Training throughput: recnotebooks' DLRM against DLRM as it is commonly written.

The reference is the textbook PyTorch DLRM (as in the facebookresearch/dlrm script): one
``nn.EmbeddingBag(sparse=True)`` per table looked up in a Python loop, ``torch.optim.SGD``
over all parameters (sparse gradients for the tables), a bmm + triangle-index dot
interaction and sigmoid + ``BCELoss``. Ours: one fused lookup for all tables, sparse
row-wise SGD on touched rows, GEMM-based interaction, ``BCEWithLogits``. Both start from the
same weights, see the same batches, use SGD with the same learning rate, and run in this
process, interleaved in rounds so machine noise hits both alike. The first step's losses
are compared to show the two compute the same model.

Beside them run the step's two MLPs alone as PyTorch writes them (forward and backward,
no embeddings: what any PyTorch DLRM pays for its dense part) and a measured **lower
bound** for the step (``benchmarks/step_bound.py``):
the step's GEMMs at their own shapes plus its embedding traffic (every lookup's row read,
every distinct row read and written once) at the row bandwidth this machine reaches with
the step's own ids. Each round times one step of ours, one of the reference, one of the
bound and one of the MLPs alone, back to back; the figures are medians over rounds of each round's ratio.

Run: ``python benchmarks/train_throughput.py`` (the issue's config: 8 tables x 1M rows x
dim 64, bottom 13-512-256-64, top 512-512-256-1, dot, batch 2048, pooling 1 and 20);
``--interaction dcn`` runs the same model with DLRM-DCNv2's cross network (3 layers of rank 64
over the 576-wide concatenation) in place of the dot interaction, for both models and the bound.
``--quick`` shrinks it for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from step_bound import BoundProbe, MLPAlone, traffic_of  # benchmarks/step_bound.py
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
        self.kind = cfg.interaction
        self.cross = nn.ModuleList()  # (V_l, W_l) per cross layer, for --interaction dcn
        if cfg.interaction == "dcn":  # DCN-V2's formula, its weights copied from ours
            for v, w in zip(ours.interaction.cross.down, ours.interaction.cross.up, strict=True):
                down, up = (
                    nn.Linear(v.in_features, v.out_features, bias=False),
                    nn.Linear(w.in_features, w.out_features),
                )
                down.load_state_dict(v.state_dict())
                up.load_state_dict(w.state_dict())
                self.cross.append(nn.ModuleList([down, up]))

    def forward(
        self, dense: torch.Tensor, ids: list[torch.Tensor], offsets: list[torch.Tensor]
    ) -> torch.Tensor:
        x = self.bot(dense)
        ly = [emb(i, o) for emb, i, o in zip(self.embs, ids, offsets, strict=True)]
        if self.kind == "dcn":  # x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l
            x0 = xl = torch.cat([x, *ly], dim=1)
            for down, up in self.cross:
                xl = x0 * up(down(xl)) + xl
            return self.top(xl).squeeze(1)
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


def _spread(xs: list[float]) -> dict[str, float]:
    """Median, quartiles and range of per-round figures."""
    q1, _, q3 = statistics.quantiles(xs, n=4) if len(xs) > 1 else (xs[0], xs[0], xs[0])
    return {"median": statistics.median(xs), "p25": q1, "p75": q3, "min": min(xs), "max": max(xs)}


def bench_config(
    tables: tuple[TableConfig, ...], args: argparse.Namespace, name: str = "bench"
) -> DLRMConfig:
    """The benchmark's model over ``tables``: bottom 13-512-256-dim, top 512-512-256-1, the
    interaction (and cross layers) ``args`` asks for."""
    dcn = {"dcn_layers": args.dcn_layers, "dcn_rank": args.dcn_rank} if args.interaction == "dcn" else {}
    return DLRMConfig(13, tables, args.dim, (512, 256, args.dim), (512, 512, 256, 1), name=name,
                      interaction=args.interaction, **dcn)  # fmt: skip


def run(pooling: float, args: argparse.Namespace) -> dict[str, object]:
    tables = tuple(TableConfig(f"T{i + 1}", args.rows, pooling) for i in range(args.tables))
    cfg = bench_config(tables, args, name=f"bench_L{pooling:g}")
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
    traffic = [traffic_of(ours.embeddings.global_ids(b.sparse).long(), b.sparse.offsets()) for b in batches]
    probe = BoundProbe(cfg, args.batch_size, traffic)
    mlps = MLPAlone(cfg, args.batch_size)

    def ours_step(i: int) -> float:
        b = batches[i % len(batches)]
        loss = bce_logits(ours(b.dense, b.sparse), b.labels)
        loss.backward()
        sparse_opt.step(count_rows=False)  # as the trainer steps
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

    def timed(fn, first: int) -> float:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        for k in range(args.steps):
            fn(first + k)
        return (time.perf_counter() - t0) / args.steps

    first = (ours_step(0), ref_step(0))
    if args.profile:
        profile_steps(pooling, ours_step, ref_step)
    for i in range(1, args.warmup):
        ours_step(i)
        ref_step(i)
    ours_s, ref_s, bound_s, mlp_s, parts = [], [], [], [], []
    step = args.warmup
    for _ in range(args.rounds):  # interleaved: machine noise hits all three alike
        ours_s.append(timed(ours_step, step))
        ref_s.append(timed(ref_step, step))
        bound_s.append(timed(probe.run, step))
        mlp_s.append(timed(mlps.run, step))
        parts.append(probe.parts(step))
        step += args.steps
    return {
        "pooling": pooling,
        "ours_ms": _spread([1e3 * t for t in ours_s]),
        "reference_ms": _spread([1e3 * t for t in ref_s]),
        "bound_ms": _spread([1e3 * t for t in bound_s]),
        "mlps_alone_ms": _spread([1e3 * t for t in mlp_s]),
        "ours_over_bound": _spread([t / b for t, b in zip(ours_s, bound_s, strict=True)]),
        "ours_over_mlps": _spread([t / m for t, m in zip(ours_s, mlp_s, strict=True)]),
        "mlps_over_bound": _spread([m / b for m, b in zip(mlp_s, bound_s, strict=True)]),
        "reference_over_ours": _spread([r / t for r, t in zip(ref_s, ours_s, strict=True)]),
        # contention only adds time: each side's fastest round is its least disturbed one
        "fastest_ms": {"ours": 1e3 * min(ours_s), "reference": 1e3 * min(ref_s), "bound": 1e3 * min(bound_s)},
        "bound_parts_ms": {
            "gemm": statistics.median(1e3 * b.gemm_s for b in parts),
            "lookups": statistics.median(1e3 * b.lookup_s for b in parts),
            "row_updates": statistics.median(1e3 * b.update_s for b in parts),
        },
        "lookups": statistics.median(b.lookups for b in parts),
        "distinct_rows": statistics.median(b.distinct_rows for b in parts),
        "lookup_gbs": statistics.median(b.lookup_gbs for b in parts),
        "update_gbs": statistics.median(b.update_gbs for b in parts),
        "ours_samples_per_s": args.batch_size / statistics.median(ours_s),
        "reference_samples_per_s": args.batch_size / statistics.median(ref_s),
        "first_loss_ours": first[0],
        "first_loss_reference": first[1],
    }


def profile_steps(pooling: float, ours_step, ref_step) -> None:  # type: ignore[no-untyped-def]
    """Print the operators that take the most time in two steps of each model (torch.profiler;
    the Numba kernels of ours do not appear: they run between operators)."""
    from torch.profiler import ProfilerActivity, profile

    for name, fn in (("ours", ours_step), ("reference", ref_step)):
        fn(1)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn(2)
            fn(3)
        print(f"\n{name}, pooling {pooling:g}: top operators over 2 steps (MEASURED, profiler on)")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def _fmt(s: dict[str, float], unit: str = "") -> str:
    quartiles, whole = f"{s['p25']:.2f}-{s['p75']:.2f}", f"{s['min']:.2f}-{s['max']:.2f}"
    return f"{s['median']:.2f}{unit} (quartiles {quartiles}, range {whole})"


def report(rows: list[dict], args: argparse.Namespace) -> None:  # type: ignore[type-arg]
    print(f"{args.tables} tables x {args.rows:,} rows x dim {args.dim}, batch {args.batch_size}, "
          f"zipf {args.zipf}; {torch.get_num_threads()} threads, torch {torch.__version__}; "
          f"{args.rounds} interleaved rounds of {args.steps} steps; per-round median; MEASURED")  # fmt: skip
    for r in rows:
        parts = r["bound_parts_ms"]
        print(f"\npooling {r['pooling']:g}: {r['lookups']:,} lookups, "
              f"{r['distinct_rows']:,} distinct rows per step")  # fmt: skip
        print(
            f"  ours      {r['ours_ms']['median']:7.1f} ms/step  {r['ours_samples_per_s']:>9,.0f} samples/s"
        )
        print(f"  reference {r['reference_ms']['median']:7.1f} ms/step  "
              f"{r['reference_samples_per_s']:>9,.0f} samples/s")  # fmt: skip
        print(f"  bound     {r['bound_ms']['median']:7.1f} ms/step; alone: GEMMs {parts['gemm']:.1f} "
              f"+ lookups {parts['lookups']:.1f} ({r['lookup_gbs']:.1f} GB/s) "
              f"+ row updates {parts['row_updates']:.1f} ({r['update_gbs']:.1f} GB/s)")  # fmt: skip
        print(f"  ours / bound     {_fmt(r['ours_over_bound'], 'x')}")
        print(f"  PyTorch's MLPs alone (fwd+bwd, no embeddings) {r['mlps_alone_ms']['median']:.1f} ms: "
              f"{_fmt(r['mlps_over_bound'], 'x')} the bound")  # fmt: skip
        print(f"  ours / PyTorch's MLPs alone {_fmt(r['ours_over_mlps'], 'x')}")
        print(f"  reference / ours {_fmt(r['reference_over_ours'], 'x')}")
        best = r["fastest_ms"]
        print(f"  fastest rounds: ours {best['ours']:.1f}, reference {best['reference']:.1f}, bound "
              f"{best['bound']:.1f} ms: ours / bound {best['ours'] / best['bound']:.2f}x, "
              f"reference / ours {best['reference'] / best['ours']:.2f}x")  # fmt: skip
        print(f"  first-step loss ours/reference {r['first_loss_ours']:.4f}/{r['first_loss_reference']:.4f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--poolings", type=float, nargs="+", default=[1.0, 20.0])
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--zipf", type=float, default=1.05, help="id popularity skew of the synthetic data")
    p.add_argument("--steps", type=int, default=1, help="steps per timed round")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--distinct-batches", type=int, default=8)
    p.add_argument(
        "--interaction",
        choices=["dot", "dcn"],
        default="dot",
        help="dot (DLRM v1) or dcn (DLRM-DCNv2's cross network, as the model of record)",
    )
    p.add_argument("--dcn-layers", type=int, default=3, help="cross layers for --interaction dcn (MLPerf: 3)")
    p.add_argument("--dcn-rank", type=int, default=64,
                   help="cross layers' rank for --interaction dcn (64: about MLPerf's rank/width, 512/3456, "
                        "at this model's width 576)")  # fmt: skip
    p.add_argument("--gemms", action="store_true", help="also print each GEMM of the bound")
    p.add_argument("--profile", action="store_true", help="print each model's top operators (torch.profiler)")
    p.add_argument("--threads", type=int, default=None, help="torch (and Numba) threads; default: torch's")
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.rows, args.batch_size, args.steps, args.rounds, args.warmup = 10_000, 256, 1, 3, 1
        args.distinct_batches = 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = [run(L, args) for L in args.poolings]
    if args.json:
        out = {"machine": {"threads": torch.get_num_threads(), "torch": torch.__version__},
               "config": vars(args), "results": rows}  # fmt: skip
        print(json.dumps(out, indent=2))
        return
    report(rows, args)
    if args.gemms:
        tables = tuple(TableConfig(f"T{i + 1}", 1, 1.0) for i in range(args.tables))
        cfg = bench_config(tables, args)
        probe = BoundProbe(cfg, args.batch_size, [traffic_of(torch.zeros(1, dtype=torch.long),
                                                             torch.tensor([0, 1]))])  # fmt: skip
        print("\nGEMMs of the bound (fastest of 3, ms):")
        for label, t in probe.gemm_table():
            print(f"  {label:40s} {1e3 * t:7.2f}")


if __name__ == "__main__":
    main()
