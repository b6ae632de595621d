"""judge-service-client: what a trainer needs of judge-service, without the server.

- `judge_service_client.client`: ``JudgeClient`` / ``AsyncJudgeClient`` (httpx), their
  errors, and the credit-array helpers ``credit_array`` / ``to_padded`` (numpy);
- `judge_service_client.schemas`: the wire format (pydantic models of requests, options
  and results), with its bounds (`judge_service_client.bounds`) and the default label
  scores (`judge_service_client.labels`); the one definition, which the server
  (``judge-service``) imports and re-exports as ``judge_service.schemas`` and friends;
- `judge_service_client.integrations`: one module per RL trainer (``trl``, ``verl``,
  ``openrlhf``, ``slime``, ``skyrl``, ``prime_rl``), each importing its own trainer only
  when it is itself imported; install the trainer's extra
  (``pip install 'judge-service-client[trl]'``).

This module imports nothing: the server's package root, which needs numpy alone, imports
`judge_service_client.labels` through it.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
