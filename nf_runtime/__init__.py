"""NF instances as processes on the emulated host: start/stop, health, stats, state export, warm slots
(runtime.py, slots.py), and the agent's port mapper over OneSwitch's REST client (portmap.py)."""
