"""The presenter's live figures: the room's estimates over the seed band, the answers' counts."""

from __future__ import annotations

import math

from ui.charts.fig_room import choices_bars, estimates_histogram


def test_the_histogram_counts_every_estimate_and_draws_the_band():
    values = [1.0, 1.1, 1.2, 2.0, 2.5, 3.0, 3.0, 4.0, 5.0, 6.0]
    fig = estimates_histogram(values, 2.0, 4.0, 2.6, "s")
    bars = [t for t in fig.data if t.type == "bar"]
    assert sum(bars[0].y) == len(values)
    band = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(band) == 1 and (band[0].x0, band[0].x1) == (2.0, 4.0)
    assert any(s.type == "line" and s.x0 == 2.6 for s in fig.layout.shapes)
    assert "10" in fig.layout.title.text


def test_wild_guesses_go_on_a_log_axis():
    fig = estimates_histogram([0.5, 1.0, 2.0, 50.0], 1.5, 3.0, 2.0, "×")
    band = [s for s in fig.layout.shapes if s.type == "rect"][0]
    assert math.isclose(band.x0, math.log10(1.5)) and math.isclose(band.x1, math.log10(3.0))
    assert sum(fig.data[0].y) == 4 and fig.layout.xaxis.tickvals


def test_no_estimates_and_no_band_yet():
    fig = estimates_histogram([], None, None, None, "s")
    assert not fig.data and not fig.layout.shapes


def test_the_answer_is_marked_once_revealed():
    before = choices_bars([3, 0, 7], ["a", "b", "c"], None)
    after = choices_bars([3, 0, 7], ["a", "b", "c"], 2)
    assert list(before.data[0].x) == [3, 0, 7] and len(set(before.data[0].marker.color)) == 1
    assert after.data[0].marker.color[2] != after.data[0].marker.color[0]


def test_the_curve_figure_has_the_band_the_run_and_the_drawn_points():
    from ui.charts.fig_curve import curve_figure
    from ui.teach.estimate import curve_points

    curve = {"metric": "P0.ttft_p99", "at": [0, 1024, 2048]}
    bands = {"points": [{"min": 0.8, "max": 1.0, "median": 0.9}, {"min": 0.6, "max": 0.8, "median": 0.7},
                        {"min": 0.4, "max": 0.5, "median": 0.45}]}
    fig = curve_figure(curve_points(curve, bands, [1.2, None, 0.3]), [0.85, 0.7, None], "reserve", "P0 P99 (s)")
    names = [t.name for t in fig.data]
    assert "your curve" in names and "the run shown" in names and "seed band (min–max)" in names
    yours = fig.data[names.index("your curve")]
    assert list(yours.x) == [0, 2048] and list(yours.y) == [1.2, 0.3]  # the point not drawn is left out
    lo = fig.data[names.index("seed band (min–max)")]
    assert list(lo.y) == [0.8, 0.6, 0.4] and lo.fill == "tonexty"


def test_the_rooms_curves_are_drawn_faintly_and_the_band_only_once_given():
    from ui.charts.fig_room import curves_figure

    at = [0, 1024, 2048, 4096]
    drawn = [[1.0, 0.8, 0.6, 0.5], [2.0, None, 1.0, 0.9], [None, None, None, None], [1.0, 2.0]]  # blank, malformed
    before = curves_figure(drawn, at, None, None, "reserve (tokens)", "P0 P99 TTFT (s)")
    lines = [t for t in before.data if t.legendgroup == "drawn"]
    assert len(lines) == 2 and all(t.opacity < 0.5 for t in lines)  # one faint line per drawn curve
    assert list(lines[1].y) == [2.0, None, 1.0, 0.9] and lines[1].connectgaps is False  # a blank is a gap
    assert sum(bool(t.showlegend) for t in lines) == 1 and before.layout.title.text == "Curves: 2"
    assert not [t for t in before.data if t.fill == "tonexty"]  # no band before the reveal
    bands = [{"min": 0.8, "max": 1.2, "median": 1.0}, {"min": 0.6, "max": 0.9, "median": 0.7},
             {"min": 0.5, "max": 0.7, "median": 0.6}, {"min": 0.4, "max": 0.6, "median": 0.5}]
    after = curves_figure(drawn, at, bands, [1.0, 0.7, 0.6, None], "reserve (tokens)", "P0 P99 TTFT (s)")
    names = [t.name for t in after.data]
    band = after.data[names.index("seed band (min–max)")]
    assert list(band.y) == [0.8, 0.6, 0.5, 0.4] and band.fill == "tonexty"
    assert list(after.data[names.index("this run")].y) == [1.0, 0.7, 0.6, None]
    assert list(after.layout.xaxis.tickvals) == at and after.layout.yaxis.type != "log"


def test_wild_curves_go_on_a_log_axis():
    from ui.charts.fig_room import curves_figure

    fig = curves_figure([[1.0, 0.5], [80.0, 60.0]], [0, 2048], None, None, "x", "y")
    assert fig.layout.yaxis.type == "log"
