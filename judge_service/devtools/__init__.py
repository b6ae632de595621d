"""Tools for tests, benchmarks and examples: small local tokenizers and synthetic traces."""
