"""Reading what a text says, below every judge: written numbers (`numbers`) and what
markdown and LaTeX markup is structure, not claim (`markup`). Imports nothing of the
service's own above the standard library, so every layer may use it."""
