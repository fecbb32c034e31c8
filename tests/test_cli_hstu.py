"""``recnb hstu``: the modeled HSTU step, jagged and padded, with MFU, memory and minutes to the
target; a bad setting is one line and exit status 2."""

from __future__ import annotations

import json

import pytest

from recnotebooks.commands.dispatch import main


def test_hstu_prints_jagged_and_padded(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hstu", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["source"] == "modeled" and r["config"] == "dlrmv4" and r["histories_per_gpu"] == 8192 // 32
    jagged, padded = r["jagged"], r["padded"]
    assert padded["step_s"] > jagged["step_s"] and 0 < padded["mfu"] < jagged["mfu"] < 1
    assert jagged["fits"] and jagged["minutes_to_target"] > 0
    assert padded["memory_gb_per_gpu"] > jagged["memory_gb_per_gpu"]  # the unfused scores at B N^2
    assert main(["hstu", "--preset", "hstu_small", "--gpus", "1", "--nodes", "1", "--batch-size", "64"]) == 0
    text = capsys.readouterr().out
    assert "MODELED" in text and "MFU" in text and "off round v6.1's curve" in text


def test_hstu_refuses_a_batch_the_gpus_do_not_divide(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hstu", "--batch-size", "100"]) == 2
    assert "--batch-size" in capsys.readouterr().err
