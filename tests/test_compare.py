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


def test_infinity_never_equals_infinity():
    a = torch.zeros(2, 3, dtype=torch.float64)
    a[1, 2] = float("inf")
    miss = mismatch(a, a.clone(), atol=1, rtol=1, axes=("row", "col"))
    assert miss is not None and miss.index == (1, 2) and miss.count == 1
    assert "at row 1, col 2 got inf, expected inf (a non-finite value never counts as equal" in miss.describe("x")


def test_nan_never_equals_nan():
    a = torch.full((4,), float("nan"), dtype=torch.float64)
    miss = mismatch(a, a.clone(), atol=1e9, rtol=1e9, axes=("i",))
    assert miss is not None and miss.count == 4 and miss.index == (0,)


def test_nonfinite_reference_is_a_mismatch_even_where_the_answer_is_finite():
    a, e = torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    e[2] = float("-inf")
    miss = mismatch(a, e, atol=1, rtol=0, axes=("i",))
    assert miss.index == (2,) and "expected -inf" in miss.describe("x")


def test_nonfinite_is_named_before_a_larger_finite_difference():
    a, e = torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    a[0], a[2] = 1e6, float("nan")
    miss = mismatch(a, e, atol=1e-3, rtol=0, axes=("i",))
    assert miss.index == (2,) and miss.count == 2
