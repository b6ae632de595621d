"""The price table: USD per million tokens per model, turning usage into an estimated cost.

Keys are judge specs (``anthropic:<model>``, ``openai:<model>``). A dated
model id (``claude-sonnet-4-5-20250929``) uses the longest key it extends
with a dash. ``JUDGE_LLM_PRICES`` adds or overrides entries, e.g.
``{"openai:Qwen/Qwen3-32B": {"input": 0, "output": 0}}`` for a self-hosted
server. Where an entry gives no cache prices they follow the provider's
rules: Anthropic writes cost 1.25x input (2x with the 1 h TTL) and reads 0.1x;
OpenAI has no write surcharge and cached reads cost 0.5x unless listed.

The defaults are list prices at the time of writing, for estimates only;
a model not in the table has no cost (``None``), never a guessed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from judge_service.judges.base import Usage

ANTHROPIC_WRITE = {"5m": 1.25, "1h": 2.0}
ANTHROPIC_READ = 0.1
OPENAI_READ = 0.5


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
            + usage.output_tokens * self.output
        ) / 1e6


# spec: (input, output, cached read or None for the provider's default multiplier)
DEFAULT_PRICES: Mapping[str, tuple[float, float, float | None]] = {
    "anthropic:claude-opus-4-1": (15.0, 75.0, None),
    "anthropic:claude-opus-4-5": (5.0, 25.0, None),
    "anthropic:claude-sonnet-4": (3.0, 15.0, None),
    "anthropic:claude-sonnet-4-5": (3.0, 15.0, None),
    "anthropic:claude-haiku-4-5": (1.0, 5.0, None),
    "anthropic:claude-3-5-haiku": (0.8, 4.0, None),
    "openai:gpt-4o": (2.5, 10.0, 1.25),
    "openai:gpt-4o-mini": (0.15, 0.6, 0.075),
    "openai:gpt-4.1": (2.0, 8.0, 0.5),
    "openai:gpt-4.1-mini": (0.4, 1.6, 0.1),
    "openai:gpt-5": (1.25, 10.0, 0.125),
    "openai:gpt-5-mini": (0.25, 2.0, 0.025),
}


def _price(spec: str, values: Mapping[str, float], cache_ttl: str) -> Price:
    base = values["input"]
    if spec.startswith("anthropic:"):
        write, read = base * ANTHROPIC_WRITE.get(cache_ttl, 1.25), base * ANTHROPIC_READ
    else:
        write, read = base, base * OPENAI_READ
    return Price(
        input=base,
        output=values["output"],
        cache_write=values.get("cache_write", write),
        cache_read=values.get("cache_read", read),
    )


class PriceTable:
    def __init__(
        self, overrides: Mapping[str, Mapping[str, float]] | None = None, cache_ttl: str = "5m"
    ) -> None:
        entries: dict[str, Mapping[str, float]] = {}
        for spec, (inp, out, read) in DEFAULT_PRICES.items():
            entries[spec] = {"input": inp, "output": out} | (
                {} if read is None else {"cache_read": read}
            )
        for spec, values in (overrides or {}).items():
            missing = {"input", "output"} - set(values)
            if missing:
                raise ValueError(f"price of {spec!r} needs {sorted(missing)} (USD per Mtok)")
            entries[spec] = values
        self._prices = {spec: _price(spec, values, cache_ttl) for spec, values in entries.items()}

    def lookup(self, spec: str) -> Price | None:
        if spec in self._prices:
            return self._prices[spec]
        extended = [key for key in self._prices if spec.startswith(key + "-")]
        return self._prices[max(extended, key=len)] if extended else None

    def cost(self, spec: str, usage: Usage) -> float | None:
        price = self.lookup(spec)
        return None if price is None else round(price.cost(usage), 8)
