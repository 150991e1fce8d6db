"""What a model call cost when the agent did not say: an estimate from a maintained price table.

Many instrumentations report tokens but no cost. Where a model span has tokens and no
reported cost, its cost comes from pydantic's `genai-prices` table (provider + model,
cached and reasoning tokens where the span gives them). The span keeps
`ESTIMATED_KEY` in its attributes, naming the table, so every view can say "estimated"
beside it and an export leaves the estimate out (a re-import estimates it again, the
same way). Totals, the tokens plot, the diff and search read `cost_usd` as they always
did, so they include estimates without knowing about them.

A model the table does not know stays at cost 0: a wrong guess would be worse than none.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache, lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

ESTIMATED_KEY = "agentdesk.cost.estimated"
"""Set on a span whose cost is an estimate; its value names the price table."""


@cache
def price_table() -> str:
    """The table's name and release, for `agentdesk --version` and the span details ("genai-prices 0.2.5")."""
    try:
        return f"genai-prices {version('genai-prices')}"
    except PackageNotFoundError:
        return "no price table installed"


@lru_cache(maxsize=256)
def _model_price(model: str, provider: str | None) -> Any:
    """The table's current price for (model, provider), or None; looked up once per pair (a lookup costs ~50 µs)."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:
        return None
    snapshot = get_snapshot()
    for provider_id in ((provider, None) if provider else (None,)):
        try:
            _, info = snapshot.find_provider_model(model, None, provider_id, None)
        except LookupError:
            continue
        return info.get_prices(datetime.now(UTC))
    return None


@lru_cache(maxsize=65_536)
def estimate_cost(model: str, provider: str | None, input_tokens: int, output_tokens: int,
                  cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """USD for this usage by the table, None when the table does not know the model.

    Input tokens include the cached ones (as the GenAI conventions and OpenInference count them); the table
    prices the cached part at its own rate."""
    if not model or (input_tokens <= 0 and output_tokens <= 0):
        return None
    price = _model_price(model, provider or None)
    if price is None:
        return None
    from genai_prices import Usage

    usage = Usage(input_tokens=max(input_tokens, 0), output_tokens=max(output_tokens, 0),
                  cache_read_tokens=max(min(cache_read_tokens, input_tokens), 0),
                  cache_write_tokens=max(min(cache_write_tokens, input_tokens), 0))
    try:
        return float(price.calc_price(usage)["total_price"])
    except (ValueError, ArithmeticError, LookupError):  # a usage the table cannot price (inconsistent counts)
        return None
