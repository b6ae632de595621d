"""The HTTP API (FastAPI): routes per feature in `routes/`, dependencies in `deps.py`."""
