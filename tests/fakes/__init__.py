"""Small real HTTP servers on 127.0.0.1 that stand in for Google APIs and vLLM."""
