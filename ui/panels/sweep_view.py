"""The Sweeps page: open the output of `python -m engine sweep` or `plan` (an upload, or a path
under the working directory — nothing else), then its frontier (GPUs vs the top class's P99 TTFT
vs throughput), the cheapest plan, and an explorer with pickers for x, y and colour, one panel per
class. What is computed lives in `ui.charts.sweep_data` (pure); the figures in
`ui.charts.sweep_figures`; this module only lays out widgets. Names from a file or a text box reach
the page only through `sweep_data.inert`."""

from __future__ import annotations

import zlib
from pathlib import Path

import pandas as pd
import streamlit as st

from engine.sweeps.plan import top_class

from ..charts import sweep_data as sd
from ..charts import sweep_figures as sf
from ..frame.i18n import _, ngettext


def page() -> None:
    st.header(_("Sweeps"), anchor=False)
    st.caption(_("Thousands of runs, locally or on a Ray cluster: `python -m engine sweep SPEC.yaml` writes a table "
                 "(one row per run × class), `python -m engine plan SPEC.yaml` searches for the fewest GPUs that "
                 "keep every class within its SLO. Open one here."))
    data = _open()
    if data is None:
        st.info(_("Run e.g. `python -m engine sweep sweeps/reserve-policy.yaml` (it writes `runs/reserve-policy`), "
                  "then enter that directory above, or upload its `runs.parquet`."), icon=":material/info:")
    else:
        show(data)


def _open() -> sd.SweepData | None:
    """The output the user picked (an upload or a path), None until there is one; a file that cannot
    be shown gets its one-line message."""
    sources = {"Path": _("Path"), "Upload": _("Upload")}
    source = st.segmented_control(_("Open"), list(sources), format_func=sources.get, default="Path",
                                  key="swp_source")
    try:
        if source == "Upload":
            files = st.file_uploader(_("runs.parquet or runs.csv (optionally with plan.json and manifest.json)"),
                                     type=["parquet", "csv", "json"], accept_multiple_files=True, key="swp_upload")
            return sd.from_uploads([(f.name, f.getvalue()) for f in files]) if files else None
        text = st.text_input(_("Output directory (or its runs.parquet / runs.csv), under the working directory"),
                             placeholder="runs/reserve-policy", key="swp_path")
        return sd.from_path(text, Path.cwd()) if text else None
    except sd.SweepFileError as err:
        st.error(sd.inert(err), icon=":material/error:")
        return None


def show(data: sd.SweepData) -> None:
    """The frontier, the cheapest plan and the explorer for one loaded output."""
    classes = sd.class_order(data.table)
    n_seeds = data.table["seed"].nunique() if "seed" in data.table else 1
    _heading(data, len(classes), n_seeds)
    pts = _frontier(data, top_class(data.table))
    _explorer(data, classes, n_seeds)
    with st.expander(_("Settings (seeds folded)"), icon=":material/table:"):
        st.dataframe(pts, hide_index=True, width="stretch")
    with st.expander(_("Every run × class"), icon=":material/dataset:"):
        st.dataframe(data.table, hide_index=True, width="stretch")


def _heading(data: sd.SweepData, n_classes: int, n_seeds: int) -> None:
    status = " · " + _("status {s}").format(s=data.manifest.get("status")) if data.manifest else ""
    st.markdown(_("**{origin}**: {runs:,} runs × {classes} classes, {seeds} seed(s); knobs: {knobs}").format(
        origin=sd.inert(data.origin), runs=data.table["run"].nunique(), classes=n_classes, seeds=n_seeds,
        knobs=sd.inert(", ".join(data.knobs) or _("none"))) + sd.inert(status))


def _frontier(data: sd.SweepData, top: str) -> pd.DataFrame:
    """The frontier chart and the cheapest plan in words (or that no setting meets the SLOs); returns
    the points (a table further down shows them)."""
    f = sd.frontier(data, top)
    st.subheader(_("Frontier"), anchor=False)
    fig = sf.frontier(f.points, data.knobs, top=top, cheapest_runs=f.cheapest_runs, slo_s=f.slo_s)
    st.plotly_chart(fig, key="swp_frontier", theme=None)
    if not f.cheapest_runs:
        st.warning(_("No setting in this output keeps every class with an SLO within it in every seed."),
                   icon=":material/trending_up:")
        return f.points
    c = sd.cheapest_setting(f)
    if c is not None:
        gpus = int(c["gpus"])
        st.success(ngettext("Cheapest plan: **{gpus} GPU** with {what}: {top} P99 TTFT {p99:.3f} s (worst of "
                            "{seeds} seeds), {thr:,.0f} output tok/s served",
                            "Cheapest plan: **{gpus} GPUs** with {what}: {top} P99 TTFT {p99:.3f} s (worst of "
                            "{seeds} seeds), {thr:,.0f} output tok/s served", gpus).format(
            gpus=gpus, what=sd.inert(sf.settings_label(c, data.knobs)), top=sd.inert(top), p99=c["top_ttft_p99"],
            seeds=int(c["seeds"]), thr=c["served_tok_s"]), icon=":material/flag:")
        st.caption(_("Runs behind it: ") + ", ".join(f"`{r}`" for r in c["runs"] if r.isalnum()))
    return f.points


def _explorer(data: sd.SweepData, classes: list[str], n_seeds: int) -> None:
    """Pickers (fresh ones for another table) and the chart they choose."""
    table, knobs = data.table, data.knobs
    st.subheader(_("Explore"), anchor=False)
    sig = f"{zlib.crc32(repr((list(table.columns), data.origin)).encode()):08x}"
    xs, ys = sd.axis_columns(table), sd.numeric_columns(table)
    varied = sd.varied_columns(table, knobs)
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("x", xs, index=sd.default_x(xs, varied), key=f"swp_x_{sig}")
    y = c2.selectbox("y", ys, index=sd.default_y(ys), key=f"swp_y_{sig}")
    colours, default_colour = sd.colour_columns(xs, x, varied)  # column names; "(none)" is shown translated
    colour = c3.selectbox(_("colour"), colours, index=default_colour, key=f"swp_c_{sig}",
                          format_func=lambda c: _("(none)") if c == "(none)" else c)
    c4, c5, c6 = st.columns([3, 1, 1])
    shown = c4.multiselect(_("classes"), classes, default=classes, key=f"swp_cls_{sig}")
    facet = c5.toggle(_("panel per class"), value=True, key=f"swp_facet_{sig}")
    folded = c6.toggle(_("fold seeds"), value=n_seeds > 1, key=f"swp_fold_{sig}",
                       help=_("mean over seeds, bars min–max"))
    if shown:
        fig = sf.explore(table, x, y, None if colour == "(none)" else colour, facet=facet, classes=shown, knobs=knobs,
                         folded=folded and n_seeds > 1)
        st.plotly_chart(fig, key="swp_explore", theme=None)
    else:
        st.caption(_("Pick at least one class."))
