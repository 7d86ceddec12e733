"""Sweeps: explore the output of `python -m engine sweep` or `plan` — pickers for x, y and
colour, one panel per class, the frontier (GPUs vs the top class's P99 TTFT vs throughput) and
the cheapest plan. Reads an upload, or a path under the working directory (nothing else)."""

import zlib
from pathlib import Path

import streamlit as st

from engine.sweeps.plan import cheapest, pareto, points, top_class
from ui.charts import sweep_data as sd
from ui.charts import sweep_figures as sf
from ui.frame.i18n import _, ngettext
from ui.frame.state import current

current()  # the app's frame (sidebar, share link); this page reads files, not the sidebar's scenario

st.header(_("Sweeps"), anchor=False)
st.caption(_("Thousands of runs, locally or on a Ray cluster: `python -m engine sweep SPEC.yaml` writes a table "
             "(one row per run × class), `python -m engine plan SPEC.yaml` searches for the fewest GPUs that keep "
             "every class within its SLO. Open one here."))

SOURCES = {"Path": _("Path"), "Upload": _("Upload")}
source = st.segmented_control(_("Open"), list(SOURCES), format_func=SOURCES.get, default="Path", key="swp_source")
data = None
try:
    if source == "Upload":
        files = st.file_uploader(_("runs.parquet or runs.csv (optionally with plan.json and manifest.json)"),
                                 type=["parquet", "csv", "json"], accept_multiple_files=True, key="swp_upload")
        if files:
            data = sd.from_uploads([(f.name, f.getvalue()) for f in files])
    else:
        text = st.text_input(_("Output directory (or its runs.parquet / runs.csv), under the working directory"),
                             placeholder="runs/reserve-policy", key="swp_path")
        if text:
            data = sd.from_path(text, Path.cwd())
except sd.SweepFileError as err:
    st.error(sd.inert(err), icon=":material/error:")

if data is None:
    st.info(_("Run e.g. `python -m engine sweep sweeps/reserve-policy.yaml` (it writes `runs/reserve-policy`), "
              "then enter that directory above, or upload its `runs.parquet`."), icon=":material/info:")



def show(data: sd.SweepData) -> None:
    """The frontier, the cheapest plan and the explorer for one loaded output."""
    table, knobs = data.table, data.knobs
    classes = sd.class_order(table)
    top = top_class(table)
    n_runs, n_seeds = table["run"].nunique(), table["seed"].nunique() if "seed" in table else 1
    status = " · " + _("status {s}").format(s=data.manifest.get("status")) if data.manifest else ""
    st.markdown(_("**{origin}**: {runs:,} runs × {classes} classes, {seeds} seed(s); knobs: {knobs}").format(
        origin=sd.inert(data.origin), runs=n_runs, classes=len(classes), seeds=n_seeds,
        knobs=sd.inert(", ".join(knobs) or _("none"))) + sd.inert(status))

    # --- the frontier and the cheapest plan -------------------------------------------------------
    plan = data.plan or {}
    criterion = plan.get("criterion") or "p99"
    target = plan.get("target") or 0.99
    pts = points(table, knobs, criterion, target)
    pts["frontier"] = pareto(pts).to_numpy()
    best_runs = (plan.get("cheapest") or {}).get("runs") if plan else None
    if best_runs is None:
        best = cheapest(pts)
        best_runs = None if best is None else list(best["runs"])
    slo_col = table.loc[table["class"] == top, "slo_ttft_s"] if "slo_ttft_s" in table else None
    slo = float(slo_col.dropna().iloc[0]) if slo_col is not None and slo_col.notna().any() else None

    st.subheader(_("Frontier"), anchor=False)
    fig = sf.frontier(pts, knobs, top=top, cheapest_runs=best_runs, slo_s=slo)
    st.plotly_chart(fig, key="swp_frontier", theme=None)
    if best_runs:
        row = pts[pts["runs"].apply(lambda r: bool(set(best_runs) & set(r)))]
        if len(row):
            c = row.iloc[0]
            gpus = int(c["gpus"])
            what = sd.inert(sf.settings_label(c, knobs))
            st.success(ngettext("Cheapest plan: **{gpus} GPU** with {what}: {top} P99 TTFT {p99:.3f} s (worst of "
                                "{seeds} seeds), {thr:,.0f} output tok/s served",
                                "Cheapest plan: **{gpus} GPUs** with {what}: {top} P99 TTFT {p99:.3f} s (worst of "
                                "{seeds} seeds), {thr:,.0f} output tok/s served", gpus).format(
                gpus=gpus, what=what, top=sd.inert(top), p99=c["top_ttft_p99"], seeds=int(c["seeds"]),
                thr=c["served_tok_s"]), icon=":material/flag:")
            st.caption(_("Runs behind it: ") + ", ".join(f"`{r}`" for r in c["runs"] if r.isalnum()))
    else:
        st.warning(_("No setting in this output keeps every class with an SLO within it in every seed."),
                   icon=":material/trending_up:")

    # --- explorer ----------------------------------------------------------------------------------
    st.subheader(_("Explore"), anchor=False)
    sig = f"{zlib.crc32(repr((list(table.columns), data.origin)).encode()):08x}"  # fresh pickers for another table
    xs, ys = sd.axis_columns(table), sd.numeric_columns(table)
    c1, c2, c3 = st.columns(3)
    varied = [c for c in ["gpus", *knobs] if c in table and table[c].nunique(dropna=False) > 1]
    x = c1.selectbox("x", xs, index=xs.index(varied[0]) if varied and varied[0] in xs else 0, key=f"swp_x_{sig}")
    y = c2.selectbox("y", ys, index=ys.index("ttft_p99") if "ttft_p99" in ys else 0, key=f"swp_y_{sig}")
    colours = ["(none)", "class", *[c for c in xs if c != x]]  # column names (the none entry is shown translated)
    others = [c for c in varied if c != x and c in colours and c != "gpus"]
    default_colour = colours.index(others[0]) if others else 0
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

    with st.expander(_("Settings (seeds folded)"), icon=":material/table:"):
        st.dataframe(pts, hide_index=True, width="stretch")
    with st.expander(_("Every run × class"), icon=":material/dataset:"):
        st.dataframe(table, hide_index=True, width="stretch")


if data is not None:
    show(data)
