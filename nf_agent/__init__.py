"""UNO nf_agent package."""
