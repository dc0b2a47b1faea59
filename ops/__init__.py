"""Process plumbing shared by the long-running processes (worker, applier, collector): metrics, health."""
