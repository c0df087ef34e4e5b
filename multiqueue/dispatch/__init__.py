"""The dispatcher: runs managedBy Jobs of the management cluster on worker clusters."""
