"""UNO placement package."""
