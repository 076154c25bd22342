"""The server-side SVG charts: readable ticks, every point drawn, counts per bin, text escaped."""
import pytest

from grader.app.pages.charts import histogram, line_chart, loss_chart, nice_ticks


@pytest.mark.parametrize("lo, hi, expected", [(0, 4.1, [0, 1, 2, 3, 4, 5]), (0, 300, [0, 100, 200, 300]),
                                              (0, 15, [0, 5, 10, 15]), (0, 0, [0, 0.2, 0.4, 0.6, 0.8, 1.0])])
def test_ticks_are_round_and_cover_the_range(lo, hi, expected):
    ticks = nice_ticks(lo, hi, 4 if hi in (300, 15) else 5)
    assert ticks == pytest.approx(expected), ticks


def test_the_loss_chart_draws_every_point_and_the_baseline():
    metrics = {"loss_curve": [3.0, 2.0, 1.5, 1.0], "loss_curve_every": 3, "steps": 12, "baseline_loss": 2.5}
    svg = str(loss_chart(metrics))
    assert svg.count("<circle") == 4 and "<polyline" in svg
    assert "step 12: loss 1</title>" in svg, "the last point is at the last step"
    assert "unigram baseline 2.5" in svg and 'stroke-dasharray="6 4"' in svg
    assert "style=" not in svg, "no inline styles: the pages' CSP forbids them"


def test_no_curve_means_no_chart():
    assert loss_chart({"final_loss": 1.0}) is None
    assert "no data" in str(line_chart([], title="t", x_label="x", y_label="y"))


def test_the_histogram_counts_each_value_once_with_the_maximum_in_the_last_bin():
    svg = str(histogram([0, 1.4, 1.6, 15, 15, 7.5], 15, title="Spec", bins=10))
    assert "0–1.5 points: 2 students" in svg and "13.5–15 points: 2 students" in svg and "7.5–9 points: 1 student<" in svg
    assert "6 students" in svg


def test_chart_text_is_escaped():
    svg = str(histogram([1], 5, title="<script>alert(1)</script>"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
