"""Data: the :class:`Batch` container, skewed synthetic Criteo-like streams and the Criteo reader;
for generative recommenders, a synthetic listening log of jagged histories
(:mod:`~recnotebooks.data.listening`) and readers of MovieLens-1M and Yambda (the user's download)."""

from recnotebooks.data.batch import Batch
from recnotebooks.data.criteo import CriteoReader, ReadStats, write_criteo_tsv
from recnotebooks.data.listening import ListeningConfig, SyntheticListening
from recnotebooks.data.movielens import MovieLensHistories, read_movielens_ratings
from recnotebooks.data.sequences import SequenceBatch
from recnotebooks.data.skew import fit_zipf_exponent, scatter_ids, zipf_ranks
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.data.yambda import YambdaHistories, read_yambda_events, read_yambda_mappings

__all__ = [
    "Batch",
    "SyntheticConfig",
    "SyntheticCriteo",
    "CriteoReader",
    "ReadStats",
    "write_criteo_tsv",
    "zipf_ranks",
    "scatter_ids",
    "fit_zipf_exponent",
    "ListeningConfig",
    "SequenceBatch",
    "MovieLensHistories",
    "read_movielens_ratings",
    "SyntheticListening",
    "YambdaHistories",
    "read_yambda_events",
    "read_yambda_mappings",
]
