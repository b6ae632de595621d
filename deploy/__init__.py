"""Deployment files: the Helm chart, its CRDs, and the offline checks (check.py)."""
