"""Buy, colocate or rent: monthly cost of a planned machine over a horizon, and the break-even utilisation.

Prices are dated defaults from knowledge/prices.toml (each with `as_of` and `source`; `source = "assumption"` where
no read source backs it), overridden by a user TOML file and by options. The result names every price it used and
where it came from, and lists the assumed ones.

Model (gpuready's own buy-vs-rent arithmetic; colocation $/kW-month from CBRE North America Data Center Trends H2 2024,
https://www.cbre.com/insights/reports/north-america-data-center-trends-h2-2024):
  buy (own room)  = (GPU + server share) x GPUs / horizon  +  kWh x PUE x price  +  operations
  colocation      = the same  +  colocation $/kW-month x full-load kW
  rent            = $/GPU-hour x GPUs x hours a month x utilisation
Energy scales with utilisation (idle power is not counted); the rest is fixed, so the break-even utilisation is
fixed / (rent per full month - energy per full month).
"""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path
from typing import Any

from gpuready.i18n import Said, json_values, said, sentence, text_of
from gpuready.knowledge import load_table
from gpuready.estimate.machine import Machine
from gpuready.estimate.power import power_plan
from gpuready.options import InputFileError, read_input_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GPU_KEYS = ("purchase_usd_per_gpu", "server_usd_per_gpu", "rent_usd_per_gpu_hour")
SITE_KEYS = ("electricity_usd_per_kwh", "colocation_usd_per_kw_month", "pue", "operations_usd_per_node_month")


PRICE_MAX = {"purchase_usd_per_gpu": 10_000_000.0, "server_usd_per_gpu": 10_000_000.0,
             "rent_usd_per_gpu_hour": 10_000.0, "electricity_usd_per_kwh": 100.0,
             "colocation_usd_per_kw_month": 100_000.0, "pue": 10.0, "operations_usd_per_node_month": 10_000_000.0}
"""The largest price accepted per key (far beyond any real one; it keeps every cost figure finite)."""


class PricesError(ValueError):
    """An unreadable prices file, an unknown price name or a value that is not a non-negative number."""


def _origin_text(origin: str) -> Said:
    """Where a price came from, in words: `file PATH` or `option`."""
    return said("error.prices.file", path=origin[len("file "):]) if origin.startswith("file ") \
        else said("error.prices.option")


def _price(value: Any, origin: str, where: str, template: dict[str, Any] | None = None) -> dict[str, Any]:
    key = where.rpartition(": ")[2]
    maximum = PRICE_MAX.get(key, 10_000_000.0)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= maximum:
        raise PricesError(sentence("error.prices.value", origin=_origin_text(where.rpartition(": ")[0]), key=key,
                                   value=repr(str(value)[:40]), maximum=maximum))
    template = template or {}
    return {"value": float(value), "unit": template.get("unit", ""), "as_of": None, "source": origin,
            "origin": origin}


