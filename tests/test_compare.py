"""Comparisons report the largest difference, where it is, and how many values differ."""
import torch

from grader.compare import mismatch, nonfinite, shape_problem


def test_close_tensors_have_no_mismatch():
    a = torch.randn(2, 3, dtype=torch.float64)
    assert mismatch(a, a + 1e-12, atol=1e-10, rtol=0, axes=("b", "t")) is None


def test_mismatch_names_the_worst_element():
    a = torch.zeros(2, 3, 4)
    b = a.clone()
    b[1, 2, 3] = 0.5
    b[0, 0, 0] = 0.1
    miss = mismatch(a, b, atol=1e-3, rtol=0, axes=("batch", "head", "key"))
    assert miss.index == (1, 2, 3) and miss.count == 2 and abs(miss.max_abs - 0.5) < 1e-12
    assert "batch 1, head 2, key 3" in miss.describe("x")


def test_nan_is_a_mismatch():
    a = torch.zeros(3)
    b = a.clone()
    b[1] = float("nan")
    assert mismatch(b, a, atol=1, rtol=0, axes=("i",)).index == (1,)


def test_nonfinite_and_shape_messages():
    t = torch.zeros(2, 2)
    t[1, 0] = float("nan")
    assert "NaN first at row 1, col 0" in nonfinite(t, "out", ("row", "col"))
    assert shape_problem(t, (2, 3), "out", "(B, T)") == "out has shape (2, 2), expected (B, T) = (2, 3)"
    assert shape_problem(None, (2, 3), "out", "(B, T)") == "out was not returned"


def test_unravel_matches_torch_unravel_index():
    from grader.compare import unravel
    for shape in [(7,), (2, 3), (3, 1, 4), (2, 3, 4, 5)]:
        n = 1
        for size in shape:
            n *= size
        for flat in range(n):
            assert unravel(flat, torch.Size(shape)) == tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))
