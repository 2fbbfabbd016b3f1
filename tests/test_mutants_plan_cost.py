"""Tests that kill the mutants of verbs/plan/cost.py that survived the suite (issue 23, mutation testing; the run and
its module → test-file table are in benchmarks/mutation_score.sh).

Every figure is worked out by hand in the test's docstring: the buy-vs-rent model of
shared/reference/anchors-planning-diagnosis.md section 7 (the module docstring), a month of 8,760 / 12 = 730 hours,
the DGX H100's published 10.2 kW maximum (NVIDIA DGX H100/H200 User Guide), a DGX H100 at ~$270,000 (SemiAnalysis,
May 2023) and README's estimate for an unknown platform (350 W per CPU socket, one socket up to 4 GPUs, 200 W base +
100 W per GPU). The error texts are the catalogue's (locale/en/LC_MESSAGES/cli_errors.po, plan_console.po).
"""

from __future__ import annotations

import math

import pytest

from gpuready.verbs.plan.cost import PricesError, cost_plan, load_prices
from gpuready.estimate.machine import Machine, machine_from_description

NEVER = "{way}: energy alone costs as much as renting or more; renting is cheaper at any utilisation"


def _prices_error(*args, **kwargs) -> str:
    with pytest.raises(PricesError) as raised:
        load_prices(*args, **kwargs)
    return str(raised.value)


def _file(tmp_path, text: str):
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------ two DGX H100 nodes, by hand

TWO_NODES = dict(purchase_usd_per_gpu=25_000, server_usd_per_gpu=5_000, rent_usd_per_gpu_hour=3.0,
                 electricity_usd_per_kwh=0.10, pue=1.5, operations_usd_per_node_month=1_000,
                 colocation_usd_per_kw_month=200)


def test_two_dgx_h100_nodes_at_half_utilisation_over_40_months():
    """16 H100 on 2 nodes, 40 months, 50 %; prices given as options (none assumed).
      full load   2 × 10.2 kW (DGX H100 maximum)            = 20.4 kW
      energy      20.4 × 730 × 1.5 (PUE) × $0.10 = $2,233.8 a full month; × 0.5 = $1,116.9
      capex       (25,000 + 5,000) × 16                    = $480,000; / 40 months = $12,000 a month
      operations  $1,000 × 2 nodes                         = $2,000
      colo fee    $200 × 20.4 kW                           = $4,080
      rent        $3.0 × 16 × 730 = $35,040 a full month; × 0.5 = $17,520
      buy         12,000 + 2,000 + 1,116.9                 = $15,116.9
      colocation  12,000 + 2,000 + 4,080 + 1,116.9         = $19,196.9
      GPU-hours   16 × 730 × 0.5 = 5,840: buy 15,116.9 / 5,840 = 2.5885103, colocation 19,196.9 / 5,840 = 3.2871404,
                  rent 17,520 / 5,840 = 3.0 (renting costs its hourly price per GPU-hour used)
      40 months   buy 604,676, colocation 767,876, rent 700,800
      break-even  margin 35,040 − 2,233.8 = 32,806.2: buy 14,000 / 32,806.2 = 0.4267486 (43 %),
                  colocation 18,080 / 32,806.2 = 0.5511153 (55 %)
      holding     15,116.9 / (25,000 × 16 = 400,000) = 3.779 % a month."""
    plan = cost_plan(machine_from_description("8xH100-SXM", nodes=2), horizon_months=40, utilisation=0.5,
                     prices=load_prices(**TWO_NODES))
    assert (plan["machine"], plan["gpus"], plan["nodes"], plan["horizon_months"], plan["utilisation"],
            plan["hours_per_month"]) == ("H100 SXM", 16, 2, 40, 0.5, 730)
    assert plan["full_load_kw"] == pytest.approx(20.4)
    assert str(plan["full_load_basis"]) == "published maximum of the NVIDIA DGX H100 / H200"
    assert plan["capex"] == 480_000
    approx = pytest.approx
    assert plan["monthly"] == {
        "buy": {"total": approx(15_116.9), "depreciation": 12_000, "energy": approx(1_116.9), "operations": 2_000},
        "colocation": {"total": approx(19_196.9), "depreciation": 12_000, "energy": approx(1_116.9),
                       "operations": 2_000, "colocation_fee": approx(4_080)},
        "rent": {"total": approx(17_520)}}
    assert plan["per_gpu_hour"] == {"buy": approx(2.5885103), "colocation": approx(3.2871404), "rent": approx(3.0)}
    assert plan["total_over_horizon"] == {"buy": approx(604_676), "colocation": approx(767_876),
                                          "rent": approx(700_800)}
    assert plan["break_even_utilisation"] == {"buy": approx(0.4267486), "colocation": approx(0.5511153)}
    assert plan["cheapest"] == "buy"
    assert plan["holding_cost_share_per_month"] == approx(0.03779225)
    assert (plan["assumed"], plan["missing"]) == ([], [])
    assert plan["message_id"] == "plan.cost.summary"
    assert plan["message"] == (
        "At 50% utilisation over 40 months: buy $15,117, colocation $19,197, rent $17,520 a month; cheapest: buy. "
        "buy: cheaper than renting above 43% utilisation; colocation: cheaper than renting above 55% utilisation. "
        "Holding cost (buy) ≈ 3.8% of the GPUs' price a month.")


