"""What every JSON REST edge of the product shares (the host agent's API, the sNIC agent's API)."""
