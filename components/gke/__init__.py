"""The GKE wing: a cluster, a flex-start TPU v5e node pool, the serving Deployment, its exposure and autoscaling."""
