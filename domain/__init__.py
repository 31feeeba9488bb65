"""Shared domain types every package may import: NFs, instances, locations, virtual port numbering, and the
errors the parts raise. Nothing here does I/O or imports another package of the project."""
