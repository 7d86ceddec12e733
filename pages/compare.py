"""Compare: two or three configurations on the same traffic (same seed), side by side."""

import streamlit as st

from engine import ScenarioError
from engine.scenario import apply_overrides, from_dict, to_dict
from ui import figures, layout, runs, text
from ui.codec import POLICIES
from ui.state import current

lab = current()
sc = lab.scenario
layout.header(lab, "Compare", "Same arrivals and lengths (same seed); only the scheduling choices differ")
classes = sc.class_names
low = classes[-1]
PRESETS = [  # (label, policy, token reserve, KV reserve, inheritance, low-class prompt cap)
    ("Sidebar", sc.scheduler.policy, sc.mitigations.p0_token_reserve, sc.mitigations.p0_kv_reserve,
     sc.mitigations.inheritance, sc.request_class(low).caps.max_prompt_tokens or 0),
    ("Priority", "priority", 0, 0, False, 0),
    ("Priority + reserve", "priority", 1024, 0, False, 0),
]

n = st.radio("Configurations", [2, 3], index=1, horizontal=True, key="cmp_n")
configs: dict[str, dict] = {}
for col, (label, policy, reserve, kvres, inherit, cap) in zip(st.columns(n), PRESETS[:n]):
    with col.container(border=True):
        name = st.text_input("Name", label, key=f"cmp_name_{label}", max_chars=30)
        o = {
            "scheduler.policy": st.selectbox("Policy", POLICIES, index=POLICIES.index(policy), key=f"cmp_pol_{label}"),
            "mitigations.p0_token_reserve": st.number_input("Token reserve", 0, 65536, reserve, 64, key=f"cmp_res_{label}"),
            "mitigations.p0_kv_reserve": st.number_input("KV reserve (blocks)", 0, 10_000_000, kvres, 16, key=f"cmp_kv_{label}"),
            "mitigations.inheritance": st.toggle("Inheritance", inherit, key=f"cmp_inh_{label}"),
        }
        c = st.number_input(f"{low} prompt cap (0 = none)", 0, 10_000_000, cap, 512, key=f"cmp_cap_{label}")
        o[f"classes.{low}.caps.max_prompt_tokens"] = c or None
        configs[name.strip() or label] = o

results, problems = {}, []
for name, o in configs.items():
    try:
        results[name] = runs.result(from_dict(apply_overrides(to_dict(sc), o)))
    except ScenarioError as err:
        problems.append(f"{name}: {err}")
for p in problems:
    st.warning(p, icon=":material/error:")
if not results:
    st.stop()

st.subheader("KPIs")
table = text.summary_table({k: r.summary for k, r in results.items()})
st.dataframe(table, width="stretch", height=36 * (len(table) + 1) + 2)
st.subheader("Time to first token, per class")
st.plotly_chart(figures.ttft_cdf({k: r.requests for k, r in results.items()}, classes), key="cmp_cdf", theme=None)