def test_default_horizon_is_36_months_and_default_utilisation_60_percent():
    """8 × H100 with the table's sourced GPU prices (27,500 + 6,250 = 33,750 a GPU: a DGX H100 ~$270,000 / 8), and
    electricity $0.10, PUE 1.0, operations 0, colocation 0 given:
      depreciation 270,000 / 36 = $7,500 a month; energy 10.2 × 730 × 1.0 × 0.10 = 744.6 × 0.6 = 446.76;
      buy 7,946.76; rent 3.24 × 8 × 730 = 18,921.6 × 0.6 = 11,352.96; break-even 7,500 / (18,921.6 − 744.6 =
      18,177) = 0.41261 (41 %); holding 7,946.76 / 220,000 = 3.6 %."""
    plan = cost_plan(machine_from_description("8xH100-SXM"),
                     prices=load_prices(electricity_usd_per_kwh=0.10, pue=1.0, operations_usd_per_node_month=0,
                                        colocation_usd_per_kw_month=0))
    assert (plan["horizon_months"], plan["utilisation"]) == (36, 0.6)
    assert plan["monthly"]["buy"]["depreciation"] == 7_500
    assert plan["monthly"]["buy"]["total"] == pytest.approx(7_946.76)
    assert plan["break_even_utilisation"]["buy"] == pytest.approx(0.412609, abs=1e-6)
    assert plan["message"] == (
        "At 60% utilisation over 36 months: buy $7,947, colocation $7,947, rent $11,353 a month; cheapest: buy. "
        "buy: cheaper than renting above 41% utilisation; colocation: cheaper than renting above 41% utilisation. "
        "Holding cost (buy) ≈ 3.6% of the GPUs' price a month.")


# ------------------------------------------------------------------------------ horizon and utilisation bounds

def test_a_one_month_horizon_writes_the_whole_capex_off_in_that_month():
    """Horizon 1: depreciation = capex = (25,000 + 5,000) × 16 = $480,000 in the one month."""
    plan = cost_plan(machine_from_description("8xH100-SXM", nodes=2), horizon_months=1,
                     prices=load_prices(**TWO_NODES))
    assert plan["monthly"]["buy"]["depreciation"] == 480_000


@pytest.mark.parametrize("months", [0, True, 12.5])
def test_a_horizon_that_is_not_a_whole_number_of_months_from_one_is_refused(months):
    with pytest.raises(ValueError) as raised:
        cost_plan(machine_from_description("8xH100-SXM"), horizon_months=months)
    assert str(raised.value) == f"horizon_months must be a whole number of months >= 1, not {months!r}"


@pytest.mark.parametrize("share", [-0.1, 1.5, math.nan])
def test_a_utilisation_outside_0_to_1_is_refused(share):
    with pytest.raises(ValueError) as raised:
        cost_plan(machine_from_description("8xH100-SXM"), utilisation=share)
    assert str(raised.value) == f"utilisation must be between 0 and 1, not {share!r}"


