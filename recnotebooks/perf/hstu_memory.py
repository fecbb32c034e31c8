"""Where a generative recommender (HSTU) lives: its bytes on each device, **modeled** by kind.

A DLRM-sized model is its tables; so is an HSTU one. MLPerf's DLRMv4 holds 293 M rows of 512
fp32 numbers (600 GB) and 4.2 M dense parameters (17 MB in fp32): the tables set how many devices the
model needs, the history lengths set the activations. Per device of ``devices``:

* ``tables``: every row in fp32, the tables sharded row-wise over the devices (an even share);
* ``table_optimizer``: row-wise Adagrad's one fp32 per row
  (:func:`~recnotebooks.config.state_floats_per_row`), sharded as the rows are;
* ``dense``, ``dense_grads``, ``adam``: the dense parameters (fp32 master weights) and their
  gradients, replicated on every device, and Adam's two moments
  (:func:`~recnotebooks.config.state_floats_per_parameter`);
* ``activations``: what backward keeps of each layer, per token (:data:`ACTIVATION_WIDTH`
  elements of ``dim`` -- counted from the layer's formula, a modeling assumption), and the
  looked-up embeddings;
* ``scores``: the attention weights an **unfused** kernel writes and keeps for backward,
  :data:`SCORES_KEPT` tensors of ``heads x sum P^2`` elements a layer, ``P`` the length of the
  bucket a history of ``n`` events runs in (:func:`recnotebooks.sparse.padded_length`: this
  package's bucketed kernel, as :func:`~recnotebooks.perf.hstu.hstu_step` prices it; each
  bucket's full ``P x P`` block, the causal mask applied to it, not skipped); a padded batch keeps
  ``heads x B x N^2`` (every history at the longest's length). A fused (flash-style) kernel
  recomputes them in backward and keeps none: the one term that grows with the square of the
  length is gone.

:func:`hstu_memory` returns an :class:`HSTUMemory`; :meth:`HSTUMemory.fits` compares it with a
device's HBM less the planner's reserve (:data:`recnotebooks.perf.planner.RESERVE`) and
:func:`devices_to_fit` finds the fewest devices whose HBM holds the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recnotebooks.checks import check_bool, check_choice, check_int, check_type
from recnotebooks.config import DTYPES, state_floats_per_parameter, state_floats_per_row
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.hstu import attention_products
from recnotebooks.perf.planner import RESERVE
from recnotebooks.perf.precision import precision
from recnotebooks.sparse import padded_length

__all__ = ["HSTUMemory", "hstu_memory", "devices_to_fit", "MEMORY_KINDS", "ACTIVATION_WIDTH", "SCORES_KEPT"]

#: The kinds of bytes :func:`hstu_memory` counts, in the order charts stack them.
MEMORY_KINDS = ("tables", "table_optimizer", "dense", "dense_grads", "adam", "activations", "scores")
#: Elements per token and layer that backward keeps, in units of the layer's widths (modeling
#: assumption, counted from the layer's formula): the input and its layer norm (``2 dim``), the
#: U, V, Q, K projection before and after SiLU (``2 x (2 h v + 2 h qk)``), and ``A V``, its norm
#: and the gate (``3 h v``). :func:`hstu_memory` adds them up for a config.
ACTIVATION_WIDTH = "2 dim + 2 (2 h v + 2 h qk) + 3 h v"
#: Attention-weight tensors an unfused kernel keeps a layer for backward: ``Q K^T`` (with the
#: bias) before SiLU, and the weights after it (modeling assumption).
SCORES_KEPT = 2


@dataclass
class HSTUMemory:
    """Modeled bytes of one device of ``devices``, by kind (:data:`MEMORY_KINDS`); ``source`` is
    always ``"modeled"``."""

    config: HSTUConfig
    devices: int
    padded: bool
    fused_attention: bool
    bytes: dict[str, float] = field(default_factory=dict)
    source: str = "modeled"

    @property
    def total(self) -> float:
        """Bytes of one device, every kind."""
        return sum(self.bytes.values())

    @property
    def model_bytes(self) -> float:
        """The whole model's tables, their optimizer state, dense weights and Adam over every device:
        what must live somewhere (activations aside)."""
        b = self.bytes
        return (b["tables"] + b["table_optimizer"]) * self.devices + b["dense"] + b["dense_grads"] + b["adam"]

    def fits(self, hw: Hardware | str) -> bool:
        """Whether one device's bytes fit its HBM less the planner's reserve."""
        return self.total <= hardware(hw).hbm_bytes * (1 - RESERVE)

    def rows(self) -> list[dict[str, object]]:
        """Tidy rows: one per kind, with ``bytes`` and ``share`` of the device's total."""
        total = self.total
        return [
            {"kind": k, "bytes": b, "share": b / total, "source": self.source} for k, b in self.bytes.items()
        ]


