"""`uno run`'s demo: a service chain provisioned through the agent, steered by an os-ken controller app."""
