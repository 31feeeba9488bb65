"""UNO snic_datapath package."""
