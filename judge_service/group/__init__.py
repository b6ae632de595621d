"""Groupwise credit (issue 30): what siblings of one GRPO group say about each other.

- `divergence`: where a wrong rollout parts from its correct siblings (no LLM needed).
- `scores`: an equal-reward group's ranking as zero-sum relative scores and credit.
"""
