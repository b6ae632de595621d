"""judge-service: per-token credit for LLM reasoning rollouts."""

__version__ = "0.1.0"
