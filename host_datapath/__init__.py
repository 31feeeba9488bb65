"""UNO host_datapath package."""
