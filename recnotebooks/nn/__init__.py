"""DLRM building blocks: fused embedding bags, sparse optimizers, MLPs, interactions."""

from recnotebooks.nn.dlrm import DLRM
from recnotebooks.nn.embedding import EmbeddingBagCollection, RowGradients
from recnotebooks.nn.interaction import (
    CatInteraction,
    DCNInteraction,
    DotInteraction,
    LowRankCrossNet,
    make_interaction,
)
from recnotebooks.nn.mlp import MLP
from recnotebooks.nn.optim import (
    ExactAdagrad,
    RowWiseAdagrad,
    SparseOptimizer,
    SparseSGD,
    make_dense_optimizer,
    make_sparse_optimizer,
)

__all__ = ["EmbeddingBagCollection", "RowGradients",  # by module, in reading order
           "DotInteraction", "CatInteraction", "DCNInteraction", "LowRankCrossNet", "make_interaction",
           "MLP", "DLRM",
           "SparseOptimizer", "SparseSGD", "RowWiseAdagrad", "ExactAdagrad", "make_sparse_optimizer",
           "make_dense_optimizer"]  # fmt: skip
