"""The state tier's host side: a local Redis Cluster's processes, the tier's topology and admin access,
per-tenant ACL users, and the tenant key prefix (docs/state.md)."""