def test_at_zero_utilisation_renting_costs_nothing_and_no_gpu_hour_has_a_price():
    """0 %: no GPU-hour is used (per GPU-hour: none), rent and energy are 0, buy is its fixed 12,000 + 2,000."""
    plan = cost_plan(machine_from_description("8xH100-SXM", nodes=2), horizon_months=40, utilisation=0.0,
                     prices=load_prices(**TWO_NODES))
    assert plan["per_gpu_hour"] == {"buy": None, "colocation": None, "rent": None}
    assert (plan["monthly"]["buy"]["total"], plan["monthly"]["rent"]["total"]) == (14_000, 0)
    assert plan["cheapest"] == "rent"


def test_at_full_utilisation_renting_costs_the_whole_month():
    """100 %: rent 3.0 × 16 × 730 = $35,040; energy the full 2,233.8; per GPU-hour rent 35,040 / 11,680 = 3.0."""
    plan = cost_plan(machine_from_description("8xH100-SXM", nodes=2), horizon_months=40, utilisation=1.0,
                     prices=load_prices(**TWO_NODES))
    assert plan["monthly"]["rent"]["total"] == pytest.approx(35_040)
    assert plan["monthly"]["buy"]["energy"] == pytest.approx(2_233.8)
    assert plan["per_gpu_hour"]["rent"] == pytest.approx(3.0)


# ------------------------------------------------------------------------------ break-even cases, by hand

def _one_gpu(rent: float, operations: float) -> dict:
    """One GPU of unknown power, free to buy and power (purchase, server, electricity and colocation 0): the fixed
    cost is the operations alone and the margin the rent alone, rent × 730 a full month."""
    prices = load_prices(purchase_usd_per_gpu=0, server_usd_per_gpu=0, rent_usd_per_gpu_hour=rent,
                         electricity_usd_per_kwh=0, pue=1.0, operations_usd_per_node_month=operations,
                         colocation_usd_per_kw_month=0)
    return cost_plan(Machine(gpu_name="Mystery GPU", gpus_per_node=1), horizon_months=12, utilisation=0.5,
                     prices=prices)


def test_a_break_even_of_exactly_100_percent_still_reads_above():
    """Rent $1 × 730 = $730 a full month; operations $730: break-even 730 / 730 = 1.0 → "above 100%". GPUs that cost
    nothing have no holding share: the sentence is left out. Rent at 50 %: $365; buy $730."""
    plan = _one_gpu(rent=1.0, operations=730)
    assert plan["break_even_utilisation"] == {"buy": 1.0, "colocation": 1.0}
    assert plan["holding_cost_share_per_month"] is None
    assert plan["message"] == (
        "At 50% utilisation over 12 months: buy $730, colocation $730, rent $365 a month; cheapest: rent. "
        "buy: cheaper than renting above 100% utilisation; colocation: cheaper than renting above 100% utilisation.")


def test_a_break_even_above_100_percent_says_renting_is_cheaper():
    """Operations $1,095 over rent $730: 1,095 / 730 = 1.5 → "would need 150% utilisation"."""
    plan = _one_gpu(rent=1.0, operations=1_095)
    assert plan["break_even_utilisation"]["buy"] == pytest.approx(1.5)
    assert "buy: would need 150% utilisation to match renting; renting is cheaper; colocation: would need 150% " \
           "utilisation to match renting; renting is cheaper." in plan["message"]


def test_a_margin_below_one_dollar_still_has_a_break_even():
    """Rent $0.001 × 730 = $0.73 a full month; operations $0.365: 0.365 / 0.73 = 0.5 → "above 50%"."""
    plan = _one_gpu(rent=0.001, operations=0.365)
    assert plan["break_even_utilisation"]["buy"] == pytest.approx(0.5)
    assert "buy: cheaper than renting above 50% utilisation" in plan["message"]


def test_no_margin_over_energy_means_no_break_even():
    """Rent $0 and energy $0: margin 0, nothing to divide by: renting is cheaper at any utilisation."""
    plan = _one_gpu(rent=0, operations=100)
    assert plan["break_even_utilisation"] == {"buy": None, "colocation": None}
    assert (NEVER.format(way="buy") + "; " + NEVER.format(way="colocation") + ".") in plan["message"]


# ------------------------------------------------------------------------------ prices: origins, units, listing

