"""recnotebooks: learn how deep learning recommendation models (DLRM) train on GPUs."""

from recnotebooks.config import PRESETS, DLRMConfig, TableConfig, preset
from recnotebooks.sparse import JaggedBatch

__version__ = "0.1.0"

__all__ = ["DLRMConfig", "TableConfig", "PRESETS", "preset", "JaggedBatch", "__version__"]
