"""``python -m recnotebooks``: the ``recnb`` command; ``torchrun ... -m recnotebooks train --distributed``
starts every rank this way."""

import os
import sys

if os.environ.get("TORCHELASTIC_RUN_ID"):  # a rank that torchrun started (torch's is_torchelastic_launched)
    # It ends when its agent does: torchrun starts it in a session of its own, so a killed agent
    # (a node killed) leaves it training on with its peers, for the rest of the run, otherwise.
    from recnotebooks.distributed._rank import exit_with_parent

    exit_with_parent(os.getppid())

from recnotebooks.cli import main  # noqa: E402 - after the watch: these imports take seconds

code = main()
if os.environ.get("TORCHELASTIC_RUN_ID"):  # a rank that torchrun started (torch's is_torchelastic_launched)
    # Its report is printed and its process group destroyed: leave without the interpreter's teardown.
    # There gloo's threads can still be joinable when their C++ objects are destroyed, and the rank
    # aborts ("terminate called without an active exception", SIGABRT) after a run that succeeded;
    # torchrun then reports the node failed, and the other node's agent waits at its exit barrier
    # for its full timeout (seen once in 2,800 tests on a busy machine, tests/test_dist_train.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
raise SystemExit(code)
