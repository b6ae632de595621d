"""The ``judge-service`` command line: one module per subcommand, each with `register`."""
