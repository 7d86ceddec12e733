"""AppTest: the workshop ends with a decision — on the workshop's traffic, and on the user's own
scenario with an uploaded trace (`ui.teach.decision_view`)."""

import time

from streamlit.testing.v1 import AppTest

from engine.config.scenario import load_raw
from tests.support.apptest import open_page
from ui.frame import uploads


def settled(at: AppTest, timeout_s: float = 300.0) -> AppTest:
    """Rerun until the decision has nothing left to run (its fragment polls in a browser)."""
    deadline = time.monotonic() + timeout_s
    while any("Running" in c.value for c in at.caption):
        assert time.monotonic() < deadline, [c.value for c in at.caption if "Running" in c.value]
        time.sleep(0.5)
        at.run()
        assert not at.exception
    return at


def recap(**query) -> AppTest:
    return open_page("pages/workshop.py", timeout=90, run=False, **{"lesson": "recap", "seeds": "2", **query})


def tables(at: AppTest) -> list:
    """Every table on the page: the scrolling ones, then the static ones (the candidates: cells wrap)."""
    return [d.value for d in at.dataframe] + [t.value for t in at.table]


def test_the_workshop_ends_with_a_decision_on_its_own_traffic():
    at = settled(recap().run())
    assert not at.exception
    assert at.radio(key="ws_decide_on").value == "workshop"
    reasons = [t for t in tables(at) if "wait reason" in t.columns]
    assert len(reasons) == 2  # as shipped (FCFS), then under priority: the order hid the KV waits
    assert reasons[0]["wait reason"].iloc[0].startswith("head_of_line")
    assert reasons[1]["wait reason"].iloc[0].startswith("kv_short")
    (cands,) = [t for t in tables(at) if "P0 within its SLO" in t.columns]
    assert list(cands["configuration"])[:2] == ["as is", "priority policy"]
    split = "priority policy + P2 prompts split at 4,096 tokens"  # half of classic-inversion's 8,192 budget
    assert split in set(cands["configuration"])
    row = cands.set_index("configuration")
    assert row.at["as is", "P0 within its SLO"] == "0 of 2 seeds"
    assert row.at[split, "P0 within its SLO"] == "2 of 2 seeds"
    assert row.at[split, "vs as is"] == "better on 2 of 2 seeds"
    assert row.at["as is", "requests behind"].endswith("requests")
    (decision,) = [s.value for s in at.success if "**Decision:" in s.value]
    assert decision.startswith(f"**Decision: {split}.**") and "on 2 of 2 seeds" in decision
    assert "Provisional" not in decision  # every candidate's capacity is in
    assert len(at.get("plotly_chart")) == 2  # the recap's bars and the decision's benefit against cost


def test_the_decision_reads_the_users_uploaded_trace():
    rows = "\n".join(f"{i * 0.05:.2f},{2000 + (i * 37) % 3000},50" for i in range(400))
    data = f"arrived_at,num_prefill_tokens,num_decode_tokens\n{rows}\n".encode()
    state: dict = {}  # the trace's folder lives as long as this
    up = uploads.try_trace(load_raw("budget-bound"), "mine.csv", data, state)
    assert up.error is None, up.error
    at = recap(preset="budget-bound")
    at.session_state["_upload_raw"] = up.raw
    at.run()
    at.radio(key="ws_decide_on").set_value("sidebar").run()
    at = settled(at)
    assert not at.exception
    assert "an uploaded scenario" in at.radio(key="ws_decide_on").options[1]
    (reasons,) = [t for t in tables(at) if "wait reason" in t.columns]
    assert list(reasons["wait reason"].str.split(":").str[0]) == ["token_budget"]  # P0 waited on the budget only
    assert list(reasons["share of the wait"]) == ["100%"]
    (cands,) = [t for t in tables(at) if "P0 within its SLO" in t.columns]
    names = list(cands["configuration"])
    assert names[0] == "as is" and len(names) == 2 and names[1].startswith("lendable token reserve of ")
    assert [m for m in at.markdown if "**Token reserve**: P0's prompts, 90th percentile" in m.value]
    assert [s for s in at.success if "**Decision:" in s.value] or [w for w in at.warning if "No decision" in w.value]


def test_the_decision_renders_in_chinese():
    at = settled(recap(lang="zh").run())
    assert not at.exception
    assert [s for s in at.subheader if s.value.startswith("决定：")]
    assert [s for s in at.success if "**决定：" in s.value]
