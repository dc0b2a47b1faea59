"""The ``tandem`` command: one module per subcommand."""
