"""`sao.plumbing.profiling.profile_table`: the ops a call ran, costliest first, and a clear error."""

import pytest
import torch

from sao.plumbing.profiling import profile_table


def test_the_table_names_the_ops_the_call_ran_and_keeps_top_rows() -> None:
    a = torch.randn(64, 64)
    table = profile_table(lambda: (a @ a).relu(), torch.device("cpu"), top=1)
    op_rows = [line for line in table.splitlines() if line.strip().startswith("aten::")]
    assert len(op_rows) == 1
    full = profile_table(lambda: (a @ a).relu(), torch.device("cpu"), top=20)
    assert "aten::mm" in full and "aten::relu" in full


def test_top_below_one_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="^profile: top must be at least 1, got 0$"):
        profile_table(lambda: None, torch.device("cpu"), top=0)
