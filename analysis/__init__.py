"""Offline tools over recorded streams and audit files: audit, report, simulate.

They run the decision core embedded (through ``streams``) and never touch a cluster.
"""