def load_prices(override_path: Path | None = None, **overrides: float) -> dict[str, Any]:
    """Default prices, then a user TOML file, then keyword overrides (the last wins).

    Returns {"gpu": {MODEL: {key: price}}, "site": {key: price}, "any_gpu": {key: price}}; a price is
    {value, unit, as_of, source, origin} with origin `default`, `file PATH` or `option`. The user file may hold
    top-level keys (GPU_KEYS apply to whatever GPU is planned, SITE_KEYS to the site) and `[gpu."MODEL"]` tables of
    GPU_KEYS. PricesError for an unreadable file, an unknown key or a bad value.
    """
    table = load_table("prices")
    prices: dict[str, Any] = {"gpu": {}, "site": {}, "any_gpu": {}}
    for model, rows in table["gpu"].items():
        prices["gpu"][model] = {key: {**copy.deepcopy(row), "origin": "default"} for key, row in rows.items()}
    prices["site"] = {key: {**copy.deepcopy(row), "origin": "default"} for key, row in table["site"].items()}

    def apply(values: dict[str, Any], origin: str) -> None:
        for key, value in values.items():
            if key == "gpu" and isinstance(value, dict):
                for model, rows in value.items():
                    if not isinstance(rows, dict):
                        raise PricesError(sentence("error.prices.not_table", origin=_origin_text(origin),
                                                   model=repr(model), keys=", ".join(GPU_KEYS)))
                    for gpu_key, gpu_value in rows.items():
                        if gpu_key not in GPU_KEYS:
                            raise PricesError(sentence("error.prices.unknown_gpu_key", origin=_origin_text(origin),
                                                       model=repr(model), key=gpu_key, keys=", ".join(GPU_KEYS)))
                        old = prices["gpu"].get(model, {}).get(gpu_key)
                        prices["gpu"].setdefault(model, {})[gpu_key] = _price(gpu_value, origin,
                                                                              f"{origin}: {gpu_key}", old)
            elif key in GPU_KEYS:
                prices["any_gpu"][key] = _price(value, origin, f"{origin}: {key}")
            elif key in SITE_KEYS:
                prices["site"][key] = _price(value, origin, f"{origin}: {key}", prices["site"].get(key))
            else:
                raise PricesError(sentence("error.prices.unknown_key", origin=_origin_text(origin), key=repr(key),
                                           keys=", ".join(GPU_KEYS + SITE_KEYS)))

    if override_path is not None:
        try:
            values = tomllib.loads(read_input_text(override_path, "--prices"))
        except InputFileError as error:
            raise PricesError(text_of(error)) from None
        except tomllib.TOMLDecodeError as error:
            raise PricesError(sentence("error.prices.not_toml", path=str(override_path), error=str(error))) from None
        except RecursionError:
            raise PricesError(sentence("error.prices.nested", path=str(override_path))) from None
        apply(values, f"file {override_path}")
    apply({key: value for key, value in overrides.items() if value is not None}, "option")
    return prices


