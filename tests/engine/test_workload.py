"""The workload generator: arrival processes, length distributions, common random numbers and the
per-class prompt cap (reject or split into chained pieces)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine import from_dict, load, simulate
from engine.config.scenario import Arrival, Length
from engine.config.workload import Z90, arrivals, build, lengths, rng_for


def _gaps_cv(t: np.ndarray) -> float:
    g = np.diff(t)
    return float(g.std() / g.mean())


# ---------------------------------------------------------------------------------------------
# Arrival processes


def test_poisson_rate_and_exponential_gaps():
    t = arrivals(Arrival(process="poisson", rate=40.0, start_s=10.0), 2510.0, rng_for(1, "arrival", "A"))
    assert t.min() >= 10.0 and t.max() < 2510.0
    assert np.all(np.diff(t) >= 0)
    assert len(t) / 2500.0 == pytest.approx(40.0, rel=0.02)  # 100k arrivals: SE 0.3 %
    assert _gaps_cv(t) == pytest.approx(1.0, rel=0.03)
    # per-second counts of a Poisson process have variance ≈ mean (index of dispersion 1)
    counts = np.bincount((t - 10.0).astype(int), minlength=2500)
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.08)
    # memoryless: P(gap > 1/rate) = e^-1
    assert (np.diff(t) > 1 / 40.0).mean() == pytest.approx(np.exp(-1), abs=0.01)


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_gaps_have_the_requested_cv(cv):
    t = arrivals(Arrival(process="gamma", rate=20.0, cv=cv), 3000.0, rng_for(2, "arrival", "A"))
    assert len(t) / 3000.0 == pytest.approx(20.0, rel=0.05 if cv > 2 else 0.03)
    assert _gaps_cv(t) == pytest.approx(cv, rel=0.06)


def test_gamma_cv_is_ignored_by_poisson():
    a = arrivals(Arrival(process="poisson", rate=5.0, cv=3.0), 100.0, rng_for(0, "x"))
    b = arrivals(Arrival(process="poisson", rate=5.0, cv=1.0), 100.0, rng_for(0, "x"))
    assert np.array_equal(a, b)


def test_on_off_has_no_arrivals_in_off_windows():
    spec = Arrival(process="on_off", rate=30.0, on_s=2.0, off_s=3.0, start_s=1.0)
    t = arrivals(spec, 501.0, rng_for(3, "arrival", "A"))
    phase = (t - 1.0) % 5.0
    assert t.min() >= 1.0 and t.max() < 501.0
    assert np.all(phase < 2.0), phase[phase >= 2.0][:5]
    assert np.all(np.diff(t) > 0)
    # 100 on-windows of 2 s at 30/s
    assert len(t) == pytest.approx(100 * 2.0 * 30.0, rel=0.04)
    # every on-window is used (not just the first few)
    windows = np.unique(((t - 1.0) // 5.0).astype(int))
    assert len(windows) == 100


def test_times_are_exact_sorted_and_cut_at_duration():
    spec = Arrival(process="times", times=[3.0, 0.5, 2.25, 0.5, 10.0, 12.0])
    t = arrivals(spec, 10.0, rng_for(0, "arrival", "A"))
    assert t.tolist() == [0.5, 0.5, 2.25, 3.0]


def test_zero_rate_gives_no_arrivals():
    assert len(arrivals(Arrival(process="poisson", rate=0.0), 100.0, rng_for(0, "a"))) == 0


# ---------------------------------------------------------------------------------------------
# Lengths


def test_lognormal_median_and_p90():
    x = lengths(Length(dist="lognormal", median=400, p90=1500, max=10_000_000), 100_000, rng_for(0, "prompt", "A"))
    assert np.median(x) == pytest.approx(400, rel=0.02)
    assert np.percentile(x, 90) == pytest.approx(1500, rel=0.03)
    assert x.dtype == np.int64 and x.min() >= 1
    assert Z90 == pytest.approx(1.2815515655446004)


def test_lognormal_is_clipped_to_min_max():
    x = lengths(Length(dist="lognormal", median=400, p90=1500, min=100, max=800), 20_000, rng_for(0, "p"))
    assert x.min() == 100 and x.max() == 800
    sigma = math.log(1500 / 400) / Z90

    def above(v: float) -> float:  # P(X > v) for the lognormal before clipping
        return 0.5 * math.erfc(math.log(v / 400) / sigma / math.sqrt(2))

    assert (x == 800).mean() == pytest.approx(above(799.5), abs=0.01)  # ≈ 0.25
    assert (x == 100).mean() == pytest.approx(1 - above(100.5), abs=0.01)  # ≈ 0.09


def test_constant_and_uniform_bounds():
    assert lengths(Length(dist="constant", value=77), 5, rng_for(0, "p")).tolist() == [77] * 5
    x = lengths(Length(dist="uniform", low=10, high=14), 10_000, rng_for(0, "p"))
    assert x.min() == 10 and x.max() == 14  # inclusive at both ends
    assert set(x.tolist()) == {10, 11, 12, 13, 14}
    assert np.bincount(x)[10:].min() > 1800  # roughly uniform: 2000 each
    assert lengths(Length(dist="constant", value=500, max=300), 3, rng_for(0, "p")).tolist() == [300] * 3


def test_empirical_lengths_resample_the_column(tmp_path):
    p = tmp_path / "lens.csv"
    p.write_text("a,b\n5,x\n7,x\n9,\n0,x\n", encoding="utf-8")
    x = lengths(Length(dist="empirical", path=str(p), column="a"), 3000, rng_for(0, "p"))
    assert set(x.tolist()) == {5, 7, 9}  # 0 is not a length


# ---------------------------------------------------------------------------------------------
# Scenario-level workload


def _classes(p1_rate: float, **p1_extra) -> dict:
    return {
        "name": "crn",
        "seed": 5,
        "duration_s": 60.0,
        "kv": {"num_blocks": 5000, "block_size": 16},
        "cost": {"model": "fixed", "step_time_s": 0.01},
        "classes": {
            "P0": {"priority": 0, "arrival": {"process": "poisson", "rate": 2.0},
                   "prompt": {"dist": "lognormal", "median": 200, "p90": 800},
                   "output": {"dist": "uniform", "low": 1, "high": 50}},
            "P1": {"priority": 1, "arrival": {"process": "poisson", "rate": p1_rate},
                   "prompt": {"dist": "lognormal", "median": 300, "p90": 900},
                   "output": {"dist": "uniform", "low": 1, "high": 50}, **p1_extra},
        },
    }


def _of_class(wl, name: str):
    c = wl.class_names.index(name)
    m = wl.cls == c
    return wl.arrival_s[m], wl.prompt[m], wl.output[m]


def test_common_random_numbers_across_a_rate_change():
    a = build(from_dict(_classes(1.0)))
    b = build(from_dict(_classes(6.0)))
    ta, pa, oa = _of_class(a, "P0")
    tb, pb, ob = _of_class(b, "P0")
    assert len(ta) > 60
    assert np.array_equal(ta, tb) and np.array_equal(pa, pb) and np.array_equal(oa, ob)
    # while P1 really changed
    assert len(_of_class(b, "P1")[0]) > 3 * len(_of_class(a, "P1")[0])
    # and the merged workload is sorted by arrival
    assert np.all(np.diff(b.arrival_s) >= 0)
    # a different seed is different traffic
    other = _classes(1.0) | {"seed": 6}
    assert not np.array_equal(_of_class(build(from_dict(other)), "P0")[0], ta)


def test_common_random_numbers_in_a_simulated_run():
    ra = simulate(from_dict(_classes(1.0))).requests
    rb = simulate(from_dict(_classes(4.0))).requests
    pa = ra[ra["class"] == "P0"].sort_values("arrival_s")
    pb = rb[rb["class"] == "P0"].sort_values("arrival_s")
    assert pa["arrival_s"].tolist() == pb["arrival_s"].tolist()
    assert pa["prompt_tokens"].tolist() == pb["prompt_tokens"].tolist()


def test_prompt_cap_reject_names_the_cap():
    data = _classes(3.0, caps={"max_prompt_tokens": 400, "over_cap": "reject"})
    res = simulate(from_dict(data))
    r = res.requests
    p1 = r[r["class"] == "P1"]
    over = p1[p1["prompt_tokens"] > 400]
    assert len(over) > 10
    assert (over["status"] == "rejected").all()
    assert over["reason"].str.contains("400").all()
    assert over["reason"].str.contains("cap").all()
    assert over["reason"].str.contains("P1").all()
    assert over["first_scheduled_s"].isna().all()
    assert (p1.loc[p1["prompt_tokens"] <= 400, "status"] == "finished").all()
    # P0 has no cap: its long prompts run
    p0 = r[r["class"] == "P0"]
    assert (p0["prompt_tokens"] > 400).any() and (p0["status"] == "finished").all()
    assert res.summary["classes"]["P1"]["rejected"] == len(over)
    assert res.summary["rejected"] == len(over)


def test_prompt_cap_split_into_chained_pieces():
    cap = 250
    plain = build(from_dict(_classes(3.0)))
    _, orig_prompts, _ = _of_class(plain, "P1")
    data = _classes(3.0, caps={"max_prompt_tokens": cap, "over_cap": "split"})
    res = simulate(from_dict(data))
    r = res.requests
    assert (r["status"] == "finished").all()
    p1 = r[r["class"] == "P1"]
    assert (p1["prompt_tokens"] <= cap).all()
    # group pieces by their first piece; unsplit requests have parent -1
    key = np.where(p1["parent"] >= 0, p1["parent"], p1["id"])
    groups = p1.assign(_k=key).groupby("_k", sort=True)
    assert len(groups) == len(orig_prompts)
    firsts = r.set_index("id").loc[list(groups.groups)]
    # one logical request per original, in arrival order: prompts sum to the original
    order = np.argsort(firsts["arrival_s"].to_numpy(), kind="stable")
    totals = groups["prompt_tokens"].sum().to_numpy()[order]
    assert sorted(totals.tolist()) == sorted(orig_prompts.tolist())
    n_split = 0
    for k, g in groups:
        g = g.sort_values("id")
        if len(g) == 1:
            assert g["parent"].iloc[0] == -1
            continue
        n_split += 1
        assert (g["parent"] == k).all()
        prompts = g["prompt_tokens"].to_numpy()
        # all pieces but the last are exactly the cap
        assert (prompts[:-1] == cap).all() and 1 <= prompts[-1] <= cap
        # chained: piece j+1 arrives when piece j finishes — under async scheduling just after the
        # call that took that finish in, if the call built a step (the next float)
        fin = g["finish_s"].to_numpy()
        arr = g["arrival_s"].to_numpy()
        assert ((arr[1:] == fin[:-1]) | (arr[1:] == np.nextafter(fin[:-1], np.inf))).all(), (arr, fin)
        assert (g["first_scheduled_s"].to_numpy()[1:] >= fin[:-1]).all()
    assert n_split > 5
    # the summary counts one client request per original
    assert res.summary["classes"]["P1"]["n"] == len(orig_prompts)
    assert res.summary["classes"]["P1"]["completed"] == len(orig_prompts)


def _one_split_request(blocks: int, block_size: int, prompt: int, output: int, cap: int) -> dict:
    """One request at t=0 of class A whose prompt is over A's cap and gets split."""
    return {
        "duration_s": 10.0,
        "kv": {"num_blocks": blocks, "block_size": block_size},
        "cost": {"model": "fixed", "step_time_s": 0.01},
        "classes": {"A": {"priority": 0, "arrival": {"process": "times", "times": [0.0]},
                          "prompt": {"dist": "constant", "value": prompt},
                          "output": {"dist": "constant", "value": output},
                          "caps": {"max_prompt_tokens": cap, "over_cap": "split"}}},
    }


