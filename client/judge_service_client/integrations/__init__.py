"""One small module per RL trainer (``trl``, ``verl``, ``openrlhf``, ``slime``, ``skyrl``,
``prime_rl``) that brings the service's per-token credit into that trainer's advantages.

Deliberately import-free: each integration imports its own trainer, and only when it is
itself imported, so ``judge_service_client.integrations.trl`` never pulls in verl and vice versa.
"""
