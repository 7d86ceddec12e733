"""The lessons' bar chart stays readable at 1280 px: runs are numbered under the bars and named in
the legend (long labels used to overlap), and the SLO is in the panel's title (a label on the line
was covered by the bars)."""

from ui.charts.fig_workshop import runs_bars


def summary(**p99) -> dict:
    return {"classes": {c: {"ttft_p99": v, "rejected": 0, "unfinished": 0} for c, v in p99.items()}}


def test_runs_are_numbered_under_the_bars_and_named_in_the_legend():
    labels = ["priority policy", "+ 1024-token reserve", "+ 400-block KV reserve"]
    fig = runs_bars(labels, [summary(P0=5.78, P1=14.5), summary(P0=5.78, P1=14.6), summary(P0=1.47, P1=3.0)],
                    {"P0": 1.0, "P1": None})
    bars = [t for t in fig.data if t.type == "bar"]
    assert [list(b.x) for b in bars] == [["1", "2", "3"]] * 2
    assert list(bars[0].customdata) == labels  # the full label on hover
    legend = [t.name for t in fig.data if t.type == "scatter"]
    assert legend == ["1 · priority policy", "2 · + 1024-token reserve", "3 · + 400-block KV reserve"]
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["P0 · P99 TTFT (s), SLO 1 s", "P1 · P99 TTFT (s)"]  # no other annotation
    assert [s.y0 for s in fig.layout.shapes] == [1.0]
    # every panel's axis counts runs: no 0.5/1.5/2.5 ticks where the legend's markers sit (seen at 1280 px)
    assert [fig.layout[a].type for a in ("xaxis", "xaxis2")] == ["category", "category"]


def test_the_recaps_slo_is_in_its_panels_title_not_on_the_best_bars_label():
    """At 1280 px the "SLO 1 s" label on the line sat on the best remedy's bar label ("2 GPUs …: 0.713 s")."""
    import pandas as pd

    from ui.charts.fig_workshop import remedies_bars

    t = pd.DataFrame({"label": ["2 GPUs: P0 + P1 on one, P2 on the other", "vLLM FCFS (no remedy)"],
                      "p0_p99": [0.713, 17.2], "throughput": [347.0, 338.0]})
    fig = remedies_bars(t, 1.0)
    assert [a.text for a in fig.layout.annotations] == ["P0 · P99 TTFT (s), SLO 1 s", "Served rate (tok/s)"]
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(1.0, 1.0)]  # the line is still drawn
    assert list(fig.data[0].text) == ["0.713 s", "17.2 s"]
    assert [a.text for a in remedies_bars(t, None).layout.annotations][0] == "P0 · P99 TTFT (s)"