def test_load_prices_marks_defaults_and_overrides():
    """The three sections the docstring names; table rows say origin `default`; an option keeps the table's unit
    (electricity in USD per kWh) but has no date, and names `option` as its source."""
    prices = load_prices(electricity_usd_per_kwh=0.2, rent_usd_per_gpu_hour=2.0)
    assert sorted(prices) == ["any_gpu", "gpu", "site"]
    assert prices["gpu"]["H100 SXM"]["purchase_usd_per_gpu"]["origin"] == "default"
    assert prices["site"]["pue"]["origin"] == "default"
    assert prices["site"]["electricity_usd_per_kwh"] == {"value": 0.2, "unit": "USD per kWh", "as_of": None,
                                                         "source": "option", "origin": "option"}
    assert prices["any_gpu"] == {"rent_usd_per_gpu_hour": {"value": 2.0, "unit": "", "as_of": None,
                                                           "source": "option", "origin": "option"}}


def test_a_file_price_for_a_known_gpu_keeps_its_unit_a_new_gpu_has_none(tmp_path):
    path = _file(tmp_path, '[gpu."H100 SXM"]\nrent_usd_per_gpu_hour = 2.0\n[gpu."L4"]\nrent_usd_per_gpu_hour = 0.5\n')
    prices = load_prices(path)
    assert prices["gpu"]["H100 SXM"]["rent_usd_per_gpu_hour"] == {
        "value": 2.0, "unit": "USD per GPU-hour", "as_of": None, "source": f"file {path}", "origin": f"file {path}"}
    assert prices["gpu"]["L4"]["rent_usd_per_gpu_hour"]["unit"] == ""


def test_the_plan_lists_each_price_with_its_unit_and_the_assumed_ones_for_an_h200():
    """8 × H200: the H200's purchase and server prices are placeholders (source "assumption"), its rent is AWS's
    $43.26 / 8 = 5.4075 per GPU-hour; the site's electricity, PUE and operations are assumptions too."""
    plan = cost_plan(machine_from_description("8xH200"))
    assert plan["assumed"] == ["purchase_usd_per_gpu", "server_usd_per_gpu", "electricity_usd_per_kwh", "pue",
                               "operations_usd_per_node_month"]
    rent = next(item for item in plan["prices"] if item["name"] == "rent_usd_per_gpu_hour")
    assert (rent["value"], rent["unit"], rent["origin"]) == (5.4075, "USD per GPU-hour", "default")
    assert plan["message"].endswith(" Assumed prices (no source, override them): purchase_usd_per_gpu, "
                                    "server_usd_per_gpu, electricity_usd_per_kwh, pue, operations_usd_per_node_month.")


def test_hand_made_prices_without_unit_or_origin_count_as_defaults():
    """A prices dict of bare values (no unit, no origin, no source): each is listed with unit "" and origin default,
    none as assumed. 1 GPU of unknown power: 350 W CPU + 200 + 100 W = 0.65 kW; energy 0.65 × 730 × 1 × 0.2 =
    $94.9 a full month, × 0.5 = 47.45; buy 1,200 / 12 + 100 + 47.45 = 247.45."""
    values = {"purchase_usd_per_gpu": 1_000, "server_usd_per_gpu": 200, "rent_usd_per_gpu_hour": 1.0,
              "electricity_usd_per_kwh": 0.2, "colocation_usd_per_kw_month": 0, "pue": 1.0,
              "operations_usd_per_node_month": 100}
    prices = {"any_gpu": {key: {"value": values[key]} for key in list(values)[:3]},
              "site": {key: {"value": values[key]} for key in list(values)[3:]}}
    plan = cost_plan(Machine(gpu_name="Mystery GPU", gpus_per_node=1), horizon_months=12, utilisation=0.5,
                     prices=prices)
    assert {(item["unit"], item["origin"], item["source"]) for item in plan["prices"]} == {("", "default", None)}
    assert plan["assumed"] == []
    assert plan["monthly"]["buy"]["total"] == pytest.approx(247.45)


def test_an_unpriced_gpu_names_what_is_missing():
    plan = cost_plan(machine_from_description("2xL4"))
    assert (plan["machine"], plan["gpus"], plan["nodes"], plan["horizon_months"], plan["utilisation"],
            plan["hours_per_month"]) == ("L4", 2, 1, 36, 0.6, 730)
    assert plan["missing"] == ["purchase_usd_per_gpu", "server_usd_per_gpu", "rent_usd_per_gpu_hour"]
    assert plan["refs"] == ["gpuready's buy-vs-rent arithmetic (own = capital / horizon + energy + operations; "
                            "prices with their sources in knowledge/prices.toml)"]  # a public source (issue 32)
    assert plan["message"] == ("No price for purchase_usd_per_gpu, server_usd_per_gpu, rent_usd_per_gpu_hour of the "
                               "L4: give them (--prices FILE or options) to compare buying with renting.")
    assert plan["message_id"] == "plan.cost.missing"


