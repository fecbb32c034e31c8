"""The ``recnb`` command (also ``python -m recnotebooks``): its home is :mod:`recnotebooks.commands`.

These names stay importable from here: ``main`` (the ``recnb`` entry point of pyproject.toml),
``build_parser``, ``config_from_args``, ``training_settings`` and ``TRAIN_DEFAULTS``.
"""

from __future__ import annotations

from recnotebooks.commands import (
    TRAIN_DEFAULTS,
    CLIError,
    build_parser,
    config_from_args,
    main,
    training_settings,
)

__all__ = ["main", "build_parser", "config_from_args", "training_settings", "TRAIN_DEFAULTS", "CLIError"]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