def _resolve(prices: dict[str, Any], model: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The price of each key for this GPU model (an any-GPU override first), and the keys nobody priced."""
    used, missing = {}, []
    for key in GPU_KEYS:
        row = prices.get("any_gpu", {}).get(key) or prices.get("gpu", {}).get(model, {}).get(key)
        if row is None:
            missing.append(key)
        else:
            used[key] = row
    for key in SITE_KEYS:
        row = prices.get("site", {}).get(key)
        if row is None:
            missing.append(key)
        else:
            used[key] = row
    return used, missing


def cost_plan(machine: Machine, *, horizon_months: int = 36, utilisation: float = 0.6,
              prices: dict[str, Any] | None = None) -> dict[str, Any]:
    """Monthly cost of buying (own room), colocating and renting `machine` at `utilisation`, the break-even
    utilisation of each way of owning, and the monthly holding cost as a share of the GPUs' price.

    `prices`: load_prices()'s result (None: the defaults). Where a price is missing (a GPU model the table does not
    price) the result lists it under `missing` and carries no comparison. ValueError for a horizon below one month
    or a utilisation outside 0..1.
    """
    if not isinstance(horizon_months, int) or isinstance(horizon_months, bool) or horizon_months < 1:
        raise ValueError(f"horizon_months must be a whole number of months >= 1, not {horizon_months!r}")
    if not 0 <= utilisation <= 1 or math.isnan(utilisation):
        raise ValueError(f"utilisation must be between 0 and 1, not {utilisation!r}")
    prices = load_prices() if prices is None else prices
    used, missing = _resolve(prices, machine.gpu_name)
    hours = load_table("prices")["meta"]["hours_per_month"]
    listed = [{"name": key, "value": row["value"], "unit": row.get("unit", ""), "as_of": row.get("as_of"),
               "source": row.get("source"), "origin": row.get("origin", "default")} for key, row in used.items()]
    assumed = [item["name"] for item in listed if item["origin"] == "default" and item["source"] == "assumption"]
    result: dict[str, Any] = {"machine": machine.gpu_name, "gpus": machine.gpus, "nodes": machine.nodes,
                              "horizon_months": horizon_months, "utilisation": utilisation,
                              "hours_per_month": hours, "prices": listed, "assumed": assumed, "missing": missing,
                              "refs": ["gpuready's buy-vs-rent arithmetic (own = capital / horizon + energy + operations; "
                                       "prices with their sources in knowledge/prices.toml)"]}
    if missing:
        result.update(_text(said("plan.cost.missing", missing=", ".join(missing), gpu=machine.gpu_name)))
        return result

    value = {key: row["value"] for key, row in used.items()}
    gpus, nodes = machine.gpus, machine.nodes
    power = power_plan(machine, utilisation=1.0, price_per_kwh=value["electricity_usd_per_kwh"])
    full_kw = power["full_load_w"] / 1000 * nodes
    energy_full_month = full_kw * hours * value["pue"] * value["electricity_usd_per_kwh"]
    energy = energy_full_month * utilisation
    capex = (value["purchase_usd_per_gpu"] + value["server_usd_per_gpu"]) * gpus
    depreciation = capex / horizon_months
    operations = value["operations_usd_per_node_month"] * nodes
    colocation_fee = value["colocation_usd_per_kw_month"] * full_kw
    rent_full_month = value["rent_usd_per_gpu_hour"] * gpus * hours

    fixed = {"buy": depreciation + operations, "colocation": depreciation + operations + colocation_fee}
    monthly = {"buy": fixed["buy"] + energy, "colocation": fixed["colocation"] + energy,
               "rent": rent_full_month * utilisation}
    gpu_hours = gpus * hours * utilisation
    per_gpu_hour = {way: (cost / gpu_hours if gpu_hours else None) for way, cost in monthly.items()}

    def break_even(fixed_cost: float) -> float | None:
        margin = rent_full_month - energy_full_month
        return fixed_cost / margin if margin > 0 else None

    breaks = {way: break_even(cost) for way, cost in fixed.items()}
    cheapest = min(monthly, key=lambda way: monthly[way])
    gpu_price = value["purchase_usd_per_gpu"] * gpus
    holding_share = monthly["buy"] / gpu_price if gpu_price else None
    lines = []
    for way in ("buy", "colocation"):
        be = breaks[way]
        case = "never" if be is None else "above_all" if be > 1 else "above"
        lines.append(said(f"plan.cost.break_even.{case}", way=said(f"plan.cost.way.{way}"), share=be))
    result.update({
        "full_load_kw": full_kw, "full_load_basis": power["basis"], "capex": capex,
        "monthly": {
            "buy": {"total": monthly["buy"], "depreciation": depreciation, "energy": energy,
                    "operations": operations},
            "colocation": {"total": monthly["colocation"], "depreciation": depreciation, "energy": energy,
                           "operations": operations, "colocation_fee": colocation_fee},
            "rent": {"total": monthly["rent"]},
        },
        "per_gpu_hour": per_gpu_hour,
        "total_over_horizon": {way: cost * horizon_months for way, cost in monthly.items()},
        "break_even_utilisation": breaks,
        "cheapest": cheapest,
        "holding_cost_share_per_month": holding_share,
    })
    result.update(_text(said(
        "plan.cost.summary", utilisation=utilisation, months=horizon_months, buy=monthly["buy"],
        colocation=monthly["colocation"], rent=monthly["rent"], cheapest=said(f"plan.cost.way.{cheapest}"),
        ways=lines, holding=said("plan.cost.holding", share=holding_share) if holding_share is not None else "",
        assumed=said("plan.cost.assumed", names=", ".join(assumed)) if assumed else "")))
    return result


def _text(text: Said) -> dict[str, Any]:
    """The cost section's `message` (English) and its catalogue text (`message_id`, `message_values`), which plan's
    console says in the reader's language."""
    return {"message": text.english(), "message_id": text.msg_id, "message_values": json_values(text.values)}