def test_split_piece_outputs_cover_the_original_output():
    res = simulate(from_dict(_one_split_request(100, 16, 1000, 10, 300)))
    r = res.requests.sort_values("id")
    assert r["prompt_tokens"].tolist() == [300, 300, 300, 100]
    assert r["parent"].tolist() == [0, 0, 0, 0]
    assert r["output_tokens"].sum() >= 10
    assert (r["status"] == "finished").all()
    assert r["arrival_s"].tolist()[1:] == r["finish_s"].tolist()[:-1]
    s = res.summary["classes"]["A"]
    assert s["n"] == 1 and s["completed"] == 1
    # e2e of the logical request runs from the first piece's arrival to the last piece's finish
    assert s["e2e_p99"] == pytest.approx(r["finish_s"].max() - 0.0)


def test_split_pieces_after_a_rejected_piece_are_not_left_pending():
    # pieces: 9 + 1 prompt tokens; the first needs 9 blocks of the 8 and is rejected at arrival
    r = simulate(from_dict(_one_split_request(8, 1, 10, 1, 9))).requests.sort_values("id")
    assert r["prompt_tokens"].tolist() == [9, 1]
    assert r["status"].iloc[0] == "rejected"
    # the request as a whole is over: no row may be left pending, and each non-finished row says why
    assert set(r["status"].astype(str)) <= {"finished", "rejected", "unfinished"}
    assert (r.loc[r["status"] != "finished", "reason"].str.len() > 0).all()


def test_expected_requests_is_the_mean_arrival_count():
    from engine.config.workload import expected_requests

    sc = load("default")
    assert expected_requests(sc) == pytest.approx((0.5 + 3 + 0.05) * 90)
    sc = from_dict({"duration_s": 10, "classes": {
        "A": {"arrival": {"process": "times", "times": [1, 2, 30]}},
        "B": {"arrival": {"process": "on_off", "rate": 4, "on_s": 1, "off_s": 3, "start_s": 2}}}})
    assert expected_requests(sc) == pytest.approx(2 + 4 * 8 * 0.25)
