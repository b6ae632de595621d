"""`judge_service.integrations`, kept for its callers: each module re-exports its namesake
in `judge_service_client.integrations` (``trl``, ``verl``, ``openrlhf``, ``slime``,
``skyrl``, ``prime_rl``), defined once in the judge-service-client distribution (client/
of this repository). Import-free, as there: each imports its own trainer only when it is
itself imported.

One module is the server's own: ``ray_serve`` serves this app as a Ray Serve deployment
(the ``serve`` extra), for a team that runs the judge on its trainer's Ray cluster.
"""
