"""The `uno` command: argument parsing and dispatch to the parts (main.py; one module per command group)."""
