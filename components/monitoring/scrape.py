"""How often vLLM's /metrics is scraped on each platform: the wings configure their scrapers with these, and the
costs price the samples from them."""

# The Ops Agent's Prometheus receiver on the VM.
VM_SCRAPE_INTERVAL = "30s"
# The HPA's PodMonitoring (Managed Service for Prometheus) on GKE.
GKE_SCRAPE_INTERVAL = "15s"