def hstu_memory(
    config: HSTUConfig,
    lengths: Sequence[int],
    devices: int = 1,
    hw: Hardware | str | None = None,
    *,
    dtype: str = "bf16",
    padded: bool = False,
    fused_attention: bool = True,
    embedding_dim: int | None = None,
) -> HSTUMemory:
    """Model the bytes on each of ``devices`` devices training ``config`` on the histories of
    ``lengths`` (events each, per device, as :func:`~recnotebooks.perf.hstu.hstu_step` takes them):
    see the module docstring for the kinds. ``hw``, if given, is only checked to be a hardware
    preset (the bytes do not depend on it; :meth:`HSTUMemory.fits` compares them with one's HBM);
    ``embedding_dim``: the tables' width where it differs from ``dim``."""
    check_type("config", config, HSTUConfig, "an HSTUConfig")
    if hw is not None:
        hardware(hw)
    lengths = [check_int("lengths[i]", n, lo=0, hi=config.max_len) for n in lengths]
    if not lengths or not sum(lengths):
        raise ValueError("lengths must hold at least one history with events")
    devices = check_int("devices", devices, lo=1, hi=1_000_000)
    check_choice("dtype", dtype, DTYPES)
    padded, fused = check_bool("padded", padded), check_bool("fused_attention", fused_attention)
    edim = config.dim if embedding_dim is None else check_int("embedding_dim", embedding_dim, lo=1, hi=65_536)
    p = precision(dtype)
    rows = sum(t.num_rows for t in config.tables)
    run = [max(lengths)] * len(lengths) if padded else lengths
    tokens = sum(run)
    qk, v = config.head_dims
    h, d = config.heads, config.dim
    width = 2 * d + 2 * (2 * h * v + 2 * h * qk) + 3 * h * v  # ACTIVATION_WIDTH
    blocks = run if padded else [padded_length(n) for n in run]  # the bucketed kernel's squares
    scores = 0.0 if fused else SCORES_KEPT * h * attention_products(blocks, causal=False) * p.activation_bytes
    looked_up = tokens * edim * p.embedding_bytes * 2  # the rows gathered, and their sum's gradient
    dense = config.dense_parameters
    b = {
        "tables": rows * edim * 4 / devices,
        "table_optimizer": rows * state_floats_per_row("rowwise_adagrad", edim) * 4 / devices,
        "dense": dense * 4.0,
        "dense_grads": dense * 4.0,
        "adam": dense * state_floats_per_parameter("adam") * 4.0,
        "activations": config.num_layers * tokens * width * p.activation_bytes + looked_up,
        "scores": config.num_layers * scores,
    }
    return HSTUMemory(config, devices, padded, fused, b)


def devices_to_fit(
    config: HSTUConfig,
    lengths: Sequence[int],
    hw: Hardware | str,
    *,
    most: int = 100_000,
    **kwargs: object,
) -> int:
    """The fewest devices of ``hw`` whose HBM (less the reserve) holds :func:`hstu_memory`'s bytes
    with ``lengths`` on each; ``ValueError`` if not even ``most`` do (the replicated part or one
    device's activations alone overflow it)."""
    hw = hardware(hw)
    most = check_int("most", most, lo=1)
    room = hw.hbm_bytes * (1 - RESERVE)
    one = hstu_memory(config, lengths, 1, hw, **kwargs)  # type: ignore[arg-type]
    sharded = one.bytes["tables"] + one.bytes["table_optimizer"]
    fixed = one.total - sharded
    if fixed >= room:
        raise ValueError(
            f"lengths put {fixed / 1e9:.1f} GB of activations and dense state on each device, more than one "
            f"{hw.name} holds ({room / 1e9:.1f} GB less the reserve): shorten the histories"
        )
    need = -(-sharded // (room - fixed))
    if need > most:
        raise ValueError(
            f"most must be at least {int(need)} devices of {hw.name} to hold {config.name}, got {most}"
        )
    return max(1, int(need))
