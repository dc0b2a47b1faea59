"""The cluster edge: one collector and one applier per cluster, separate processes beside Kubernetes.

They talk to the kube-apiserver and to Kafka; the decisions themselves are made centrally.
"""
