"""The sNIC agent: a daemon that runs ON an sNIC (a DPU's Arm Linux, or the emulated sNIC's namespace) and
starts, watches and stops the NF instances placed there. The host reaches it only through its REST API on the
sNIC's management address (api.py): no shared files, no entering its namespace or cgroup. `uno snic agent
--config FILE` runs it (serve.py); `uno snic bundle` packs it for a DPU."""
