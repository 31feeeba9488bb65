"""UNO migration package."""