# ------------------------------------------------------------------------------ prices: accepted range and errors

@pytest.mark.parametrize(("key", "maximum", "words"), [
    ("purchase_usd_per_gpu", 10_000_000, "10,000,000"), ("server_usd_per_gpu", 10_000_000, "10,000,000"),
    ("rent_usd_per_gpu_hour", 10_000, "10,000"), ("electricity_usd_per_kwh", 100, "100"),
    ("colocation_usd_per_kw_month", 100_000, "100,000"), ("pue", 10, "10"),
    ("operations_usd_per_node_month", 10_000_000, "10,000,000")])
def test_each_price_is_accepted_from_0_to_its_stated_maximum(key, maximum, words):
    """The range the error states ("is not a number from 0 to MAX"): both ends accepted, half a unit above refused."""
    for value in (0, maximum):  # 0 is a price too (free power, no colocation)
        prices = load_prices(**{key: value})
        assert {**prices["any_gpu"], **prices["site"]}[key]["value"] == value
    above = maximum + 0.5
    assert _prices_error(**{key: above}) == f"option: {key}: '{above}' is not a number from 0 to {words}"


def test_a_file_price_above_its_maximum_names_the_file_and_the_key(tmp_path):
    """Per-GPU table, top-level GPU key and site key from a file: each judged against its own maximum."""
    for text, key, words in (('[gpu."H100 SXM"]\nrent_usd_per_gpu_hour = 10000.5\n', "rent_usd_per_gpu_hour",
                              "10,000"),
                             ("rent_usd_per_gpu_hour = 10000.5\n", "rent_usd_per_gpu_hour", "10,000"),
                             ("pue = 10.5\n", "pue", "10")):
        path = _file(tmp_path, text)
        value = "10000.5" if key != "pue" else "10.5"
        assert _prices_error(path) == f"file {path}: {key}: '{value}' is not a number from 0 to {words}"


def test_a_boolean_or_a_long_text_is_not_a_price(tmp_path):
    """`True` is an int to Python but not a price; a text is shown cut to its first 40 characters."""
    assert _prices_error(pue=True) == "option: pue: 'True' is not a number from 0 to 10"
    path = _file(tmp_path, f'pue = "{"abcdefghij" * 5}"\n')
    assert _prices_error(path) == f"file {path}: pue: '{'abcdefghij' * 4}' is not a number from 0 to 10"


def test_structural_errors_in_a_prices_file(tmp_path):
    keys = "purchase_usd_per_gpu, server_usd_per_gpu, rent_usd_per_gpu_hour"
    all_keys = f"{keys}, electricity_usd_per_kwh, colocation_usd_per_kw_month, pue, operations_usd_per_node_month"
    path = _file(tmp_path, "gpu = 3\n")
    assert _prices_error(path) == f"file {path}: unknown price 'gpu' (known: {all_keys}, gpu.\"MODEL\".KEY)"
    path = _file(tmp_path, "[electricity_usd_per_kwh]\nvalue = 0.2\n")
    assert _prices_error(path) == (f"file {path}: electricity_usd_per_kwh: \"{{'value': 0.2}}\" is not a number from "
                                   "0 to 100")
    path = _file(tmp_path, '[gpu]\n"H100 SXM" = 3\n')
    assert _prices_error(path) == f"file {path}: gpu.'H100 SXM' must be a table of {keys}"
    path = _file(tmp_path, '[gpu."H100 SXM"]\nrent = 2\n')
    assert _prices_error(path) == f"file {path}: unknown price gpu.'H100 SXM'.rent (known: {keys})"


def test_an_unreadable_or_too_deeply_nested_prices_file(tmp_path):
    missing = tmp_path / "none.toml"
    assert _prices_error(missing) == f"--prices {missing}: cannot read it (No such file or directory)"
    path = _file(tmp_path, "a = " + "[" * 5000 + "]" * 5000 + "\n")
    assert _prices_error(path) == f"--prices {path}: nested too deeply to be a prices file"
